// absl::Status <-> grpc::Status / rill.v1.Status. The codes are numerically
// identical (both follow google.rpc.Code), so the mapping is a cast; kept in
// one library so the engine and the frontend agree on it.
#ifndef RILL_ENGINE_SERVICE_STATUS_CONVERT_H_
#define RILL_ENGINE_SERVICE_STATUS_CONVERT_H_

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "rill/v1/inference.pb.h"

namespace rill::engine::service {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);
rill::v1::Status ToProtoStatus(const absl::Status& status);
absl::Status FromProtoStatus(const rill::v1::Status& status);

}  // namespace rill::engine::service

#endif  // RILL_ENGINE_SERVICE_STATUS_CONVERT_H_
