// Prometheus /metrics of a real `rill serve` (engine + frontend processes),
// checked by tests/metrics/metrics_e2e.py with prometheus_client's parser:
// every family with its type and labels, a known workload counted exactly,
// the gauges back to 0, Admin.GetStats equal to /metrics and one
// --log_requests line per finished request; the Grafana dashboard queries
// only metrics that exist.
#include <gtest/gtest.h>

#include "tests/util/python_runner.h"
#include "tests/util/subprocess.h"

namespace rill::tests::metrics {
namespace {

TEST(MetricsE2eTest, ServeExposesVllmMetricsThatCountAKnownWorkload) {
  absl::StatusOr<util::CommandResult> run =
      util::RunPython("tests/metrics/metrics_e2e.py",
                      {"--rill", util::RunfilePath("cli/rill"), "--engine_binary",
                       util::RunfilePath("engine/service/rill-engine"), "--frontend_binary",
                       util::RunfilePath("frontend/rill-frontend"), "--proto_dir", "proto",
                       "--dashboard", "deploy/grafana/rill-dashboard.json"});
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->exit_code, 0) << run->output;
}

}  // namespace
}  // namespace rill::tests::metrics
