#include "base/secret_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "base/call_auth.h"
#include "gtest/gtest.h"

namespace rill::base {
namespace {

std::string TempPath(const std::string& name) {
  return absl::StrCat(::testing::TempDir(), "/", name, ".", getpid());
}

TEST(SecretFileTest, WrittenWithMode0600AndReadBack) {
  absl::StatusOr<std::string> secret = NewRandomSecret();
  ASSERT_TRUE(secret.ok()) << secret.status();
  EXPECT_EQ(secret->size(), 64u);
  EXPECT_NE(*secret, *NewRandomSecret());
  const std::string path = TempPath("secret");
  {
    std::ofstream old(path);  // An existing, world-readable file is replaced.
    old << "old";
  }
  chmod(path.c_str(), 0644);
  ASSERT_TRUE(WriteSecretFile(path, *secret).ok());
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  absl::StatusOr<std::string> read = ReadSecretFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, *secret);  // The trailing newline is stripped.
}

TEST(SecretFileTest, BadFilesAreRefusedNamingThem) {
  const std::string empty = TempPath("empty");
  std::ofstream(empty) << "  \n";
  EXPECT_EQ(ReadSecretFile(empty).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadSecretFile(TempPath("absent")).status().code(),
            absl::StatusCode::kInvalidArgument);
  const std::string fifo = TempPath("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  absl::Status s = ReadSecretFile(fifo).status();  // Must not block.
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(fifo), std::string::npos) << s;
  const std::string binary = TempPath("binary");
  std::ofstream(binary) << "abc\x01" "def";
  EXPECT_EQ(ReadSecretFile(binary).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SecretFileTest, OptionalFileMayBeAbsentButNotBad) {
  absl::StatusOr<std::string> absent = ReadOptionalSecretFile(TempPath("no-such-token"));
  ASSERT_TRUE(absent.ok()) << absent.status();
  EXPECT_EQ(*absent, "");
  const std::string empty = TempPath("empty-token");
  std::ofstream(empty) << "\n";
  EXPECT_EQ(ReadOptionalSecretFile(empty).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SecretEqualsTest, ComparesWholeValues) {
  EXPECT_TRUE(SecretEquals("abc", "abc"));
  EXPECT_FALSE(SecretEquals("abd", "abc"));
  EXPECT_FALSE(SecretEquals("ab", "abc"));
  EXPECT_FALSE(SecretEquals("abcd", "abc"));
  EXPECT_FALSE(SecretEquals("", "abc"));
}

}  // namespace
}  // namespace rill::base
