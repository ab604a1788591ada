// rill-engine's vllm.grpc.engine.VllmEngine service (the gateway protocol)
// through a Python client generated from the pinned smg-grpc-proto files:
// tests/clients/vllm_engine_conformance.py drives every RPC against the real
// engine of a service stack (its frontend gives the reference tokens) and
// exits non-zero on any failed check.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "tests/integration/service_stack.h"
#include "tests/util/python_runner.h"

namespace rill::tests::integration {
namespace {

TEST(VllmEngineApiTest, ConformanceOfEveryRpc) {
  ServiceStack stack;
  // StartProfile writes where the engine says (its --profile_dir), never
  // where a caller asks.
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string profile_dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/vllm_profile");
  std::filesystem::create_directories(profile_dir);
  StackOptions options;
  options.engine_flags = {"--max_model_len=512", "--profile_dir=" + profile_dir};
  absl::Status started = stack.Start(options);
  ASSERT_TRUE(started.ok()) << started;
  absl::StatusOr<util::CommandResult> run =
      util::RunPython("tests/clients/vllm_engine_conformance.py",
                      {"--engine", stack.engine_address(), "--secret_file",
                       absl::StrCat(stack.run_dir(), "/engine.secret"), "--native", stack.address(),
                       "--smg_proto_dir", "proto/smg", "--rill_proto_dir", "proto"});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->exit_code, 0) << run->output;
  std::printf("%s\n", run->output.c_str());
}

}  // namespace
}  // namespace rill::tests::integration
