// A tiny HTTP server for GET /metrics (Prometheus scrapes), on Debian's
// cpp-httplib. Its own threads; `render` is called on them per scrape.
#ifndef RILL_BASE_METRICS_HTTP_SERVER_H_
#define RILL_BASE_METRICS_HTTP_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"

namespace httplib {
class Server;
}

namespace rill::base::metrics {

class MetricsHttpServer {
 public:
  // `render` returns the text exposition (text_format.h).
  explicit MetricsHttpServer(std::function<std::string()> render);
  ~MetricsHttpServer();  // Stops serving.

  // Binds host:port (port 0 picks a free one) and serves in the background.
  // Unavailable naming the address when it cannot bind.
  absl::Status Start(const std::string& host, int port);
  int port() const { return port_; }
  void Stop();

 private:
  std::function<std::string()> render_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

// Starts a server on host:port unless port is 0 (metrics off: returns null).
// The caller logs nothing more: this logs the address it serves on.
absl::Status StartMetricsServerIfEnabled(const std::string& host, int port,
                                         std::function<std::string()> render,
                                         std::unique_ptr<MetricsHttpServer>* server);

}  // namespace rill::base::metrics

#endif  // RILL_BASE_METRICS_HTTP_SERVER_H_
