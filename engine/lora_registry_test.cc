#include "engine/lora_registry.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

#include "worker/lora/lora_adapter.h"

namespace rill::engine {
namespace {

// A loader that counts loads per path and fails for paths containing "bad".
struct FakeLoader {
  std::map<std::string, int> loads;
  std::vector<std::string> roots;  // Of every load, in order.
  LoraRegistry::Loader Get() {
    return
        [this](const std::string& path,
               const std::string& root) -> absl::StatusOr<std::shared_ptr<const worker::LoraAdapter>> {
          if (path.find("bad") != std::string::npos)
            return absl::InvalidArgumentError("bad " + path);
          ++loads[path];
          roots.push_back(root);
          auto a = std::make_shared<worker::LoraAdapter>();
          a->rank = static_cast<int>(path.size());
          a->path = path;
          return std::shared_ptr<const worker::LoraAdapter>(a);
        };
  }
};

TEST(LoraRegistryTest, AddListRemoveAndIds) {
  FakeLoader f;
  LoraRegistry r(f.Get(), 4);
  absl::StatusOr<LoraInfo> a = r.Add({"a", 0, "/p/a"});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->id, 1);
  EXPECT_EQ(a->rank, 4);
  absl::StatusOr<LoraInfo> b = r.Add({"b", 7, "/p/b"});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->id, 7);
  EXPECT_EQ(r.Add({"c", 0, "/p/c"})->id, 8);
  EXPECT_EQ(r.Add({"a", 0, "/p/x"}).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(r.Add({"d", 7, "/p/x"}).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(r.Add({"", 0, "/p/x"}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.Add({"e", 0, "/bad"}).status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<LoraInfo> list = r.List();
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0].name, "a");
  EXPECT_EQ(list[2].name, "c");
  EXPECT_TRUE(r.Remove("b").ok());
  EXPECT_EQ(r.Remove("b").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(r.Acquire("b").status().code(), absl::StatusCode::kNotFound);
}

TEST(LoraRegistryTest, HandlesOutliveRemovalAndKeysAreFreshPerLoad) {
  FakeLoader f;
  LoraRegistry r(f.Get(), 4);
  ASSERT_TRUE(r.Add({"a", 0, "/p/a"}).ok());
  absl::StatusOr<LoraHandle> h = r.Acquire("a");
  ASSERT_TRUE(h.ok());
  EXPECT_NE(h->cache_key, 0u);
  ASSERT_TRUE(r.Remove("a").ok());
  EXPECT_EQ(h->adapter->path, "/p/a");  // Still usable by its request.
  ASSERT_TRUE(r.Add({"a", 0, "/p/a"}).ok());
  absl::StatusOr<LoraHandle> h2 = r.Acquire("a");
  ASSERT_TRUE(h2.ok());
  EXPECT_NE(h2->cache_key, h->cache_key);
}

TEST(LoraRegistryTest, LruEvictsLeastRecentlyUsedAndReloads) {
  FakeLoader f;
  LoraRegistry r(f.Get(), 2);
  ASSERT_TRUE(r.Add({"a", 0, "/p/a"}).ok());
  ASSERT_TRUE(r.Add({"b", 0, "/p/b"}).ok());
  ASSERT_TRUE(r.Acquire("a").ok());           // a is now the most recent.
  ASSERT_TRUE(r.Add({"c", 0, "/p/c"}).ok());  // Evicts b.
  EXPECT_EQ(r.num_loaded(), 2);
  std::vector<LoraInfo> list = r.List();
  EXPECT_TRUE(list[0].loaded);
  EXPECT_FALSE(list[1].loaded);
  EXPECT_TRUE(list[2].loaded);
  EXPECT_EQ(f.loads["/p/b"], 1);
  ASSERT_TRUE(r.Acquire("b").ok());  // Reload; evicts a.
  EXPECT_EQ(f.loads["/p/b"], 2);
  EXPECT_FALSE(r.List()[0].loaded);
  EXPECT_EQ(r.num_loaded(), 2);
}

TEST(ResolveLoraPathTest, OnlyUnderTheRoot) {
  namespace fs = std::filesystem;
  const std::string tmp = getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp";
  const std::string root = tmp + "/root";
  fs::create_directories(root + "/x");
  fs::create_directories(tmp + "/rootless");
  std::ofstream(tmp + "/secret") << "s";
  fs::create_symlink(tmp, root + "/up");
  EXPECT_EQ(ResolveLoraPath("", root + "/x").status().code(), absl::StatusCode::kPermissionDenied);
  absl::StatusOr<std::string> ok = ResolveLoraPath(root, root + "/x");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(*ok, fs::canonical(root + "/x").string());
  EXPECT_TRUE(ResolveLoraPath(root, "x").ok());  // Relative to the root.
  EXPECT_EQ(ResolveLoraPath(root, root + "/../secret").status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ResolveLoraPath(root, tmp + "/rootless").status().code(),
            absl::StatusCode::kPermissionDenied);  // A prefix of the name is not "under".
  EXPECT_EQ(ResolveLoraPath(root, root + "/up/secret").status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ResolveLoraPath(root, root + "/missing").status().code(), absl::StatusCode::kNotFound);
  absl::Status s = ResolveLoraPath(root, "/etc/passwd").status();
  EXPECT_NE(s.message().find("/etc/passwd"), std::string::npos) << s;
}

// A runtime adapter's root confines its reloads after eviction too.
TEST(LoraRegistryTest, RootIsPassedToEveryLoadOfThatAdapter) {
  FakeLoader f;
  LoraRegistry r(f.Get(), 1);
  ASSERT_TRUE(r.Add({"confined", 0, "/root/a"}, "/root").ok());
  ASSERT_TRUE(r.Add({"trusted", 0, "/boot/b"}).ok());  // Evicts "confined".
  ASSERT_TRUE(r.Acquire("confined").ok());               // Reloaded.
  EXPECT_EQ(f.roots, (std::vector<std::string>{"/root", "", "/root"}));
}

}  // namespace
}  // namespace rill::engine
