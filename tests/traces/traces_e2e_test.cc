// OpenTelemetry traces of a real `rill serve` (engine + frontend processes)
// exported to a recording OTLP/HTTP endpoint, checked by
// tests/traces/traces_e2e.py: trace ids and the parent/child structure
// (client span -> llm_request -> queue/prefill/decode), fresh traces without
// a valid traceparent, VllmEngine/Generate spans under the traceparent of
// its gRPC metadata, and serving unaffected by a dead collector.
#include <gtest/gtest.h>

#include "tests/util/python_runner.h"
#include "tests/util/subprocess.h"

namespace rill::tests::traces {
namespace {

TEST(TracesE2eTest, RequestSpansReachTheCollectorWithTheClientsTraceId) {
  absl::StatusOr<util::CommandResult> run = util::RunPython(
      "tests/traces/traces_e2e.py",
      {"--rill", util::RunfilePath("cli/rill"), "--engine_binary",
       util::RunfilePath("engine/service/rill-engine"), "--frontend_binary",
       util::RunfilePath("frontend/rill-frontend"), "--proto_dir", "proto", "--smg_proto_dir",
       "proto/smg"});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->exit_code, 0) << run->output;
}

}  // namespace
}  // namespace rill::tests::traces
