// libFuzzer target: request validation as a Generate stream message meets it
// (frontend/generate_session.cc): ParseStrict the bytes as a
// rill.v1.GenerateRequest, PeekRequestId for the error, then ValidateStart
// and ValidatePromptLength. None may crash; every rejection is
// INVALID_ARGUMENT; an accepted message has no unknown fields anywhere, only
// valid UTF-8 strings, and re-serializes to bytes that are accepted again.
#include <cstddef>
#include <cstdint>
#include <string>

#include <glog/logging.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/unknown_field_set.h>

#include "base/strict_parse.h"
#include "frontend/request_validator.h"
#include "tokenizer/unicode_data.h"
#include "rill/v1/inference.pb.h"

namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// Every string is valid UTF-8 and no (sub)message kept unknown fields.
void CheckClean(const Message& m) {
  const Reflection* r = m.GetReflection();
  CHECK(r->GetUnknownFields(m).empty())
      << "accepted " << m.GetDescriptor()->full_name() << " carries unknown fields";
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const FieldDescriptor* fd : fields) {
    const int n = fd->is_repeated() ? r->FieldSize(m, fd) : 1;
    for (int i = 0; i < n; ++i) {
      if (fd->type() == FieldDescriptor::TYPE_STRING) {
        const std::string s =
            fd->is_repeated() ? r->GetRepeatedString(m, fd, i) : r->GetString(m, fd);
        CHECK(rill::tokenizer::IsValidUtf8(s)) << "accepted invalid UTF-8 in " << fd->full_name();
      } else if (fd->type() == FieldDescriptor::TYPE_MESSAGE) {
        CheckClean(fd->is_repeated() ? r->GetRepeatedMessage(m, fd, i) : r->GetMessage(m, fd));
      }
    }
  }
}

void CheckRejection(const absl::Status& s) {
  if (!s.ok()) CHECK_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const std::string id = rill::frontend::PeekRequestId(bytes);
  CHECK(rill::tokenizer::IsValidUtf8(id));
  rill::v1::GenerateRequest req;
  const absl::Status parsed = rill::base::ParseStrict(bytes, &req);
  CheckRejection(parsed);
  if (!parsed.ok()) return 0;
  CheckClean(req);
  rill::v1::GenerateRequest again;
  CHECK(rill::base::ParseStrict(req.SerializeAsString(), &again).ok())
      << "a re-serialized accepted request is rejected";
  if (!req.has_start()) return 0;
  const rill::v1::StartRequest& start = req.start();
  CheckRejection(rill::frontend::ValidateStart(start));
  rill::frontend::RequestLimits tight;
  tight.max_prompt_tokens = 8;
  tight.max_tokens = 16;
  tight.max_n = 2;
  tight.max_stop_strings = 2;
  tight.max_stop_total_bytes = 8;
  tight.max_logprobs = 1;
  CheckRejection(rill::frontend::ValidateStart(start, tight));
  // Prompt lengths from the request itself: its token count against a
  // context taken from its own sampling fields (any sign, any size).
  const size_t num_tokens = start.token_ids().ids_size() + start.text().size();
  for (int64_t max_model_len :
       {int64_t{0}, int64_t{1}, static_cast<int64_t>(start.sampling().max_tokens()),
        static_cast<int64_t>(start.priority()), int64_t{8192}}) {
    CheckRejection(rill::frontend::ValidatePromptLength(num_tokens, max_model_len));
    CheckRejection(rill::frontend::ValidatePromptLength(num_tokens, max_model_len, tight));
  }
  return 0;
}
