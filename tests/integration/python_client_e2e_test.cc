// The reference Python client (PyPI grpcio, stubs generated from proto/ at
// run time) against the real service: rill-engine with two tensor-parallel
// rill-worker processes behind rill-frontend. It streams two generations on
// one Generate stream, aborts one mid-way, reads the model and server config
// and both health checks (tests/clients/python_client.py exits non-zero on
// any failure). Then the parallel section of the server config says TP=2.
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "rill/v1/inference.grpc.pb.h"
#include "tests/integration/service_stack.h"
#include "tests/util/python_runner.h"
#include "tests/util/subprocess.h"

namespace rill::tests::integration {
namespace {

TEST(PythonClientE2eTest, StreamsAbortsAndReadsConfigOverTensorParallelStack) {
  ServiceStack stack;
  StackOptions options;
  options.tensor_parallel_size = 2;
  absl::Status started = stack.Start(options);
  ASSERT_TRUE(started.ok()) << started;
  absl::StatusOr<util::CommandResult> run = util::RunPython(
      "tests/clients/python_client.py", {"--target", stack.address(), "--proto_dir", "proto"});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->exit_code, 0) << run->output;

  auto stub = v1::Inference::NewStub(stack.NewChannel());
  grpc::ClientContext ctx;
  v1::ServerConfig config;
  ASSERT_TRUE(stub->GetServerConfig(&ctx, v1::GetServerConfigRequest(), &config).ok());
  EXPECT_EQ(config.parallel().tensor_parallel_size(), 2);
  EXPECT_EQ(config.parallel().communicator(), "gloo");
}

}  // namespace
}  // namespace rill::tests::integration
