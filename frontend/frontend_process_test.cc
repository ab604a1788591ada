// rill-frontend as a separate process (its real flags) in front of an
// in-process fake engine; the Python reference client runs against it.
#include <signal.h>

#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "frontend/testing/fake_engine.h"
#include "tests/util/python_runner.h"
#include "tests/util/subprocess.h"
#include "rill/v1/inference.grpc.pb.h"

namespace rill::frontend::testing {
namespace {

// Starts rill-frontend with its real flags (plus `extra`) in front of
// `engine` and returns its port once it listens.
int StartFrontend(const FakeEngine& engine, const std::string& name,
                  const std::vector<std::string>& extra, rill::tests::util::Subprocess* child) {
  const std::string port_file = absl::StrCat(rill::tests::util::TestTempDir(), "/", name, ".port");
  std::vector<std::string> argv = {rill::tests::util::RunfilePath("frontend/rill-frontend"),
                                   "--host=127.0.0.1", "--port=0", "--port_file=" + port_file,
                                   "--engine=" + engine.address()};
  argv.insert(argv.end(), extra.begin(), extra.end());
  absl::Status started = child->Start(argv);
  EXPECT_TRUE(started.ok()) << started;
  absl::StatusOr<std::string> port =
      rill::tests::util::WaitForFile(port_file, absl::Seconds(60), child);
  EXPECT_TRUE(port.ok()) << port.status();
  int n = 0;
  return port.ok() && absl::SimpleAtoi(absl::StripAsciiWhitespace(*port), &n) ? n : 0;
}

// A fake engine on the default model's tokenizer that streams 40 scripted
// tokens, `token_delay_ms` apart.
void StartScriptedEngine(FakeEngine* engine, int token_delay_ms) {
  ASSERT_TRUE(engine->Start().ok());
  std::vector<int32_t> script;
  for (int i = 0; i < 40; ++i) script.push_back(300 + i);
  engine->set_script(script);
  engine->set_token_delay_ms(token_delay_ms);
}

TEST(FrontendProcessTest, BinaryServesGenerateAndPythonClient) {
  auto spec = DefaultModelSpec();
  if (!spec.ok()) GTEST_SKIP() << spec.status();
  FakeEngine engine(*spec);
  ASSERT_NO_FATAL_FAILURE(StartScriptedEngine(&engine, 5));

  rill::tests::util::Subprocess frontend;
  const int port = StartFrontend(engine, "fe", {"--frontend_id=p1"}, &frontend);
  ASSERT_GT(port, 0);
  const std::string target = absl::StrCat("127.0.0.1:", port);
  auto stub = rill::v1::Inference::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    ctx.set_wait_for_ready(true);
    rill::v1::Load load;
    ASSERT_TRUE(stub->GetLoad(&ctx, {}, &load).ok());
    EXPECT_EQ(load.frontend_id(), "p1");
  }
  {
    grpc::ClientContext ctx;
    auto stream = stub->Generate(&ctx);
    rill::v1::GenerateRequest req;
    req.mutable_start()->set_text("Hello");
    req.mutable_start()->mutable_sampling()->set_max_tokens(5);
    stream->Write(req);
    stream->WritesDone();
    rill::v1::GenerateResponse r;
    bool finished = false;
    while (stream->Read(&r)) finished |= r.finished();
    EXPECT_TRUE(finished);
    EXPECT_TRUE(stream->Finish().ok());
  }
  const absl::StatusOr<std::string> py = rill::tests::util::VenvPython();
  if (py.ok()) {
    std::string cmd = absl::StrCat(*py, " tests/clients/python_client.py --target ", target,
                                   " --proto_dir proto");
    EXPECT_EQ(system(cmd.c_str()), 0) << cmd;
  }
  frontend.SignalGroup(SIGTERM);
  absl::StatusOr<int> code = frontend.Wait(absl::Seconds(30));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << rill::base::DescribeExitCode(*code);
}

// SIGTERM: a short request finishes normally inside the grace period, a long
// one ends with finish_reason ABORT (aborted at the engine), exit status 0.
TEST(FrontendProcessTest, SigtermDrainsThenAborts) {
  auto spec = DefaultModelSpec();
  if (!spec.ok()) GTEST_SKIP() << spec.status();
  FakeEngine engine(*spec);
  ASSERT_NO_FATAL_FAILURE(StartScriptedEngine(&engine, 50));

  rill::tests::util::Subprocess frontend;
  const int port = StartFrontend(engine, "fe_term", {"--shutdown_grace_ms=3000"}, &frontend);
  ASSERT_GT(port, 0);
  auto stub = rill::v1::Inference::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  auto start = [](const std::string& id, int max_tokens) {
    rill::v1::GenerateRequest req;
    req.mutable_start()->set_request_id(id);
    req.mutable_start()->set_text("Hello");
    req.mutable_start()->mutable_sampling()->set_max_tokens(max_tokens);
    return req;
  };
  grpc::ClientContext short_ctx, long_ctx;
  short_ctx.set_wait_for_ready(true);
  long_ctx.set_wait_for_ready(true);
  auto short_stream = stub->Generate(&short_ctx);
  auto long_stream = stub->Generate(&long_ctx);
  short_stream->Write(start("short", 10));  // ~0.5 s at 50 ms a token.
  long_stream->Write(start("long", 100000));
  rill::v1::GenerateResponse r;
  ASSERT_TRUE(short_stream->Read(&r));
  ASSERT_TRUE(long_stream->Read(&r));
  frontend.SignalGroup(SIGTERM);
  rill::v1::GenerateResponse last;
  while (short_stream->Read(&r)) last = r;
  EXPECT_TRUE(last.finished());
  EXPECT_EQ(last.status().code(), 0);
  ASSERT_GT(last.outputs_size(), 0);
  EXPECT_EQ(last.outputs(0).finish_reason(), rill::v1::FINISH_REASON_LENGTH);
  last.Clear();
  while (long_stream->Read(&r)) last = r;
  EXPECT_TRUE(last.finished());
  ASSERT_GT(last.outputs_size(), 0);
  EXPECT_EQ(last.outputs(0).finish_reason(), rill::v1::FINISH_REASON_ABORT);
  EXPECT_TRUE(engine.WaitForAbort("long", absl::Seconds(10)));
  absl::StatusOr<int> code = frontend.Wait(absl::Seconds(30));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << rill::base::DescribeExitCode(*code);
}

}  // namespace
}  // namespace rill::frontend::testing
