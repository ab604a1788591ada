#include "frontend/request_validator.h"

#include <algorithm>
#include <cmath>

#include <google/protobuf/unknown_field_set.h>

#include "absl/strings/str_cat.h"
#include "base/utf8.h"

namespace rill::frontend {
namespace {

using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;

absl::Status Invalid(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

// The constraint oneof's shape; its syntax and limits are the engine's to
// check (it compiles the grammar), so a bad schema fails there, alone.
absl::Status ValidateConstraintShape(const rill::v1::SamplingParams& p) {
  using P = rill::v1::SamplingParams;
  switch (p.constraint_case()) {
    case P::kJsonObject:
      if (!p.json_object()) return Invalid("sampling.json_object", "must be true when set");
      break;
    case P::kChoice:
      if (p.choice().choices_size() == 0) return Invalid("sampling.choice", "the choice list is empty");
      for (int i = 0; i < p.choice().choices_size(); ++i) {
        if (p.choice().choices(i).empty()) return Invalid("sampling.choice", absl::StrCat("choice ", i, " is empty"));
      }
      break;
    case P::kJsonSchema:
      if (p.json_schema().empty()) return Invalid("sampling.json_schema", "is empty");
      break;
    case P::kRegex:
      if (p.regex().empty()) return Invalid("sampling.regex", "is empty");
      break;
    case P::kGrammar:
      if (p.grammar().empty()) return Invalid("sampling.grammar", "is empty");
      break;
    case P::kStructuralTag:
      if (p.structural_tag().empty()) return Invalid("sampling.structural_tag", "is empty");
      break;
    case P::CONSTRAINT_NOT_SET:
      break;
  }
  return absl::OkStatus();
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
          IsValidUtf8(g.length_delimited())) {
        if (is_start != nullptr) *is_start = f.number() == 1;
        return g.length_delimited();
      }
    }
  }
  return "";
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
      break;  // An empty chat is BuildPrompt's (shared with Tokenize).
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
  if (absl::Status s = ValidateConstraintShape(p); !s.ok()) return s;
  if (start.output_mode() < 0 || start.output_mode() > rill::v1::OUTPUT_MODE_FINAL_ONLY) {
    return Invalid("output_mode", "unknown value");
  }
  return absl::OkStatus();
}

namespace {

// The tighter of two limits where 0 means none.
int64_t Tighter(int64_t a, int64_t b) { return a <= 0 ? b : b <= 0 ? a : std::min(a, b); }

}  // namespace

void ReportLimits(const RequestLimits& limits, int64_t max_model_len,
                  rill::v1::ServerConfig::Decoding* d) {
  d->set_max_n(static_cast<int32_t>(Tighter(d->max_n(), limits.max_n)));
  d->set_max_logprobs(static_cast<int32_t>(Tighter(d->max_logprobs(), limits.max_logprobs)));
  d->set_max_stop_strings(
      static_cast<int32_t>(Tighter(d->max_stop_strings(), limits.max_stop_strings)));
  d->set_max_stop_total_bytes(
      static_cast<int32_t>(Tighter(d->max_stop_total_bytes(), limits.max_stop_total_bytes)));
  d->set_max_tokens(static_cast<int32_t>(Tighter(d->max_tokens(), limits.max_tokens)));
  // ValidatePromptLength: the flag, and always room for one generated token.
  d->set_max_prompt_tokens(Tighter(Tighter(d->max_prompt_tokens(), limits.max_prompt_tokens),
                                   max_model_len > 0 ? max_model_len - 1 : 0));
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
