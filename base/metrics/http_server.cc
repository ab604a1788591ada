#include "base/metrics/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <chrono>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "base/metrics/text_format.h"

namespace rill::base::metrics {

MetricsHttpServer::MetricsHttpServer(std::function<std::string()> render)
    : render_(std::move(render)), server_(std::make_unique<httplib::Server>()) {
  // httplib's default sets SO_REUSEPORT, which would let a second process
  // share the port and split the scrapes: reuse TIME_WAIT addresses only.
  server_->set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(render_(), kTextContentType);
  });
}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

absl::Status MetricsHttpServer::Start(const std::string& host, int port) {
  const bool bound = port == 0 ? (port_ = server_->bind_to_any_port(host)) > 0
                               : server_->bind_to_port(host, port);
  if (!bound) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for /metrics on ", host, ":", port));
  }
  if (port != 0) port_ = port;
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // stop() before the accept loop runs would be lost (and join hang).
  while (!server_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return absl::OkStatus();
}

void MetricsHttpServer::Stop() {
  if (!thread_.joinable()) return;
  server_->stop();
  thread_.join();
}

absl::Status StartMetricsServerIfEnabled(const std::string& host, int port,
                                         std::function<std::string()> render,
                                         std::unique_ptr<MetricsHttpServer>* server) {
  server->reset();
  if (port == 0) return absl::OkStatus();
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--metrics_port must be 0..65535, got ", port));
  }
  auto s = std::make_unique<MetricsHttpServer>(std::move(render));
  if (absl::Status st = s->Start(host, port); !st.ok()) return st;
  LOG(INFO) << "serving Prometheus metrics on http://" << host << ":" << s->port() << "/metrics";
  *server = std::move(s);
  return absl::OkStatus();
}

}  // namespace rill::base::metrics
