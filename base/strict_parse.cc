#include "base/strict_parse.h"

#include <cstdint>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/unknown_field_set.h>

#include "absl/strings/str_cat.h"
#include "base/utf8.h"

namespace rill::base {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;

// Whether a field of `fd`'s type may arrive with wire type `t`. A mismatch
// would make protobuf keep the value as an unknown field (and drop it from
// the message), so the request would silently lose e.g. its prompt.
bool WireTypeMatches(const FieldDescriptor* fd, UnknownField::Type t) {
  switch (fd->type()) {
    case FieldDescriptor::TYPE_STRING:
    case FieldDescriptor::TYPE_BYTES:
    case FieldDescriptor::TYPE_MESSAGE:
      return t == UnknownField::TYPE_LENGTH_DELIMITED;
    case FieldDescriptor::TYPE_GROUP:
      return t == UnknownField::TYPE_GROUP;
    default:
      break;
  }
  if (fd->is_packable() && t == UnknownField::TYPE_LENGTH_DELIMITED) return true;
  switch (fd->type()) {
    case FieldDescriptor::TYPE_FIXED32:
    case FieldDescriptor::TYPE_SFIXED32:
    case FieldDescriptor::TYPE_FLOAT:
      return t == UnknownField::TYPE_FIXED32;
    case FieldDescriptor::TYPE_FIXED64:
    case FieldDescriptor::TYPE_SFIXED64:
    case FieldDescriptor::TYPE_DOUBLE:
      return t == UnknownField::TYPE_FIXED64;
    default:
      return t == UnknownField::TYPE_VARINT;
  }
}

// Walks the wire fields of `bytes` (a `d` at `path`) against the descriptor;
// the reason for the first violation, or "" when there is none.
std::string Walk(const Descriptor* d, const std::string& bytes, const std::string& path) {
  UnknownFieldSet set;
  if (!set.ParseFromString(bytes)) {
    return path.empty() ? "not a protobuf message"
                        : absl::StrCat("field ", path, " is not a ", d->full_name());
  }
  for (int i = 0; i < set.field_count(); ++i) {
    const UnknownField& f = set.field(i);
    const FieldDescriptor* fd = d->FindFieldByNumber(f.number());
    if (fd == nullptr) {
      return absl::StrCat("unknown field number ", f.number(), " in ", d->full_name(),
                          path.empty() ? "" : " at ", path);
    }
    std::string name = path.empty() ? fd->name() : absl::StrCat(path, ".", fd->name());
    if (!WireTypeMatches(fd, f.type())) {
      return absl::StrCat("field ", name, " has the wrong wire type for a ", fd->type_name());
    }
    if (f.type() != UnknownField::TYPE_LENGTH_DELIMITED) continue;
    if (fd->type() == FieldDescriptor::TYPE_STRING) {
      if (!IsValidUtf8(f.length_delimited())) return absl::StrCat("field ", name, " is not valid UTF-8");
    } else if (fd->type() == FieldDescriptor::TYPE_MESSAGE) {
      std::string why = Walk(fd->message_type(), f.length_delimited(), name);
      if (!why.empty()) return why;
    }
  }
  return "";
}

}  // namespace

absl::Status ParseStrict(const std::string& bytes, google::protobuf::Message* msg) {
  std::string why = Walk(msg->GetDescriptor(), bytes, "");
  if (why.empty() && !msg->ParseFromString(bytes)) why = "cannot be parsed";
  if (why.empty()) return absl::OkStatus();
  msg->Clear();
  return absl::InvalidArgumentError(
      absl::StrCat("malformed ", msg->GetDescriptor()->full_name(), ": ", why));
}

absl::Status ParseStrict(const grpc::ByteBuffer& bytes, google::protobuf::Message* msg) {
  return ParseStrict(ByteBufferToString(bytes), msg);
}

std::string ByteBufferToString(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!buffer.Dump(&slices).ok()) return out;
  for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

}  // namespace rill::base
