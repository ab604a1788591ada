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
#include "base/port_reservation.h"

namespace rill::cli {
namespace {

// A free loopback port for the gateway's Prometheus listener (its default,
// 0.0.0.0:29000, would be shared by every gateway on the machine); 0 if none.
int FreeLoopbackPort() {
  absl::StatusOr<base::PortReservation> port = base::PortReservation::Reserve("127.0.0.1", 0);
  return port.ok() ? port->port() : 0;  // Released here, for smg to bind.
}

// `method` `path` (with a JSON `body` unless empty) to 127.0.0.1:`port`
// (HTTP/1.0); the raw response, or "".
std::string Http(int port, const std::string& method, const std::string& path,
                 const std::string& body = "") {
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
    std::string request = absl::StrCat(method, " ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n");
    if (!body.empty()) {
      absl::StrAppend(&request, "Content-Type: application/json\r\nContent-Length: ", body.size(),
                      "\r\n");
    }
    absl::StrAppend(&request, "\r\n", body);
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buf[4096];
      ssize_t n;
      while ((n = read(fd, buf, sizeof(buf))) > 0) response.append(buf, n);
    }
  }
  close(fd);
  return response;
}

bool StatusIs200(const std::string& response) {
  return absl::StrContains(response.substr(0, response.find("\r\n")), " 200");
}

// Runs smg's own launcher with its one admin control-plane key read from
// the file in argv[1] (smg takes keys only as flags, which `ps` shows);
// smg's flags follow.
constexpr char kLaunchWithAdminKey[] = R"py(
import sys
from smg.launch_router import launch_router, parse_router_args
with open(sys.argv[1]) as f:
    key = f.read().strip()
args = parse_router_args(sys.argv[2:])
args.control_plane_api_keys = [("rill-serve", "rill serve", key, "admin")]
launch_router(args)
)py";

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
  if (options.admin_key_file.empty()) {
    return absl::InvalidArgumentError("the gateway needs a control-plane key file");
  }
  std::vector<std::string> argv = {options.python, "-c", kLaunchWithAdminKey,
                                   options.admin_key_file,
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
    // Ready once a one-token completion (or, for an embedding model, an
    // embedding) goes through: the engine is registered and the gateway has
    // built its tokenizer (GetTokenizer).
    const std::string models = Http(options.port, "GET", "/v1/models");
    const size_t id = models.find("\"id\":\"");
    if (absl::StrContains(models, " 200 ") && id != std::string::npos) {
      const size_t start = id + 6;
      const std::string model = models.substr(start, models.find('"', start) - start);
      const std::string completion = Http(
          options.port, "POST", "/v1/completions",
          absl::StrCat("{\"model\":\"", model, "\",\"prompt\":\"ready?\",\"max_tokens\":1}"));
      if (StatusIs200(completion)) return absl::OkStatus();
      const std::string embedding =
          Http(options.port, "POST", "/v1/embeddings",
               absl::StrCat("{\"model\":\"", model, "\",\"input\":\"ready?\"}"));
      if (StatusIs200(embedding)) return absl::OkStatus();
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
  Stop();
  return absl::DeadlineExceededError(absl::StrCat(
      "the OpenAI gateway (smg) did not answer a completion within ",
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
