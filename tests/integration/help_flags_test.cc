// `--help` on every Rill binary, as a new user tries it first: exits 0 and
// lists that binary's own flags (absl's default printed "No flags matched."
// and exited 1), and not another binary's.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/util/python_runner.h"
#include "tests/util/subprocess.h"

namespace rill::tests::integration {
namespace {


std::string RunBinary(const std::string& binary, const std::string& args, int* exit_code) {
  util::CommandResult r =
      util::RunCommand(util::ShellQuote(util::RunfilePath(binary)) + args + " 2>&1");
  *exit_code = r.exit_code;
  return r.output;
}

TEST(HelpFlagsTest, EveryBinaryListsItsOwnFlagsAndExitsZero) {
  struct Case {
    std::string binary;
    std::string args;
    std::vector<std::string> listed;
    std::vector<std::string> not_listed;
  };
  const std::vector<Case> cases = {
      // Frontend options too (frontend_options.h), but not a frontend's launch
      // options, which rill serve sets for each frontend itself.
      {"cli/rill", " serve --help",
       {"--frontends", "--engine_flags", "--kv_cache_mb", "--max_num_seqs", "--backend",
        "--tensor_parallel_size", "--frontend_flags", "--max_pending_requests",
        "--client_send_buffer", "--max_n", "--tls_cert", "--engine_tls_cert"},
       {"--prompt", "--engine_secret_file", "--frontend_id", "--reuse_port", "--port_file"}},
      {"cli/rill", " generate --help", {"--prompt", "--model", "--backend"}, {"--kv_cache_mb"}},
      {"engine/service/rill-engine", " --help",
       {"--kv_cache_mb", "--max_num_seqs", "--backend", "--engine_secret_file", "--port_file"},
       {"--frontends", "--engine_wait_s"}},
      {"frontend/rill-frontend", " --help",
       {"--engine_wait_s", "--max_pending_requests", "--tls_cert", "--engine", "--frontend_id",
        "--port_file", "--engine_tls_server_name"},
       {"--kv_cache_mb", "--frontends"}},
      {"worker/rill-worker", " --help", {"--control_socket", "--rank"}, {"--port"}},
      {"bench/serve_bench/rill-bench-serve", " --help", {"--concurrency", "--out_json"},
       {"--kv_cache_mb"}},
  };
  for (const Case& c : cases) {
    int code = -1;
    const std::string out = RunBinary(c.binary, c.args, &code);
    EXPECT_EQ(code, 0) << c.binary << c.args << "\n" << out;
    EXPECT_EQ(out.find("No flags matched"), std::string::npos) << c.binary << c.args;
    // A flag's own entry ("  --name (default: ..."), not a mention in help text.
    auto entry = [](const std::string& flag) { return "  " + flag + " ("; };
    for (const std::string& flag : c.listed) {
      EXPECT_NE(out.find(entry(flag)), std::string::npos) << c.binary << c.args << " lacks " << flag
                                                   << "\n" << out;
    }
    for (const std::string& flag : c.not_listed) {
      EXPECT_EQ(out.find(entry(flag)), std::string::npos) << c.binary << c.args << " lists " << flag
                                                   << "\n" << out;
    }
  }
}

TEST(HelpFlagsTest, RillAloneListsItsCommands) {
  int code = -1;
  const std::string out = RunBinary("cli/rill", " --help", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("serve"), std::string::npos) << out;
  EXPECT_NE(out.find("generate"), std::string::npos) << out;
}

}  // namespace
}  // namespace rill::tests::integration
