// Checks of the contract every Rill gRPC server keeps, for the frontend,
// engine and integration tests alike: malformed unary requests are
// INVALID_ARGUMENT "malformed <type>: ..." (base/strict_parse.h), and a
// grpc.health.v1 Watch reader that records what the server sends.
#ifndef RILL_TESTS_UTIL_GRPC_CONTRACT_H_
#define RILL_TESTS_UTIL_GRPC_CONTRACT_H_

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace rill::tests::util {

using Metadata = std::multimap<std::string, std::string>;

// One unary call with raw request bytes; `response` (optional) gets the
// raw response bytes.
grpc::Status RawUnaryCall(const std::shared_ptr<grpc::Channel>& channel,
                          const std::string& method_path, const std::string& request,
                          const Metadata& metadata = {}, std::string* response = nullptr);

// For every unary method of `service` (full name, e.g. "rill.v1.Inference"):
// bytes that are no protobuf message and a message with an unknown field
// must both get INVALID_ARGUMENT naming the request type (GoogleTest
// expectations). Returns how many methods were checked.
int ExpectStrictUnaryParsing(const std::shared_ptr<grpc::Channel>& channel,
                             const std::string& service, const Metadata& metadata = {});

// A grpc.health.v1 Watch call read on its own thread.
class HealthWatch {
 public:
  using ServingStatus = grpc::health::v1::HealthCheckResponse::ServingStatus;
  HealthWatch(const std::shared_ptr<grpc::Channel>& channel, const std::string& service);
  ~HealthWatch();  // Cancels the call.

  // Waits until the last status received is `status` (true) or `timeout`.
  bool WaitForLast(ServingStatus status, absl::Duration timeout = absl::Seconds(30));
  // Waits until the stream ended (true) or `timeout`; then final_status().
  bool WaitForEnd(absl::Duration timeout = absl::Seconds(30));
  std::vector<ServingStatus> statuses() const;
  grpc::Status final_status() const;

 private:
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::health::v1::Health::Stub> stub_;
  std::thread reader_;
  mutable absl::Mutex mu_;
  std::vector<ServingStatus> statuses_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status final_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rill::tests::util

#endif  // RILL_TESTS_UTIL_GRPC_CONTRACT_H_
