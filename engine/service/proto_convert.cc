#include "engine/service/proto_convert.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/service/status_convert.h"

namespace rill::engine::service {
namespace {

double UnixSecondsOrZero(absl::Time t) {
  return t == absl::InfinitePast() ? 0.0 : absl::ToDoubleSeconds(t - absl::UnixEpoch());
}

}  // namespace

absl::StatusOr<engine::SamplingParams> FromProto(const rill::v1::SamplingParams& p) {
  engine::SamplingParams out;
  // Ranges (n, prompt_logprobs, logit_bias ids) are checked by the engine's
  // ValidateSamplingParams at admission, with messages naming the field.
  if (p.has_n()) out.n = static_cast<int>(std::min<uint32_t>(p.n(), 1u << 30));
  if (p.has_prompt_logprobs()) out.prompt_logprobs = p.prompt_logprobs();
  for (const auto& [token, bias] : p.logit_bias()) out.logit_bias[token] = bias;
  if (p.has_max_tokens()) out.max_tokens = p.max_tokens();
  out.min_tokens = p.min_tokens();
  if (p.has_temperature()) out.temperature = p.temperature();
  if (p.has_top_p()) out.top_p = p.top_p();
  out.top_k = p.top_k();
  out.min_p = p.min_p();
  if (p.has_seed()) {
    out.seed = p.seed();
  } else {
    out.seed = static_cast<uint64_t>(absl::GetCurrentTimeNanos());
  }
  out.stop_token_ids.assign(p.stop_token_ids().begin(), p.stop_token_ids().end());
  out.ignore_eos = p.ignore_eos();
  out.logprobs = p.logprobs();
  if (p.has_repetition_penalty()) out.repetition_penalty = p.repetition_penalty();
  out.presence_penalty = p.presence_penalty();
  out.frequency_penalty = p.frequency_penalty();
  if (p.has_skip_special_tokens()) out.skip_special_tokens = p.skip_special_tokens();
  out.output_kind = engine::OutputKind::kDelta;
  absl::StatusOr<structured_output::Constraint> constraint = ConstraintFromProto(p);
  if (!constraint.ok()) return constraint.status();
  out.constraint = std::move(*constraint);
  return out;
}

absl::StatusOr<structured_output::Constraint> ConstraintFromProto(const rill::v1::SamplingParams& p) {
  using structured_output::ConstraintKind;
  structured_output::Constraint c;
  switch (p.constraint_case()) {
    case rill::v1::SamplingParams::kJsonSchema:
      c.kind = ConstraintKind::kJsonSchema;
      c.text = p.json_schema();
      break;
    case rill::v1::SamplingParams::kJsonObject:
      if (!p.json_object()) {
        return absl::InvalidArgumentError("json_object: must be true when set");
      }
      c.kind = ConstraintKind::kJsonObject;
      break;
    case rill::v1::SamplingParams::kRegex:
      c.kind = ConstraintKind::kRegex;
      c.text = p.regex();
      break;
    case rill::v1::SamplingParams::kGrammar:
      c.kind = ConstraintKind::kGrammar;
      c.text = p.grammar();
      break;
    case rill::v1::SamplingParams::kChoice:
      c.kind = ConstraintKind::kChoice;
      c.choices.assign(p.choice().choices().begin(), p.choice().choices().end());
      break;
    case rill::v1::SamplingParams::kStructuralTag:
      c.kind = ConstraintKind::kStructuralTag;
      c.text = p.structural_tag();
      break;
    case rill::v1::SamplingParams::CONSTRAINT_NOT_SET:
      break;
  }
  return c;
}

void ConstraintToProto(const structured_output::Constraint& c, rill::v1::SamplingParams* p) {
  using structured_output::ConstraintKind;
  switch (c.kind) {
    case ConstraintKind::kNone: break;
    case ConstraintKind::kJsonSchema: p->set_json_schema(c.text); break;
    case ConstraintKind::kJsonObject: p->set_json_object(true); break;
    case ConstraintKind::kRegex: p->set_regex(c.text); break;
    case ConstraintKind::kGrammar: p->set_grammar(c.text); break;
    case ConstraintKind::kChoice:
      for (const std::string& s : c.choices) p->mutable_choice()->add_choices(s);
      break;
    case ConstraintKind::kStructuralTag: p->set_structural_tag(c.text); break;
  }
}

rill::v1::SamplingParams ToProto(const engine::SamplingParams& s) {
  rill::v1::SamplingParams p;
  p.set_n(s.n);
  p.set_max_tokens(s.max_tokens);
  p.set_min_tokens(s.min_tokens);
  p.set_temperature(s.temperature);
  p.set_top_p(s.top_p);
  p.set_top_k(s.top_k);
  p.set_min_p(s.min_p);
  p.set_seed(s.seed);
  for (int32_t id : s.stop_token_ids) p.add_stop_token_ids(id);
  p.set_ignore_eos(s.ignore_eos);
  p.set_logprobs(s.logprobs);
  p.set_repetition_penalty(s.repetition_penalty);
  p.set_presence_penalty(s.presence_penalty);
  p.set_frequency_penalty(s.frequency_penalty);
  p.set_skip_special_tokens(s.skip_special_tokens);
  ConstraintToProto(s.constraint, &p);
  return p;
}

rill::v1::FinishReason FinishReasonFromString(const std::string& reason) {
  if (reason == "stop") return rill::v1::FINISH_REASON_STOP;
  if (reason == "length") return rill::v1::FINISH_REASON_LENGTH;
  if (reason == "abort") return rill::v1::FINISH_REASON_ABORT;
  if (reason == "error") return rill::v1::FINISH_REASON_ERROR;
  return rill::v1::FINISH_REASON_UNSPECIFIED;
}

rill::internal::EngineOutput ToEngineOutput(const engine::RequestOutput& o) {
  rill::internal::EngineOutput out;
  out.set_request_id(o.request_id);
  out.set_finished(o.finished);
  for (const engine::CompletionOutput& c : o.outputs) {
    rill::internal::CompletionDelta* d = out.add_outputs();
    d->set_index(c.index);
    for (int32_t id : c.token_ids) d->add_token_ids(id);
    d->set_cumulative_logprob(c.cumulative_logprob);
    d->set_finish_reason(FinishReasonFromString(c.finish_reason));
    if (c.stop_reason.has_value()) d->set_stop_token_id(*c.stop_reason);
    for (size_t i = 0; i < c.top_logprobs.size() || i < c.logprobs.size(); ++i) {
      if (i >= c.token_ids.size()) break;
      rill::v1::PositionLogprobs* pos = d->add_logprobs();
      pos->mutable_chosen()->set_token_id(c.token_ids[i]);
      if (i < c.logprobs.size()) pos->mutable_chosen()->set_logprob(c.logprobs[i]);
      if (i < c.top_logprobs.size()) {
        for (const auto& [id, lp] : c.top_logprobs[i]) {
          rill::v1::TokenLogprob* t = pos->add_top();
          t->set_token_id(id);
          t->set_logprob(lp);
        }
      }
    }
  }
  // Position i + 1 of the prompt (the first token has no logprob).
  for (size_t i = 0; i < o.prompt_logprobs.size() && i + 1 < o.prompt_token_ids.size(); ++i) {
    rill::v1::PositionLogprobs* pos = out.add_prompt_logprobs();
    pos->mutable_chosen()->set_token_id(o.prompt_token_ids[i + 1]);
    pos->mutable_chosen()->set_logprob(o.prompt_logprobs[i]);
    if (i < o.prompt_top_logprobs.size()) {
      for (const auto& [id, lp] : o.prompt_top_logprobs[i]) {
        rill::v1::TokenLogprob* t = pos->add_top();
        t->set_token_id(id);
        t->set_logprob(lp);
      }
    }
  }
  // The cause keeps its code (a dead worker is UNAVAILABLE, not INTERNAL).
  if (!o.error.ok()) *out.mutable_status() = ToProtoStatus(o.error);
  if (o.finished) {
    rill::v1::RequestMetrics* m = out.mutable_metrics();
    m->set_arrival_time(UnixSecondsOrZero(o.metrics.arrival_time));
    m->set_first_scheduled_time(UnixSecondsOrZero(o.metrics.first_scheduled_time));
    m->set_first_token_time(UnixSecondsOrZero(o.metrics.first_token_time));
    m->set_last_token_time(UnixSecondsOrZero(o.metrics.last_token_time));
    m->set_finished_time(UnixSecondsOrZero(o.metrics.finished_time));
    m->set_num_prompt_tokens(static_cast<int64_t>(o.prompt_token_ids.size()));
    m->set_num_cached_tokens(o.metrics.num_cached_tokens);
    m->set_num_preemptions(o.metrics.num_preemptions);
  }
  return out;
}

rill::v1::RequestState ToProto(engine::RequestStatus status) {
  switch (status) {
    case engine::RequestStatus::kWaiting: return rill::v1::REQUEST_STATE_WAITING;
    case engine::RequestStatus::kRunning: return rill::v1::REQUEST_STATE_RUNNING;
    case engine::RequestStatus::kCompleted: return rill::v1::REQUEST_STATE_COMPLETED;
    case engine::RequestStatus::kCancelled: return rill::v1::REQUEST_STATE_CANCELLED;
    case engine::RequestStatus::kFailed: return rill::v1::REQUEST_STATE_FAILED;
  }
  return rill::v1::REQUEST_STATE_UNSPECIFIED;
}

rill::v1::ModelConfig ToModelConfig(const std::string& model_name,
                                    const engine::EngineConfig& config, bool has_chat_template,
                                    bool supports_embeddings) {
  const worker::loader::ModelConfig& m = config.model.config;
  rill::v1::ModelConfig p;
  p.set_model(model_name);
  p.set_architecture(m.architecture);
  p.set_vocab_size(m.vocab_size);
  p.set_max_model_len(config.model.max_model_len);
  p.set_hidden_size(m.hidden_size);
  p.set_num_layers(m.num_layers);
  p.set_num_attention_heads(m.num_heads);
  p.set_num_kv_heads(m.num_kv_heads);
  p.set_head_dim(m.head_dim);
  const std::string& path = config.model.path;
  p.set_weight_format(path.size() > 5 && path.substr(path.size() - 5) == ".gguf" ? "gguf"
                                                                                : "safetensors");
  p.set_bos_token_id(static_cast<int32_t>(m.bos_token_id));
  for (int32_t id : config.decoding.eos_token_ids) p.add_eos_token_ids(id);
  p.set_supports_embeddings(supports_embeddings);
  p.set_has_chat_template(has_chat_template);
  return p;
}

rill::v1::ServerConfig ToServerConfig(const engine::EngineConfig& c, int max_waiting_requests) {
  rill::v1::ServerConfig p;
  p.mutable_engine()->set_model_path(c.model.path);
  p.mutable_engine()->set_version("rill-engine");
  p.mutable_engine()->set_backend(c.parallel.backend);
  p.mutable_engine()->set_kernel_plan(c.parallel.kernel_plan);
  p.mutable_cache()->set_block_size(c.cache.block_size);
  p.mutable_cache()->set_num_blocks(c.cache.num_blocks);
  p.mutable_cache()->set_kv_cache_bytes(c.cache.kv_cache_bytes);
  p.mutable_cache()->set_kv_cache_dtype(c.cache.kv_cache_dtype);
  p.mutable_cache()->set_enable_prefix_caching(c.cache.enable_prefix_caching);
  p.mutable_parallel()->set_tensor_parallel_size(c.parallel.tensor_parallel_size);
  p.mutable_parallel()->set_threads_per_worker(c.parallel.threads);
  p.mutable_parallel()->set_communicator(c.parallel.communicator);
  p.mutable_scheduler()->set_max_num_seqs(c.scheduler.max_num_seqs);
  p.mutable_scheduler()->set_max_num_batched_tokens(c.scheduler.max_num_batched_tokens);
  p.mutable_scheduler()->set_max_model_len(c.scheduler.max_model_len);
  p.mutable_scheduler()->set_policy(c.scheduler.policy == engine::SchedulingPolicy::kPriority
                                        ? "priority"
                                        : "fcfs");
  p.mutable_scheduler()->set_chunked_prefill(true);
  p.mutable_scheduler()->set_max_waiting_requests(max_waiting_requests);
  p.mutable_scheduler()->set_target_itl_ms(
      static_cast<int32_t>(absl::ToInt64Milliseconds(c.scheduler.slo.itl)));
  p.mutable_scheduler()->set_target_ttft_ms(
      static_cast<int32_t>(absl::ToInt64Milliseconds(c.scheduler.slo.ttft)));
  for (int32_t id : c.decoding.eos_token_ids) p.mutable_decoding()->add_eos_token_ids(id);
  // The engine's own per-request limits (ValidateSamplingParams); the
  // frontend narrows them to its flags and adds the ones it enforces alone.
  p.mutable_decoding()->set_max_n(engine::kMaxSamplesPerRequest);
  p.mutable_decoding()->set_max_logprobs(engine::kMaxLogprobs);
  p.mutable_lora()->set_enabled(c.lora.enabled);
  p.mutable_lora()->set_max_loras(c.lora.max_loras);
  p.mutable_lora()->set_max_lora_rank(c.lora.max_lora_rank);
  for (const auto& [name, value] : c.options) (*p.mutable_engine_options())[name] = value;
  return p;
}

rill::v1::Load ToLoad(const engine::EngineStats& s, int num_unfinished) {
  rill::v1::Load p;
  p.set_num_unfinished_requests(num_unfinished);
  p.set_num_waiting_requests(s.num_waiting);
  p.set_num_running_requests(s.num_running);
  p.set_kv_cache_usage(s.kv_usage);
  p.set_prefix_cache_hit_rate(s.prefix_cache_hit_rate);
  return p;
}

rill::v1::Stats ToStats(const engine::EngineStats& s) {
  rill::v1::Stats p;
  p.set_num_running(s.num_running);
  p.set_num_waiting(s.num_waiting);
  p.set_kv_cache_usage(s.kv_usage);
  p.set_prefix_cache_hit_rate(s.prefix_cache_hit_rate);
  p.set_prompt_tokens_total(s.prompt_tokens);
  p.set_generation_tokens_total(s.generation_tokens);
  p.set_steps_total(s.steps);
  p.set_preemptions_total(s.preemptions);
  p.set_requests_finished_total(s.requests_finished);
  p.set_requests_aborted_total(s.requests_aborted);
  p.set_requests_failed_total(s.requests_failed);
  p.set_tp_collective_seconds_total(s.tp_collective_seconds);
  p.set_engine_restarts_total(s.engine_restarts);
  p.set_prompt_tokens_per_second(s.prompt_tokens_per_second);
  p.set_generation_tokens_per_second(s.generation_tokens_per_second);
  return p;
}

engine::PoolingParams FromProto(const rill::v1::PoolingParams& proto) {
  engine::PoolingParams p;
  switch (proto.type()) {
    case rill::v1::POOLING_TYPE_MEAN: p.type = engine::PoolingType::kMean; break;
    case rill::v1::POOLING_TYPE_CLS: p.type = engine::PoolingType::kCls; break;
    case rill::v1::POOLING_TYPE_LAST: p.type = engine::PoolingType::kLast; break;
    default: p.type = engine::PoolingType::kDefault; break;
  }
  p.normalize = proto.has_normalize() ? proto.normalize() : true;
  p.dimensions = proto.dimensions();
  return p;
}

}  // namespace rill::engine::service
