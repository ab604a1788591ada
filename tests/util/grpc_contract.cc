#include "tests/util/grpc_contract.h"

#include <vector>

#include <google/protobuf/descriptor.h>
#include <grpcpp/generic/generic_stub.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace rill::tests::util {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

grpc::Status RawUnaryCall(const std::shared_ptr<grpc::Channel>& channel,
                          const std::string& method_path, const std::string& request,
                          const Metadata& metadata, std::string* response) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  for (const auto& [k, v] : metadata) ctx.AddMetadata(k, v);
  grpc::Slice slice(request);
  grpc::ByteBuffer in(&slice, 1);
  grpc::ByteBuffer out;
  grpc::CompletionQueue cq;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> call =
      stub.PrepareUnaryCall(&ctx, method_path, in, &cq);
  call->StartCall();
  grpc::Status status;
  call->Finish(&out, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  if (!cq.Next(&tag, &ok)) return grpc::Status(grpc::StatusCode::INTERNAL, "completion queue shut down");
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  if (response != nullptr && status.ok()) {
    std::vector<grpc::Slice> slices;
    response->clear();
    if (out.Dump(&slices).ok()) {
      for (const grpc::Slice& s : slices) {
        response->append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
    }
  }
  return status;
}

int ExpectStrictUnaryParsing(const std::shared_ptr<grpc::Channel>& channel,
                             const std::string& service, const Metadata& metadata) {
  const google::protobuf::ServiceDescriptor* sd =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service);
  EXPECT_NE(sd, nullptr) << service;
  if (sd == nullptr) return 0;
  // A varint tag that never ends: no protobuf message at all. Field 999
  // (varint 1): known to no Rill request.
  const std::string garbage = "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff";
  const std::string unknown_field = "\xb8\x3e\x01";
  int checked = 0;
  for (int i = 0; i < sd->method_count(); ++i) {
    const google::protobuf::MethodDescriptor* m = sd->method(i);
    if (m->client_streaming() || m->server_streaming()) continue;
    const std::string path = absl::StrCat("/", service, "/", m->name());
    const std::string type = m->input_type()->full_name();
    for (const std::string& bytes : {garbage, unknown_field}) {
      grpc::Status s = RawUnaryCall(channel, path, bytes, metadata);
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
          << path << ": " << s.error_code() << " " << s.error_message();
      EXPECT_TRUE(absl::StartsWith(s.error_message(), absl::StrCat("malformed ", type, ": ")))
          << path << ": " << s.error_message();
    }
    grpc::Status s = RawUnaryCall(channel, path, unknown_field, metadata);
    EXPECT_NE(s.error_message().find("unknown field number 999"), std::string::npos)
        << path << ": " << s.error_message();
    ++checked;
  }
  return checked;
}

HealthWatch::HealthWatch(const std::shared_ptr<grpc::Channel>& channel, const std::string& service)
    : stub_(grpc::health::v1::Health::NewStub(channel)) {
  HealthCheckRequest req;
  req.set_service(service);
  reader_ = std::thread([this, req] {
    std::unique_ptr<grpc::ClientReader<HealthCheckResponse>> reader = stub_->Watch(&ctx_, req);
    HealthCheckResponse resp;
    while (reader->Read(&resp)) {
      absl::MutexLock l(&mu_);
      statuses_.push_back(resp.status());
    }
    grpc::Status s = reader->Finish();
    absl::MutexLock l(&mu_);
    ended_ = true;
    final_ = s;
  });
}

HealthWatch::~HealthWatch() {
  ctx_.TryCancel();
  reader_.join();
}

bool HealthWatch::WaitForLast(ServingStatus status, absl::Duration timeout) {
  absl::MutexLock l(&mu_);
  auto last_is = [this, status]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !statuses_.empty() && statuses_.back() == status;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&last_is), timeout);
}

bool HealthWatch::WaitForEnd(absl::Duration timeout) {
  absl::MutexLock l(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&ended_), timeout);
}

std::vector<HealthWatch::ServingStatus> HealthWatch::statuses() const {
  absl::MutexLock l(&mu_);
  return statuses_;
}

grpc::Status HealthWatch::final_status() const {
  absl::MutexLock l(&mu_);
  return final_;
}

}  // namespace rill::tests::util
