#include "engine/service/status_convert.h"

#include <string>

#include "base/message_text.h"

namespace rill::engine::service {
namespace {

// Codes outside the known range become UNKNOWN rather than an invalid enum.
int ClampCode(int code) { return (code < 0 || code > 16) ? 2 : code; }

// grpc-message travels in the trailers: a message quoting long client input
// (a path, a name) must not push them over the peer's metadata limit, which
// would replace the intended code with RESOURCE_EXHAUSTED.
constexpr size_t kMaxStatusMessageBytes = 1024;

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(ClampCode(static_cast<int>(status.code()))),
                      ShortForMessage(std::string_view(status.message().data(),
                                                       status.message().size()),
                                      kMaxStatusMessageBytes));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(ClampCode(status.error_code())),
                      status.error_message());
}

rill::v1::Status ToProtoStatus(const absl::Status& status) {
  rill::v1::Status out;
  out.set_code(static_cast<int>(status.code()));
  out.set_message(std::string(status.message()));
  return out;
}

absl::Status FromProtoStatus(const rill::v1::Status& status) {
  if (status.code() == 0) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(ClampCode(status.code())), status.message());
}

}  // namespace rill::engine::service
