// The one policy for request messages every Rill server applies, Generate
// and unary calls alike: a request parses exactly as its type or is refused.
// Unknown fields (at any depth) are refused rather than dropped, since a
// client that sets a field this server does not know would otherwise get an
// answer that silently ignores it; so is a known field with the wrong wire
// type (protobuf would keep it as an unknown field and drop the value) and
// invalid UTF-8 in a string field.
#ifndef RILL_BASE_STRICT_PARSE_H_
#define RILL_BASE_STRICT_PARSE_H_

#include <string>

#include <google/protobuf/message.h>
#include <grpcpp/support/byte_buffer.h>

#include "absl/status/status.h"

namespace rill::base {

// Parses `bytes` into `msg` under the policy above. Errors are
// INVALID_ARGUMENT "malformed <full type name>: <why>", the why naming the
// field (path, number) but never echoing field contents.
absl::Status ParseStrict(const std::string& bytes, google::protobuf::Message* msg);
absl::Status ParseStrict(const grpc::ByteBuffer& bytes, google::protobuf::Message* msg);

// The bytes of a received message (empty if it cannot be read).
std::string ByteBufferToString(const grpc::ByteBuffer& buffer);

}  // namespace rill::base

#endif  // RILL_BASE_STRICT_PARSE_H_
