#include "engine/service/vllm_generate.h"

#include <deque>
#include <memory>
#include <optional>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "base/engine_session.h"
#include "base/message_text.h"
#include "base/request_id.h"
#include "engine/service/request_spans.h"
#include "engine/service/status_convert.h"
#include "engine/service/vllm_convert.h"
#include "engine/structured_output/constraint.h"
#include "tokenizer/completion_text.h"

namespace rill::engine::service {
namespace {

using vllm_pb::GenerateComplete;
using vllm_pb::GenerateResponse;

// Engine ids of this API live apart from the native API's sessions.
constexpr char kEngineIdScope[] = "vllm-engine-api";

struct Sample {
  std::string engine_id;
  std::unique_ptr<tokenizer::CompletionText> text;  // Null without stop strings.
  std::vector<int32_t> token_ids;                   // Kept so far (cut at a stop string).
  vllm_pb::OutputLogProbs logprobs;                 // Non-streaming: all so far.
  std::optional<vllm_pb::InputLogProbs> input_logprobs;
  bool input_logprobs_sent = false;
  bool done = false;  // Its GenerateComplete is queued (or it failed).
};

// Shared by the handler thread and the engine loop's callbacks (which may
// outlive the handler, hence shared_ptr).
struct CallState {
  bool stream = false;
  bool want_logprobs = false;
  uint32_t prompt_tokens = 0;
  absl::Mutex mu;
  std::vector<Sample> samples ABSL_GUARDED_BY(mu);
  std::deque<GenerateResponse> queue ABSL_GUARDED_BY(mu);
  int num_done ABSL_GUARDED_BY(mu) = 0;
  absl::Status error ABSL_GUARDED_BY(mu);  // The first sample that failed.
};

// Engine loop thread: one output of sample `index`. Returns true when a stop
// string ended the sample (the caller then aborts its engine request).
bool OnOutput(CallState* s, int index, const engine::RequestOutput& out) {
  absl::MutexLock lock(&s->mu);
  Sample& sample = s->samples[index];
  if (sample.done) return false;  // E.g. the abort after a stop string.
  if (!out.prompt_logprobs.empty() && !sample.input_logprobs.has_value()) {
    FillInputLogprobs(out, &sample.input_logprobs.emplace());
  }
  const uint32_t cached = static_cast<uint32_t>(out.metrics.num_cached_tokens);
  bool stop_matched = false;
  std::string finish_reason;
  std::optional<int32_t> stop_token;
  for (const engine::CompletionOutput& c : out.outputs) {
    size_t kept = c.token_ids.size();
    if (sample.text != nullptr) {
      for (size_t k = 0; k < c.token_ids.size(); ++k) {
        if (sample.text->Push(c.token_ids[k])) {
          kept = k + 1;
          stop_matched = true;
          break;
        }
      }
    }
    sample.token_ids.insert(sample.token_ids.end(), c.token_ids.begin(),
                            c.token_ids.begin() + kept);
    const bool first_input = sample.input_logprobs.has_value() && !sample.input_logprobs_sent;
    if (s->stream && (kept > 0 || first_input)) {
      GenerateResponse r;
      vllm_pb::GenerateStreamChunk* chunk = r.mutable_chunk();
      for (size_t k = 0; k < kept; ++k) chunk->add_token_ids(static_cast<uint32_t>(c.token_ids[k]));
      chunk->set_prompt_tokens(s->prompt_tokens);
      chunk->set_completion_tokens(static_cast<uint32_t>(sample.token_ids.size()));
      chunk->set_cached_tokens(cached);
      if (s->want_logprobs) AppendOutputLogprobs(c, kept, chunk->mutable_output_logprobs());
      if (first_input) {
        *chunk->mutable_input_logprobs() = *sample.input_logprobs;
        sample.input_logprobs_sent = true;
      }
      chunk->set_index(static_cast<uint32_t>(index));
      s->queue.push_back(std::move(r));
    } else if (!s->stream && s->want_logprobs) {
      AppendOutputLogprobs(c, kept, &sample.logprobs);
    }
    if (!c.finish_reason.empty()) finish_reason = c.finish_reason;
    if (c.stop_reason.has_value()) stop_token = c.stop_reason;
    if (stop_matched) break;
  }
  if (!stop_matched && !out.finished) return false;
  sample.done = true;
  ++s->num_done;
  if (!stop_matched && !out.error.ok()) {
    if (s->error.ok()) s->error = out.error;
    return false;
  }
  GenerateResponse r;
  GenerateComplete* done = r.mutable_complete();
  // Streamed tokens were all sent as chunks; the complete only closes the index.
  if (!s->stream) {
    for (int32_t id : sample.token_ids) done->add_output_ids(static_cast<uint32_t>(id));
    if (s->want_logprobs) *done->mutable_output_logprobs() = std::move(sample.logprobs);
    if (sample.input_logprobs.has_value()) *done->mutable_input_logprobs() = *sample.input_logprobs;
  }
  done->set_finish_reason(stop_matched ? "stop" : (finish_reason.empty() ? "abort" : finish_reason));
  if (stop_matched) {
    done->set_matched_stop_str(*sample.text->stop_string());
  } else if (stop_token.has_value()) {
    done->set_matched_token_id(static_cast<uint32_t>(*stop_token));
  }
  done->set_prompt_tokens(s->prompt_tokens);
  done->set_completion_tokens(static_cast<uint32_t>(sample.token_ids.size()));
  done->set_cached_tokens(cached);
  done->set_index(static_cast<uint32_t>(index));
  s->queue.push_back(std::move(r));
  return stop_matched;
}

void AbortAll(engine::AsyncEngine* engine, const std::vector<std::string>& engine_ids) {
  // NotFound: the sample finished meanwhile.
  for (const std::string& id : engine_ids) (void)engine->Abort(id);
}

// Checks the request and builds the call's state; the engine parameters of
// the whole request (n samples) in `params`.
absl::Status Prepare(EngineHost* host, const tokenizer::BpeTokenizer* tokenizer,
                     const vllm_pb::GenerateRequest& request, std::vector<int32_t>* prompt,
                     engine::SamplingParams* params) {
  if (request.request_id().empty()) return absl::InvalidArgumentError("request_id is empty");
  if (absl::Status s = ValidateRequestIdLength(request.request_id()); !s.ok()) return s;
  if (absl::Status s = host->Serving(); !s.ok()) return s;
  engine::AsyncEngine* engine = host->engine();
  const engine::EngineConfig& config = engine->GetEngineConfig();
  absl::StatusOr<std::vector<int32_t>> ids = PromptOf(request, config.model.max_model_len);
  if (!ids.ok()) return ids.status();
  absl::StatusOr<engine::SamplingParams> p = FromVllmSampling(
      request.sampling_params(), static_cast<int64_t>(ids->size()), config.model.max_model_len);
  if (!p.ok()) return p.status();
  if (absl::Status s = engine::ValidateSamplingParams(*p, config.model.config.vocab_size); !s.ok()) {
    return s;
  }
  if (!p->stop.empty() && tokenizer == nullptr) {
    return absl::InvalidArgumentError("stop strings need the model's tokenizer, which it lacks");
  }
  const int limit = host->options().max_waiting_requests;
  if (limit > 0 && engine->GetStats().num_waiting >= limit) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the engine queue is full (", limit, " waiting requests); retry later"));
  }
  *prompt = std::move(*ids);
  *params = std::move(*p);
  return absl::OkStatus();
}

// The first value of `key` in the call's metadata (gRPC keys are
// lowercase), or "".
std::string MetadataValue(const grpc::ServerContext& context, const std::string& key) {
  const auto& md = context.client_metadata();
  auto it = md.find(key);
  return it == md.end() ? "" : std::string(it->second.data(), it->second.size());
}

// What the request's spans carry, with the caller's W3C trace context (a
// gateway sends it as call metadata; VllmEngine's messages have no field).
RequestSpanInfo SpanInfo(const grpc::ServerContext& context, const vllm_pb::GenerateRequest& request,
                         int64_t prompt_tokens, int n) {
  RequestSpanInfo info;
  info.request_id = request.request_id();
  info.prompt_tokens = prompt_tokens;
  if (request.sampling_params().has_max_tokens()) {
    info.max_tokens = request.sampling_params().max_tokens();
  }
  info.n = n;
  info.traceparent = MetadataValue(context, "traceparent");
  info.tracestate = MetadataValue(context, "tracestate");
  return info;
}

}  // namespace

absl::Status LiveVllmRequests::Add(const std::string& request_id,
                                   std::vector<std::string> engine_ids) {
  absl::MutexLock lock(&mu_);
  if (!live_.emplace(request_id, std::move(engine_ids)).second) {
    return absl::AlreadyExistsError(
        absl::StrCat("request '", ShortForMessage(request_id), "' is already running"));
  }
  return absl::OkStatus();
}

void LiveVllmRequests::Remove(const std::string& request_id) {
  absl::MutexLock lock(&mu_);
  live_.erase(request_id);
}

std::vector<std::string> LiveVllmRequests::EngineIds(const std::string& request_id) const {
  absl::MutexLock lock(&mu_);
  auto it = live_.find(request_id);
  return it == live_.end() ? std::vector<std::string>{} : it->second;
}

grpc::Status ServeVllmGenerate(EngineHost* host, const tokenizer::BpeTokenizer* tokenizer,
                               LiveVllmRequests* live, grpc::ServerContext* context,
                               const vllm_pb::GenerateRequest& request,
                               grpc::ServerWriter<GenerateResponse>* writer) {
  std::vector<int32_t> prompt;
  engine::SamplingParams params;
  if (absl::Status s = Prepare(host, tokenizer, request, &prompt, &params); !s.ok()) {
    return ToGrpcStatus(s);
  }
  engine::AsyncEngine* engine = host->engine();
  const std::string& id = request.request_id();
  if (params.constraint.active()) {
    // Shows what the gateway turned response_format / tool_choice into.
    VLOG(1) << "vllm Generate '" << ShortForMessage(id) << "' constrained by "
            << structured_output::ConstraintKindName(params.constraint.kind) << ": "
            << ShortForMessage(params.constraint.text, 200);
  }
  auto state = std::make_shared<CallState>();
  state->stream = request.stream();
  state->want_logprobs = request.sampling_params().has_logprobs();
  state->prompt_tokens = static_cast<uint32_t>(prompt.size());
  std::vector<std::string> engine_ids;
  {
    absl::MutexLock lock(&state->mu);
    state->samples.resize(params.n);
    for (int i = 0; i < params.n; ++i) {
      Sample& sample = state->samples[i];
      sample.engine_id = base::ScopedRequestId(kEngineIdScope, absl::StrCat(id, "#", i));
      engine_ids.push_back(sample.engine_id);
      if (!params.stop.empty()) {
        sample.text = std::make_unique<tokenizer::CompletionText>(
            tokenizer, params.skip_special_tokens,
            tokenizer::StopStringOptions{params.stop, params.include_stop_str_in_output,
                                         params.min_tokens});
      }
    }
  }
  if (absl::Status s = live->Add(id, engine_ids); !s.ok()) return ToGrpcStatus(s);
  const RequestSpanInfo span_info =
      SpanInfo(*context, request, static_cast<int64_t>(prompt.size()), params.n);
  for (int i = 0; i < params.n; ++i) {
    engine::SamplingParams one = params.ForSample(i);
    one.stop.clear();  // Matched here, on the detokenized sample.
    const std::string engine_id = engine_ids[i];
    // Each sample is its own engine request, with its own queue / prefill /
    // decode times: one set of spans per sample, all under the caller's span.
    std::shared_ptr<RequestSpans> spans = RequestSpans::Begin(host->options().tracer, span_info);
    absl::Status s = engine->GenerateWithCallback(
        prompt, one, engine_id,
        [state, i, engine, engine_id, spans](const engine::RequestOutput& out) {
          if (spans != nullptr) spans->OnOutput(out);
          if (OnOutput(state.get(), i, out)) (void)engine->Abort(engine_id);
        });
    if (!s.ok()) {
      AbortAll(engine, std::vector<std::string>(engine_ids.begin(), engine_ids.begin() + i));
      live->Remove(id);
      return ToGrpcStatus(s);
    }
  }
  grpc::Status result = grpc::Status::OK;
  while (true) {
    std::deque<GenerateResponse> batch;
    bool all_done = false;
    absl::Status error;
    {
      absl::MutexLock lock(&state->mu);
      auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state->mu) {
        return !state->queue.empty() || !state->error.ok() ||
               state->num_done == static_cast<int>(state->samples.size());
      };
      state->mu.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(50));
      batch.swap(state->queue);
      all_done = state->num_done == static_cast<int>(state->samples.size());
      error = state->error;
    }
    bool write_failed = false;
    for (GenerateResponse& r : batch) {
      if (!writer->Write(r)) {
        write_failed = true;
        break;
      }
    }
    if (!error.ok()) {
      result = ToGrpcStatus(error);
      break;
    }
    if (write_failed || context->IsCancelled()) {
      result = grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
      break;
    }
    if (all_done) break;
  }
  if (!result.ok()) {
    AbortAll(engine, engine_ids);
    LOG(INFO) << "vllm Generate '" << ShortForMessage(id) << "' ended (" << result.error_message()
              << "): aborted its samples";
  }
  live->Remove(id);
  return result;
}

}  // namespace rill::engine::service
