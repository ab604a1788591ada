#include "base/metrics/http_server.h"

#include <httplib.h>

#include "base/metrics/registry.h"
#include "base/metrics/text_format.h"
#include "gtest/gtest.h"

namespace rill::base::metrics {
namespace {

TEST(MetricsHttpServerTest, ServesTheRegistryOnGetMetrics) {
  Registry r;
  Counter& c = r.AddCounter("hits_total", "Hits.").Labels({});
  std::unique_ptr<MetricsHttpServer> server;
  // Port 0 is "off" for the flag; the class itself picks a free port.
  ASSERT_TRUE(StartMetricsServerIfEnabled("127.0.0.1", 0, [&] { return TextFormat(r.Collect()); },
                                          &server)
                  .ok());
  EXPECT_EQ(server, nullptr);
  server = std::make_unique<MetricsHttpServer>([&] { return TextFormat(r.Collect()); });
  ASSERT_TRUE(server->Start("127.0.0.1", 0).ok());
  ASSERT_GT(server->port(), 0);
  c.Increment(7);
  httplib::Client client("127.0.0.1", server->port());
  httplib::Result res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), kTextContentType);
  EXPECT_NE(res->body.find("hits_total 7\n"), std::string::npos) << res->body;
  httplib::Result missing = client.Get("/other");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);

  // A taken port is refused with the address named.
  MetricsHttpServer second([] { return std::string(); });
  absl::Status s = second.Start("127.0.0.1", server->port());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(s.message().find(std::to_string(server->port())), std::string::npos);
  server->Stop();
}

}  // namespace
}  // namespace rill::base::metrics
