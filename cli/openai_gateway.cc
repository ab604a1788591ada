#include "cli/openai_gateway.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace rill::cli {
namespace {

// A free loopback port for the gateway's Prometheus listener (its default,
// 0.0.0.0:29000, would be shared by every gateway on the machine).
int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

// GET `path` from 127.0.0.1:`port` (HTTP/1.0); the raw response, or "".
std::string HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buf[4096];
      ssize_t n;
      while ((n = read(fd, buf, sizeof(buf))) > 0) response.append(buf, n);
    }
  }
  close(fd);
  return response;
}

}  // namespace

std::string VenvPython() {
  const char* venv = std::getenv("RILL_VENV");
  if (venv == nullptr || *venv == '\0') return "";
  return absl::StrCat(venv, "/bin/python");
}

absl::Status OpenAiGateway::Start(const OpenAiGatewayOptions& options) {
  options_ = options;
  if (options.python.empty() || access(options.python.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        "--openai_port needs the project venv with smg (run tools/setup.sh; RILL_VENV names "
        "it)");
  }
  std::vector<std::string> argv = {options.python, "-m", "smg.launch_router",
                                   "--host", options.host,
                                   "--port", std::to_string(options.port),
                                   "--backend", "vllm",
                                   "--policy", options.policy,
                                   "--prometheus-host", "127.0.0.1",
                                   "--prometheus-port", std::to_string(FreeLoopbackPort()),
                                   "--log-level", "warn",
                                   "--worker-urls"};
  for (const std::string& a : options.engine_addresses) argv.push_back("grpc://" + a);
  if (absl::Status s = process_.Start(argv, options.log_path); !s.ok()) return s;
  const absl::Time deadline = absl::Now() + options.start_timeout;
  while (absl::Now() < deadline) {
    if (absl::Status s = Check(); !s.ok()) return s;
    const std::string models = HttpGet(options.port, "/v1/models");
    if (absl::StrContains(models, " 200 ") && absl::StrContains(models, "\"id\"")) {
      return absl::OkStatus();
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
  Stop();
  return absl::DeadlineExceededError(absl::StrCat(
      "the OpenAI gateway (smg) did not list the engine's model within ",
      absl::FormatDuration(options.start_timeout),
      options.log_path.empty() ? "" : absl::StrCat("; see ", options.log_path)));
}

absl::Status OpenAiGateway::Check() {
  if (!process_.running()) return absl::UnavailableError("the OpenAI gateway is not running");
  absl::StatusOr<int> code = process_.Wait(absl::ZeroDuration());
  if (code.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the OpenAI gateway (smg) exited with code ", *code,
        options_.log_path.empty() ? "" : absl::StrCat("; see ", options_.log_path)));
  }
  return absl::OkStatus();
}

void OpenAiGateway::Stop() {
  if (process_.running()) (void)process_.Stop(SIGTERM, absl::Seconds(10));
}

std::string OpenAiGateway::url() const {
  return absl::StrCat("http://", options_.host, ":", options_.port, "/v1");
}

}  // namespace rill::cli
