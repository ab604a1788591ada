// The hostile-client soak (bench/soak/soak.py --hostile), short: real
// `rill serve` (two frontends) under ordinary load plus 1 MB ids,
// never-reading streams, abort storms with id reuse, duplicate ids and a
// SIGKILL of a frontend; then exactly one finished response per accepted
// request, no crash beyond the kill, zero running requests and KV blocks,
// and every process's RSS after the drain at most twice its value before
// the load (a gross leak, like the 4 GB that 1 MB ids once left; the 10 %
// bar of issue 27 is the 10-minute run's, `bench/soak/soak.sh --hostile`,
// which the frontend does not meet yet: see bench/soak/README.md).
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/util/python_runner.h"
#include "tests/util/subprocess.h"

namespace rill::tests::integration {
namespace {

TEST(HostileClientsTest, ShortSoakKeepsTheStreamContractAndDrainsClean) {
  const std::string out = absl::StrCat(util::TestTempDir(), "/hostile");
  absl::StatusOr<util::CommandResult> r = util::RunPython(
      "bench/soak/soak.py",
      {"--hostile", "--warmup=20", "--duration=70", "--hold_s=35", "--kill_every=30", "--clients=4",
       "--frontends=2", "--threads=2", "--max_tokens=48", "--port=0", "--drain_timeout=90",
       "--rss_tolerance=1.0", "--out=" + out, "--rill=" + util::RunfilePath("cli/rill"),
       "--serve_flag=--engine_binary=" + util::RunfilePath("engine/service/rill-engine"),
       "--serve_flag=--frontend_binary=" + util::RunfilePath("frontend/rill-frontend")});
  ASSERT_TRUE(r.ok()) << r.status();
  std::cout << r->output;
  EXPECT_EQ(r->exit_code, 0) << "soak failed; its log: " << out << "/rill-serve.log";
  EXPECT_NE(r->output.find("SOAK PASSED"), std::string::npos);
}

}  // namespace
}  // namespace rill::tests::integration
