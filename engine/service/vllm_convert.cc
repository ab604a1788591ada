#include "engine/service/vllm_convert.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/structured_output/constraint.h"

namespace rill::engine::service {
namespace {

void AppendTop(const engine::TopLogprobs& top, vllm_pb::TopLogProbs* out) {
  for (const auto& [id, lp] : top) {
    out->add_token_ids(static_cast<uint32_t>(id));
    out->add_values(lp);
  }
}

// The proto's constraint oneof, field for field (vLLM's
// StructuredOutputsParams). Syntax and limits are the engine's to check.
absl::StatusOr<structured_output::Constraint> ConstraintOf(const vllm_pb::SamplingParams& p) {
  using structured_output::ConstraintKind;
  structured_output::Constraint c;
  switch (p.constraint_case()) {
    case vllm_pb::SamplingParams::kJsonSchema:
      c.kind = ConstraintKind::kJsonSchema;
      c.text = p.json_schema();
      break;
    case vllm_pb::SamplingParams::kRegex:
      c.kind = ConstraintKind::kRegex;
      c.text = p.regex();
      break;
    case vllm_pb::SamplingParams::kGrammar:
      c.kind = ConstraintKind::kGrammar;
      c.text = p.grammar();
      break;
    case vllm_pb::SamplingParams::kStructuralTag:
      c.kind = ConstraintKind::kStructuralTag;
      c.text = p.structural_tag();
      break;
    case vllm_pb::SamplingParams::kJsonObject:
      // false cannot mean "no constraint": the oneof was set on purpose.
      if (!p.json_object()) return absl::InvalidArgumentError("json_object: must be true when set");
      c.kind = ConstraintKind::kJsonObject;
      break;
    case vllm_pb::SamplingParams::kChoice:
      c.kind = ConstraintKind::kChoice;
      c.choices.assign(p.choice().choices().begin(), p.choice().choices().end());
      break;
    case vllm_pb::SamplingParams::CONSTRAINT_NOT_SET:
      break;
  }
  return c;
}

}  // namespace

absl::StatusOr<engine::SamplingParams> FromVllmSampling(const vllm_pb::SamplingParams& p,
                                                        int64_t prompt_len,
                                                        int64_t max_model_len) {
  absl::StatusOr<structured_output::Constraint> constraint = ConstraintOf(p);
  if (!constraint.ok()) return constraint.status();
  if (p.has_logprobs() && p.logprobs() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("logprobs: all-vocabulary logprobs (-1) are not supported; ask for at most ",
                     engine::kMaxLogprobs));
  }
  if (p.has_prompt_logprobs() && p.prompt_logprobs() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt_logprobs: all-vocabulary logprobs (-1) are not supported; ask for at most ",
        engine::kMaxLogprobs));
  }
  engine::SamplingParams out;
  out.n = p.n() == 0 ? 1 : static_cast<int>(std::min<uint32_t>(p.n(), 1u << 30));
  // Unset: vLLM's default, the rest of the context.
  out.max_tokens = p.has_max_tokens()
                       ? static_cast<int>(std::min<uint32_t>(p.max_tokens(), 1u << 30))
                       : static_cast<int>(std::max<int64_t>(1, max_model_len - prompt_len));
  out.min_tokens = static_cast<int>(std::min<uint32_t>(p.min_tokens(), 1u << 30));
  if (p.has_temperature()) out.temperature = p.temperature();
  // proto3 scalars: 0 means "not given" for top_p and repetition_penalty.
  if (p.top_p() != 0.0f) out.top_p = p.top_p();
  out.top_k = static_cast<int>(std::min<uint32_t>(p.top_k(), 1u << 30));
  out.min_p = p.min_p();
  out.frequency_penalty = p.frequency_penalty();
  out.presence_penalty = p.presence_penalty();
  if (p.repetition_penalty() != 0.0f) out.repetition_penalty = p.repetition_penalty();
  out.stop.assign(p.stop().begin(), p.stop().end());
  out.include_stop_str_in_output = p.include_stop_str_in_output();
  for (uint32_t id : p.stop_token_ids()) out.stop_token_ids.push_back(static_cast<int32_t>(id));
  out.skip_special_tokens = p.skip_special_tokens();
  out.ignore_eos = p.ignore_eos();
  if (p.has_logprobs()) out.logprobs = p.logprobs();
  if (p.has_prompt_logprobs()) out.prompt_logprobs = p.prompt_logprobs();
  out.seed = p.has_seed() ? static_cast<uint64_t>(static_cast<uint32_t>(p.seed()))
                          : static_cast<uint64_t>(absl::GetCurrentTimeNanos());
  for (const auto& [token, bias] : p.logit_bias()) out.logit_bias[token] = bias;
  out.output_kind = engine::OutputKind::kDelta;
  out.constraint = std::move(*constraint);
  return out;
}

absl::StatusOr<std::vector<int32_t>> PromptOf(const vllm_pb::GenerateRequest& request,
                                              int64_t max_model_len) {
  if (request.input_case() == vllm_pb::GenerateRequest::kText) {
    return absl::InvalidArgumentError(
        "text prompts are not supported: send token ids (tokenized.input_ids)");
  }
  if (request.has_mm_inputs() || request.extra_mm_inputs_size() > 0 || request.has_media_refs()) {
    return absl::InvalidArgumentError("multimodal inputs are not supported by this model");
  }
  const auto& ids = request.tokenized().input_ids();
  if (ids.empty()) return absl::InvalidArgumentError("the prompt is empty (tokenized.input_ids)");
  std::vector<int32_t> prompt;
  prompt.reserve(ids.size());
  for (uint32_t id : ids) {
    if (id > static_cast<uint32_t>(INT32_MAX)) {
      return absl::InvalidArgumentError(absl::StrCat("token id ", id, " is out of range"));
    }
    prompt.push_back(static_cast<int32_t>(id));
  }
  const vllm_pb::SamplingParams& p = request.sampling_params();
  if (p.has_truncate_prompt_tokens()) {
    int64_t keep = p.truncate_prompt_tokens();
    if (keep == -1) keep = max_model_len;
    if (keep < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "truncate_prompt_tokens must be -1 or at least 1, got ", p.truncate_prompt_tokens()));
    }
    if (static_cast<int64_t>(prompt.size()) > keep) {
      prompt.erase(prompt.begin(), prompt.end() - keep);
    }
  }
  return prompt;
}

void AppendOutputLogprobs(const engine::CompletionOutput& c, size_t count,
                          vllm_pb::OutputLogProbs* out) {
  for (size_t i = 0; i < count && i < c.token_ids.size() && i < c.logprobs.size(); ++i) {
    out->add_token_ids(static_cast<uint32_t>(c.token_ids[i]));
    out->add_token_logprobs(c.logprobs[i]);
    if (i < c.top_logprobs.size()) AppendTop(c.top_logprobs[i], out->add_top_logprobs());
  }
}

void FillInputLogprobs(const engine::RequestOutput& o, vllm_pb::InputLogProbs* out) {
  out->Clear();
  if (o.prompt_token_ids.empty()) return;
  out->add_token_ids(static_cast<uint32_t>(o.prompt_token_ids[0]));
  out->add_token_logprobs();  // The first token has no logprob.
  out->add_top_logprobs();
  for (size_t i = 0; i < o.prompt_logprobs.size() && i + 1 < o.prompt_token_ids.size(); ++i) {
    out->add_token_ids(static_cast<uint32_t>(o.prompt_token_ids[i + 1]));
    out->add_token_logprobs()->set_value(o.prompt_logprobs[i]);
    vllm_pb::TopLogProbs* top = out->add_top_logprobs();
    if (i < o.prompt_top_logprobs.size()) AppendTop(o.prompt_top_logprobs[i], top);
  }
}

vllm_pb::SchedulerLoad ToSchedulerLoad(const engine::EngineStats& stats, int unfinished,
                                       const engine::EngineConfig& config) {
  vllm_pb::SchedulerLoad load;
  load.set_dp_rank(0);
  load.set_num_running_reqs(stats.num_running);
  load.set_num_waiting_reqs(stats.num_waiting);
  load.set_num_total_reqs(unfinished);
  const int64_t capacity =
      static_cast<int64_t>(config.cache.num_blocks) * config.cache.block_size;
  load.set_max_total_num_tokens(static_cast<int32_t>(std::min<int64_t>(capacity, INT32_MAX)));
  load.set_num_used_tokens(static_cast<int32_t>(stats.kv_usage * capacity));
  load.set_token_usage(stats.kv_usage);
  load.set_cache_hit_rate(stats.prefix_cache_hit_rate);
  load.set_max_running_requests(config.scheduler.max_num_seqs);
  load.set_utilization(config.scheduler.max_num_seqs > 0
                           ? static_cast<double>(stats.num_running) / config.scheduler.max_num_seqs
                           : 0.0);
  return load;
}

}  // namespace rill::engine::service
