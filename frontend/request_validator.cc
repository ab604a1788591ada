#include "frontend/request_validator.h"

#include <cmath>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/unknown_field_set.h>

#include "absl/strings/str_cat.h"

namespace rill::frontend {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;

bool ValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = s[i];
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    for (int k = 1; k < len; ++k) {
      unsigned char cc = s[i + k];
      if ((cc >> 6) != 2) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
      return false;
    }
    i += len;
  }
  return true;
}

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

absl::Status Walk(const Descriptor* d, const std::string& bytes, const std::string& path) {
  UnknownFieldSet set;
  if (!set.ParseFromString(bytes)) {
    return absl::InvalidArgumentError(absl::StrCat("malformed message ", path.empty() ? d->full_name() : path));
  }
  for (int i = 0; i < set.field_count(); ++i) {
    const UnknownField& f = set.field(i);
    const FieldDescriptor* fd = d->FindFieldByNumber(f.number());
    if (fd == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown field number ", f.number(),
                                                     " in ", d->full_name(), path.empty() ? "" : " at ", path));
    }
    std::string name = path.empty() ? fd->name() : absl::StrCat(path, ".", fd->name());
    if (!WireTypeMatches(fd, f.type())) {
      return absl::InvalidArgumentError(
          absl::StrCat("field ", name, " has the wrong wire type for a ", fd->type_name()));
    }
    if (f.type() != UnknownField::TYPE_LENGTH_DELIMITED) continue;
    if (fd->type() == FieldDescriptor::TYPE_STRING) {
      if (!ValidUtf8(f.length_delimited())) {
        return absl::InvalidArgumentError(absl::StrCat("field ", name, " is not valid UTF-8"));
      }
    } else if (fd->type() == FieldDescriptor::TYPE_MESSAGE) {
      absl::Status s = Walk(fd->message_type(), f.length_delimited(), name);
      if (!s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

absl::Status Invalid(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

}  // namespace

std::string PeekRequestId(const std::string& bytes, bool* is_start) {
  UnknownFieldSet outer;
  if (!outer.ParseFromString(bytes)) return "";
  for (int i = 0; i < outer.field_count(); ++i) {
    const UnknownField& f = outer.field(i);
    if ((f.number() != 1 && f.number() != 2) || f.type() != UnknownField::TYPE_LENGTH_DELIMITED) continue;
    UnknownFieldSet inner;
    if (!inner.ParseFromString(f.length_delimited())) return "";
    for (int k = 0; k < inner.field_count(); ++k) {
      const UnknownField& g = inner.field(k);
      if (g.number() == 1 && g.type() == UnknownField::TYPE_LENGTH_DELIMITED &&
          ValidUtf8(g.length_delimited())) {
        if (is_start != nullptr) *is_start = f.number() == 1;
        return g.length_delimited();
      }
    }
  }
  return "";
}

absl::Status ParseChecked(const std::string& bytes, google::protobuf::Message* msg) {
  absl::Status s = Walk(msg->GetDescriptor(), bytes, "");
  if (!s.ok()) return s;
  if (!msg->ParseFromString(bytes)) {
    return absl::InvalidArgumentError(absl::StrCat("cannot parse ", msg->GetDescriptor()->full_name()));
  }
  return absl::OkStatus();
}

absl::Status ValidateStart(const rill::v1::StartRequest& start, const RequestLimits& limits) {
  const int kMaxN = limits.max_n;
  const int kMaxStopStrings = limits.max_stop_strings;
  const int kMaxLogprobs = limits.max_logprobs;
  switch (start.prompt_case()) {
    case rill::v1::StartRequest::kText:
      if (start.text().empty()) return Invalid("start.text", "prompt is empty");
      break;
    case rill::v1::StartRequest::kTokenIds:
      if (start.token_ids().ids_size() == 0) return Invalid("start.token_ids", "prompt is empty");
      break;
    case rill::v1::StartRequest::kChat:
      if (start.chat().messages_size() == 0) return Invalid("start.chat.messages", "no messages");
      break;
    default:
      return Invalid("start.prompt", "prompt is empty (set text, token_ids or chat)");
  }
  const rill::v1::SamplingParams& p = start.sampling();
  if (p.has_n() && (p.n() < 1 || p.n() > kMaxN)) {
    return Invalid("sampling.n", absl::StrCat(p.n(), " is outside [1, ", kMaxN, "]"));
  }
  if (p.has_max_tokens() && p.max_tokens() < 1) {
    return Invalid("sampling.max_tokens", absl::StrCat(p.max_tokens(), " must be >= 1"));
  }
  if (limits.max_tokens > 0 && p.has_max_tokens() && p.max_tokens() > limits.max_tokens) {
    return Invalid("sampling.max_tokens", absl::StrCat(p.max_tokens(), " is over this server's limit of ",
                                                       limits.max_tokens, " (--max_tokens_limit)"));
  }
  if (p.min_tokens() < 0) return Invalid("sampling.min_tokens", "must be >= 0");
  if (p.has_max_tokens() && p.min_tokens() > p.max_tokens()) {
    return Invalid("sampling.min_tokens", "must be <= max_tokens");
  }
  if (p.has_temperature() && (!std::isfinite(p.temperature()) || p.temperature() < 0 ||
                              p.temperature() > 100)) {
    return Invalid("sampling.temperature", absl::StrCat(p.temperature(), " is outside [0, 100]"));
  }
  if (p.has_top_p() && (!std::isfinite(p.top_p()) || p.top_p() <= 0 || p.top_p() > 1)) {
    return Invalid("sampling.top_p", absl::StrCat(p.top_p(), " is outside (0, 1]"));
  }
  if (p.top_k() < -1) return Invalid("sampling.top_k", absl::StrCat(p.top_k(), " must be -1, 0 or > 0"));
  if (!std::isfinite(p.min_p()) || p.min_p() < 0 || p.min_p() > 1) {
    return Invalid("sampling.min_p", "is outside [0, 1]");
  }
  if (p.stop_size() > kMaxStopStrings) {
    return Invalid("sampling.stop", absl::StrCat(p.stop_size(), " stop strings (max ", kMaxStopStrings, ")"));
  }
  size_t stop_bytes = 0;
  for (const std::string& s : p.stop()) stop_bytes += s.size();
  if (stop_bytes > static_cast<size_t>(limits.max_stop_total_bytes)) {
    return Invalid("sampling.stop", absl::StrCat("stop strings total ", stop_bytes, " bytes (max ",
                                                 limits.max_stop_total_bytes, ")"));
  }
  if (p.logprobs() < 0 || p.logprobs() > kMaxLogprobs) {
    return Invalid("sampling.logprobs", absl::StrCat(p.logprobs(), " is outside [0, ", kMaxLogprobs, "]"));
  }
  if (p.has_prompt_logprobs() && (p.prompt_logprobs() < 0 || p.prompt_logprobs() > kMaxLogprobs)) {
    return Invalid("sampling.prompt_logprobs", absl::StrCat("is outside [0, ", kMaxLogprobs, "]"));
  }
  if (p.has_repetition_penalty() && !(p.repetition_penalty() > 0)) {
    return Invalid("sampling.repetition_penalty", "must be > 0");
  }
  if (start.output_mode() < 0 || start.output_mode() > rill::v1::OUTPUT_MODE_FINAL_ONLY) {
    return Invalid("output_mode", "unknown value");
  }
  return absl::OkStatus();
}

absl::Status ValidatePromptLength(size_t num_tokens, int64_t max_model_len,
                                  const RequestLimits& limits) {
  if (limits.max_prompt_tokens > 0 && static_cast<int64_t>(num_tokens) > limits.max_prompt_tokens) {
    return Invalid("prompt", absl::StrCat(num_tokens, " tokens is over this server's limit of ",
                                          limits.max_prompt_tokens, " (--max_prompt_tokens)"));
  }
  if (max_model_len > 0 && static_cast<int64_t>(num_tokens) >= max_model_len) {
    return Invalid("prompt", absl::StrCat(num_tokens, " tokens leaves no room in the context of ",
                                          max_model_len, " tokens"));
  }
  return absl::OkStatus();
}

}  // namespace rill::frontend
