// Test-only: a FakeEngine as a process (for the Python client and manual runs).
#include <unistd.h>

#include <fstream>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "frontend/testing/fake_engine.h"

ABSL_FLAG(int, port, 0, "Port; 0 picks one.");
ABSL_FLAG(std::string, port_file, "", "Written with the port once listening.");
ABSL_FLAG(int, token_delay_ms, 0, "Delay per token.");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  auto spec = rill::frontend::testing::DefaultModelSpec();
  if (!spec.ok()) return 2;
  rill::frontend::testing::FakeEngine engine(*spec);
  if (!engine.Start(absl::GetFlag(FLAGS_port)).ok()) return 1;
  engine.set_token_delay_ms(absl::GetFlag(FLAGS_token_delay_ms));
  std::vector<int32_t> script;
  for (int i = 0; i < 50; ++i) script.push_back(100 + i);
  engine.set_script(script);
  if (!absl::GetFlag(FLAGS_port_file).empty()) {
    std::ofstream(absl::GetFlag(FLAGS_port_file)) << engine.port() << "\n";
  }
  pause();
  return 0;
}
