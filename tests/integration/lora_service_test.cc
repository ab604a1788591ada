// LoRA through the whole service: rill-engine (--lora at start-up,
// --lora_root) and rill-frontend (an admin token) as processes on 127.0.0.1
// serving the default model. Admin.AddLora / ListLoras / RemoveLora over
// gRPC, Generate with a lora_name equal to the in-process engine with the
// same adapter, per-request NOT_FOUND for an unknown adapter, hostile
// adapter directories (symlinks out of the root, FIFOs, NaN weights), and
// runtime adapters surviving an engine restart (--lora_registry_file).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/async_llm_engine.h"
#include "engine/engine_factory.h"
#include "rill/v1/admin.grpc.pb.h"
#include "rill/v1/inference.grpc.pb.h"
#include "tests/integration/service_stack.h"
#include "tests/util/test_seed.h"
#include "worker/lora/lora_test_util.h"

namespace rill::tests::integration {
namespace {

namespace wt = rill::worker::testing;

constexpr int kTokens = 12;
constexpr char kPrompt[] = "The capital of France is";
constexpr char kToken[] = "lora-test-token";

std::vector<int32_t> InProcess(engine::AsyncLLMEngine* e, const std::string& lora) {
  engine::SamplingParams sp;
  sp.temperature = 0.0f;
  sp.max_tokens = kTokens;
  sp.ignore_eos = true;
  auto stream = e->Generate(kPrompt, sp, "ref-" + lora, 0, absl::InfinitePast(), lora);
  EXPECT_TRUE(stream.ok()) << stream.status();
  if (!stream.ok()) return {};
  engine::RequestOutput last;
  while (true) {
    absl::StatusOr<engine::RequestOutput> o = (*stream)->Next(absl::Seconds(120));
    if (!o.ok()) break;
    last = *o;
  }
  EXPECT_TRUE(last.finished);
  return last.outputs.empty() ? std::vector<int32_t>{} : last.outputs[0].token_ids;
}

class LoraServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const uint32_t seed = static_cast<uint32_t>(rill::tests::util::StreamSeed(0));
    std::cout << "seed " << seed << "\n";
    std::mt19937 rng(seed);
    root_ = wt::TempDir() + "/lora_root";
    std::filesystem::create_directories(root_);
    registry_file_ = wt::TempDir() + "/lora_registry.json";
    std::filesystem::remove(registry_file_);

    // Reference outputs in process first (the stack is not running yet).
    engine::EngineArgs args;
    args.threads = 2;
    args.lora_root = root_;
    auto eng = engine::CreateAsyncLLMEngine(args);
    ASSERT_TRUE(eng.ok()) << eng.status();
    const wt::TinySpec spec = wt::SpecOfModel((*eng)->GetModelConfig());
    wt::AdapterSpec a;
    a.rank = 4;
    a.targets = {"q_proj", "v_proj", "o_proj"};
    spec_ = spec;
    adapter_spec_ = a;
    rng_ = std::mt19937(seed + 1);
    for (const char* name : {"boot", "x"}) {
      ASSERT_TRUE(wt::WriteAdapter(root_ + "/" + name, a, wt::RandomAdapter(spec, a, &rng)).ok());
      ASSERT_TRUE((*eng)->AddLora({name, 0, root_ + "/" + name}).ok());
    }
    base_ = InProcess(eng->get(), "");
    boot_ = InProcess(eng->get(), "boot");
    x_ = InProcess(eng->get(), "x");
    eng->reset();

    StackOptions o;
    o.engine_flags = {absl::StrCat("--lora_root=", root_),
                      absl::StrCat("--lora=boot=", root_, "/boot"), "--max_lora_rank=16",
                      "--lora_registry_file=" + registry_file_};
    o.admin_token = kToken;
    ASSERT_TRUE(stack_.Start(o).ok());
    channel_ = stack_.NewChannel();
    inference_ = v1::Inference::NewStub(channel_);
    admin_ = v1::Admin::NewStub(channel_);
  }

  std::unique_ptr<grpc::ClientContext> AdminContext() {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->AddMetadata("authorization", absl::StrCat("Bearer ", kToken));
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return ctx;
  }

  Collected Generate(const std::string& lora, const std::string& id) {
    v1::StartRequest start = GreedyText(kPrompt, kTokens, id);
    start.set_lora_name(lora);
    absl::StatusOr<Collected> c = GenerateOnce(inference_.get(), start);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *c : Collected{};
  }

  grpc::Status AddLora(const std::string& name, const std::string& path) {
    v1::AddLoraRequest add;
    add.set_name(name);
    add.set_path(path);
    v1::AddLoraResponse added;
    auto ctx = AdminContext();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return admin_->AddLora(ctx.get(), add, &added);
  }

  std::string RegistryFile() {
    std::ifstream in(registry_file_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  std::vector<std::string> Names() {
    v1::ListLorasResponse resp;
    grpc::Status s = admin_->ListLoras(AdminContext().get(), v1::ListLorasRequest(), &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    std::vector<std::string> names;
    for (const v1::LoraAdapter& a : resp.adapters()) names.push_back(a.name());
    return names;
  }

  std::string root_;
  std::string registry_file_;
  wt::TinySpec spec_;
  wt::AdapterSpec adapter_spec_;
  std::mt19937 rng_;
  std::vector<int32_t> base_, boot_, x_;
  ServiceStack stack_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Inference::Stub> inference_;
  std::unique_ptr<v1::Admin::Stub> admin_;
};

TEST_F(LoraServiceTest, AddGenerateListRemove) {
  EXPECT_NE(base_, x_);  // The adapter changes the output.
  EXPECT_EQ(Names(), std::vector<std::string>{"boot"});
  EXPECT_EQ(Generate("boot", "g-boot").token_ids, boot_);

  v1::AddLoraRequest add;
  add.set_name("x");
  add.set_path(root_ + "/x");
  v1::AddLoraResponse added;
  grpc::Status s = admin_->AddLora(AdminContext().get(), add, &added);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(added.adapter().name(), "x");
  EXPECT_EQ(added.adapter().rank(), 4);
  EXPECT_GT(added.adapter().id(), 0);
  EXPECT_EQ(Names(), (std::vector<std::string>{"boot", "x"}));

  EXPECT_EQ(Generate("x", "g-x").token_ids, x_);
  EXPECT_EQ(Generate("", "g-base").token_ids, base_);

  // Unknown adapter: that request fails with NOT_FOUND, nothing else does.
  Collected unknown = Generate("nope", "g-nope");
  EXPECT_EQ(unknown.status.code(), grpc::StatusCode::NOT_FOUND) << unknown.status.message();
  EXPECT_NE(unknown.status.message().find("nope"), std::string::npos);

  // Bad AddLora calls: clear codes, and the engine keeps serving.
  add.set_name("outside");
  add.set_path("/etc");
  EXPECT_EQ(admin_->AddLora(AdminContext().get(), add, &added).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  add.set_name("missing");
  add.set_path(root_ + "/missing");
  EXPECT_EQ(admin_->AddLora(AdminContext().get(), add, &added).error_code(),
            grpc::StatusCode::NOT_FOUND);
  wt::AdapterSpec big;
  big.rank = 32;  // Above --max_lora_rank=16.
  ASSERT_TRUE(wt::WriteAdapter(root_ + "/big", big, {}).ok());
  add.set_name("big");
  add.set_path(root_ + "/big");
  s = admin_->AddLora(AdminContext().get(), add, &added);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("max_lora_rank"), std::string::npos) << s.error_message();
  // A weights file whose data_offsets run past its data: INVALID_ARGUMENT
  // naming the tensor, as the README promises (was DATA_LOSS).
  {
    wt::AdapterSpec a;
    a.rank = 4;
    a.targets = {"q_proj"};
    const std::string dir = root_ + "/offsets";
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/adapter_config.json") << wt::AdapterConfigJson(a);
    const std::string header =
        R"({"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight":)"
        R"({"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
    std::string file(8, '\0');
    for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    file += header + std::string(4, '\0');  // 4 of the 16 bytes.
    std::ofstream(dir + "/adapter_model.safetensors", std::ios::binary) << file;
    add.set_name("offsets");
    add.set_path(dir);
    s = admin_->AddLora(AdminContext().get(), add, &added);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_NE(s.error_message().find("q_proj.lora_A.weight"), std::string::npos)
        << s.error_message();
    EXPECT_NE(s.error_message().find("data_offsets"), std::string::npos) << s.error_message();
  }
  grpc::ClientContext no_token;
  EXPECT_EQ(admin_->AddLora(&no_token, add, &added).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);

  v1::RemoveLoraRequest rm;
  rm.set_name("x");
  v1::RemoveLoraResponse removed;
  s = admin_->RemoveLora(AdminContext().get(), rm, &removed);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(admin_->RemoveLora(AdminContext().get(), rm, &removed).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Generate("x", "g-x-removed").status.code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Names(), std::vector<std::string>{"boot"});
  EXPECT_EQ(Generate("", "g-base-after").token_ids, base_);
}

// Adapter directories a hostile client may name under --lora_root: a
// symlink inside pointing out of the root (PERMISSION_DENIED), a FIFO where
// a file should be (INVALID_ARGUMENT at once, never a blocked server
// thread), and NaN / infinite weights (INVALID_ARGUMENT naming the tensor).
TEST_F(LoraServiceTest, HostileAdapterDirectoriesAreRefused) {
  namespace fs = std::filesystem;
  const std::string outside = wt::TempDir() + "/outside_root";
  ASSERT_TRUE(wt::WriteAdapter(outside, adapter_spec_,
                               wt::RandomAdapter(spec_, adapter_spec_, &rng_)).ok());
  const std::string config = outside + "/adapter_config.json";
  const std::string weights = outside + "/adapter_model.safetensors";

  // Weights, then the config, linked from inside the root to outside it.
  fs::create_directories(root_ + "/linked_weights");
  fs::copy_file(config, root_ + "/linked_weights/adapter_config.json");
  fs::create_symlink(weights, root_ + "/linked_weights/adapter_model.safetensors");
  grpc::Status s = AddLora("linked_weights", root_ + "/linked_weights");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_NE(s.error_message().find("outside the allowed root"), std::string::npos)
      << s.error_message();
  fs::create_directories(root_ + "/linked_config");
  fs::create_symlink(config, root_ + "/linked_config/adapter_config.json");
  fs::copy_file(weights, root_ + "/linked_config/adapter_model.safetensors");
  EXPECT_EQ(AddLora("linked_config", root_ + "/linked_config").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  // A symlink that stays inside the root is fine.
  fs::create_directories(root_ + "/linked_inside");
  fs::create_symlink(root_ + "/x/adapter_config.json", root_ + "/linked_inside/adapter_config.json");
  fs::create_symlink(root_ + "/x/adapter_model.safetensors",
                     root_ + "/linked_inside/adapter_model.safetensors");
  s = AddLora("linked_inside", root_ + "/linked_inside");
  EXPECT_TRUE(s.ok()) << s.error_message();

  // FIFOs: refused at once (the call's deadline is 30 s; the old server
  // blocked in open() for good).
  for (const char* file : {"adapter_model.safetensors", "adapter_config.json"}) {
    const std::string dir = root_ + "/fifo_" + file;
    fs::create_directories(dir);
    if (std::string(file) == "adapter_config.json") {
      fs::copy_file(weights, dir + "/adapter_model.safetensors");
    } else {
      fs::copy_file(config, dir + "/adapter_config.json");
    }
    ASSERT_EQ(mkfifo((dir + "/" + file).c_str(), 0600), 0);
    const absl::Time start = absl::Now();
    s = AddLora(absl::StrCat("fifo-", file), dir);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << file << ": " << s.error_message();
    EXPECT_NE(s.error_message().find("not a regular file"), std::string::npos) << s.error_message();
    EXPECT_LT(absl::Now() - start, absl::Seconds(20)) << file;
  }

  // Non-finite weights.
  const float bad_values[] = {std::nanf(""), INFINITY};
  for (const float bad : bad_values) {
    wt::Weights w = wt::RandomAdapter(spec_, adapter_spec_, &rng_);
    auto victim = w.begin();
    victim->second.values[1] = bad;
    const std::string dir = absl::StrCat(root_, "/nonfinite_", std::isnan(bad) ? "nan" : "inf");
    ASSERT_TRUE(wt::WriteAdapter(dir, adapter_spec_, w).ok());
    s = AddLora(absl::StrCat("nonfinite-", std::isnan(bad) ? "nan" : "inf"), dir);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_NE(s.error_message().find(victim->first), std::string::npos) << s.error_message();
  }

  EXPECT_EQ(Names(), (std::vector<std::string>{"boot", "linked_inside"}));
  EXPECT_EQ(Generate("", "g-base-after-hostile").token_ids, base_);
  EXPECT_EQ(Generate("linked_inside", "g-linked").token_ids, x_);
}

// Runtime adapters are kept in --lora_registry_file and come back when the
// engine is restarted (here: killed, then restarted by the supervisor).
TEST_F(LoraServiceTest, RuntimeAdaptersSurviveAnEngineRestart) {
  ASSERT_TRUE(AddLora("x", root_ + "/x").ok());
  EXPECT_NE(RegistryFile().find("\"x\""), std::string::npos) << RegistryFile();
  EXPECT_EQ(RegistryFile().find("boot"), std::string::npos) << RegistryFile();  // Start-up: not kept.

  const int engine = stack_.ChildPid("engine");
  ASSERT_GT(engine, 0);
  ASSERT_EQ(kill(engine, SIGKILL), 0);
  ASSERT_TRUE(WaitForHealth(channel_, false, absl::Seconds(30)).ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(240);
  bool serving = false;
  while (absl::Now() < deadline && !serving) {
    ASSERT_TRUE(stack_.launcher()->Supervise().ok());
    absl::StatusOr<bool> up = IsServing(channel_);
    serving = up.ok() && *up;
    if (!serving) absl::SleepFor(absl::Milliseconds(250));
  }
  ASSERT_TRUE(serving) << "the engine did not come back";
  EXPECT_NE(stack_.ChildPid("engine"), engine);
  EXPECT_EQ(Names(), (std::vector<std::string>{"boot", "x"}));
  EXPECT_EQ(Generate("x", "g-x-restarted").token_ids, x_);

  v1::RemoveLoraRequest rm;
  rm.set_name("x");
  v1::RemoveLoraResponse removed;
  ASSERT_TRUE(admin_->RemoveLora(AdminContext().get(), rm, &removed).ok());
  EXPECT_EQ(RegistryFile().find("\"x\""), std::string::npos) << RegistryFile();
}

}  // namespace
}  // namespace rill::tests::integration
