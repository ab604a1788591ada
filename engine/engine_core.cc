#include "engine/engine_core.h"

#include <algorithm>
#include <cmath>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/device_sampling.h"
#include "engine/logits_processor.h"
#include "engine/max_model_len.h"
#include "engine/structured_output/constraint_matcher.h"

namespace rill::engine {
namespace {

// The window every layer of the model has (then out-of-window KV blocks
// can be freed), else 0: a layer with full attention reads every block.
int64_t WindowOfEveryLayer(const worker::loader::ModelConfig& model) {
  if (model.sliding_window <= 0) return 0;
  for (int64_t l = 0; l < model.num_layers; ++l) {
    if (model.LayerWindow(l) <= 0) return 0;
  }
  return model.sliding_window;
}

SchedulerConfig Clamp(SchedulerConfig c, const worker::loader::ModelConfig& model) {
  const int64_t context = model.max_position_embeddings;
  c.max_model_len = ResolveMaxModelLen(c.max_model_len, context).value_or(context);
  c.sliding_window = c.free_out_of_window_blocks ? WindowOfEveryLayer(model) : 0;
  return c;
}

EngineCoreOutput OutputFor(const Request& r) {
  EngineCoreOutput o;
  o.request_id = r.request_id;
  o.state = r.state;
  o.stop_reason = r.stop_reason;
  o.times = r.times;
  o.num_cached_tokens = r.num_cached_prompt_tokens;
  o.num_preemptions = r.num_preemptions;
  if (IsFinished(r.state)) o.lora_name = r.lora_name;
  return o;
}

}  // namespace

EngineCore::EngineCore(ModelExecutor* executor, SchedulerConfig scheduler,
                       bool enable_prefix_caching)
    : executor_(executor),
      draft_(executor->draft_model() == nullptr
                 ? nullptr
                 : std::make_unique<spec_decode::DraftModelProposer>(executor->draft_model())),
      blocks_(executor->num_blocks(), executor->block_size(), enable_prefix_caching),
      scheduler_(Clamp(scheduler, executor->model_config()), &blocks_),
      vocab_size_(executor->model_config().vocab_size) {
  const worker::loader::ModelConfig& m = executor->model_config();
  for (int64_t id : m.eos_token_ids) eos_ids_.push_back(static_cast<int32_t>(id));
  if (m.eos_token_id >= 0 &&
      std::find(eos_ids_.begin(), eos_ids_.end(), m.eos_token_id) == eos_ids_.end()) {
    eos_ids_.push_back(static_cast<int32_t>(m.eos_token_id));
  }
  if (draft_ != nullptr) {
    CHECK_EQ(draft_->executor()->model_config().vocab_size, vocab_size_)
        << "the draft model's vocabulary differs from the model's";
    // Whatever frees a sequence's blocks (finish, abort, preemption) frees
    // its draft blocks too.
    blocks_.SetSequenceFreedListener([this](int64_t seq_id) { draft_->Release(seq_id); });
  }
}

absl::Status EngineCore::AddRequest(std::unique_ptr<Request> r) {
  if (absl::Status s = Validate(*r); !s.ok()) return s;
  if (r->params.constraint.active() && r->matcher == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(structured_output::ConstraintKindName(r->params.constraint.kind),
                     ": the request has no compiled grammar (structured outputs need the "
                     "engine's tokenizer vocabulary)"));
  }
  return scheduler_.AddRequest(std::move(r));
}

absl::Status EngineCore::Validate(const Request& req) const {
  const Request* r = &req;
  if (absl::Status s = ValidateSamplingParams(r->params, vocab_size_); !s.ok()) return s;
  for (int32_t t : r->prompt_token_ids) {
    if (t < 0 || t >= vocab_size_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "prompt_token_ids: ", t, " is not a token id (vocabulary of ", vocab_size_, ")"));
    }
  }
  return scheduler_.CheckFits(req);
}

absl::Status EngineCore::AbortRequest(const std::string& request_id) {
  std::unique_ptr<Request> r = scheduler_.FinishRequest(request_id, RequestState::kFinishedAborted);
  if (r == nullptr) return absl::NotFoundError(absl::StrCat("no unfinished request '", request_id, "'"));
  r->times.finished = absl::Now();
  pending_.push_back(OutputFor(*r));
  return absl::OkStatus();
}

bool EngineCore::FinishStopped(const std::string& request_id) {
  std::unique_ptr<Request> r = scheduler_.FinishRequest(request_id, RequestState::kFinishedStopped);
  return r != nullptr;
}

void EngineCore::RecordPromptLogprobs(const ScheduledChunk& c, const std::vector<float>& row) {
  Request* r = c.request;
  const int64_t prompt = r->prompt_token_ids.size();
  const int k = *r->params.prompt_logprobs;
  for (int64_t j = 0; j < c.num_tokens; ++j) {
    const int64_t target = c.start_pos + j + 1;  // The position these logits predict.
    if (target >= prompt) break;
    // After a preemption the prompt is recomputed: keep the first values.
    if (target - 1 != static_cast<int64_t>(r->prompt_logprobs.size())) continue;
    const float* logits = row.data() + j * vocab_size_;
    r->prompt_logprobs.push_back(TokenLogprob(logits, vocab_size_, r->prompt_token_ids[target]));
    r->prompt_top_logprobs.push_back(TopKLogprobs(logits, vocab_size_, k));
  }
}

std::vector<EngineCoreOutput> EngineCore::TakePendingOutputs() {
  std::vector<EngineCoreOutput> out;
  out.swap(pending_);
  return out;
}

std::vector<EngineCoreOutput> EngineCore::FailAll(const absl::Status& status) {
  std::vector<EngineCoreOutput> out = TakePendingOutputs();
  for (const std::string& id : scheduler_.UnfinishedIds()) {
    std::unique_ptr<Request> r = scheduler_.FinishRequest(id, RequestState::kFinishedError);
    r->times.finished = absl::Now();
    EngineCoreOutput& o = out.emplace_back(OutputFor(*r));
    o.error = status;
  }
  return out;
}

EngineCore::SampledRow EngineCore::SampleRow(Request* r, float* logits, int draft_row) const {
  ProcessLogits(*r, eos_ids_, logits, vocab_size_);
  // The grammar mask goes last, so penalties and logit_bias never revive a
  // forbidden token; the sampler's temperature / top-k / top-p / min-p and
  // seed then apply to what is left. Step filled the bitmask during the
  // forward (ExecuteFillingMasks); Sync is a no-op unless that failed. A
  // draft's rows use the masks filled along it, with no Sync (which would
  // roll the matcher back from the draft's end).
  if (r->matcher != nullptr && (draft_row >= 0 || r->matcher->Sync(r->output_token_ids).ok())) {
    r->matcher->ApplyBitmask(logits, vocab_size_, std::max(draft_row, 0));
    // A grammar that has ended allows only EOS, which min_tokens masks: the
    // grammar wins (EOS tokens fill up to min_tokens) rather than a row with
    // nothing left to sample.
    if (static_cast<int>(r->output_token_ids.size()) < r->params.min_tokens &&
        std::all_of(logits, logits + vocab_size_, [](float x) { return std::isinf(x); })) {
      for (int32_t t : eos_ids_) {
        if (t >= 0 && t < vocab_size_) logits[t] = 0.0f;
      }
    }
  }
  const worker::SampledToken t = r->sampler.Sample(logits, vocab_size_);
  SampledRow out{t.token, t.logprob, {}};
  if (r->params.logprobs > 0) {
    out.top = TopKLogprobs(logits, vocab_size_, r->params.logprobs, t.log_z);
  }
  return out;
}

EngineCoreOutput EngineCore::Advance(Request* r, SampledRow tok, bool check_grammar) {
  const absl::Time now = absl::Now();
  r->output_token_ids.push_back(tok.token);
  r->output_logprobs.push_back(tok.logprob);
  r->cumulative_logprob += tok.logprob;
  if (r->times.first_token == absl::InfinitePast()) r->times.first_token = now;
  r->times.last_token = now;
  ++stats_.generation_tokens;

  EngineCoreOutput o;
  o.new_token_ids = {tok.token};
  o.new_logprobs = {tok.logprob};
  if (r->params.logprobs > 0) o.new_top_logprobs.push_back(std::move(tok.top));
  const int num_out = static_cast<int>(r->output_token_ids.size());
  const bool past_min = num_out >= r->params.min_tokens;
  const auto& stops = r->params.stop_token_ids;
  std::optional<RequestState> end;
  if (past_min && !r->params.ignore_eos &&
      std::find(eos_ids_.begin(), eos_ids_.end(), tok.token) != eos_ids_.end()) {
    end = RequestState::kFinishedStopped;
  } else if (past_min && std::find(stops.begin(), stops.end(), tok.token) != stops.end()) {
    end = RequestState::kFinishedStopped;
    r->stop_reason = tok.token;
  } else if (r->matcher != nullptr && check_grammar &&
             !(o.error = r->matcher->Sync(r->output_token_ids)).ok()) {
    end = RequestState::kFinishedError;  // Only if the mask let a forbidden token through.
  } else if (num_out >= r->params.max_tokens ||
             r->num_tokens() >= scheduler_.config().max_model_len) {
    end = RequestState::kFinishedLength;
  }
  std::unique_ptr<Request> done;
  if (end.has_value()) {
    r->times.finished = now;
    done = scheduler_.FinishRequest(r->request_id, *end);
    r = done.get();
  }
  EngineCoreOutput base = OutputFor(*r);
  base.new_token_ids = std::move(o.new_token_ids);
  base.new_logprobs = std::move(o.new_logprobs);
  base.new_top_logprobs = std::move(o.new_top_logprobs);
  base.error = std::move(o.error);
  if (r->params.prompt_logprobs.has_value() && r->output_token_ids.size() == 1) {
    base.prompt_logprobs = r->prompt_logprobs;
    base.prompt_top_logprobs = r->prompt_top_logprobs;
  }
  return base;
}

absl::Status EngineCore::CheckDeviceSampled(const worker::ForwardBatch& batch,
                                            const worker::ForwardOutput& fwd) const {
  for (size_t i = 0; i < batch.sequences.size(); ++i) {
    if (!batch.sequences[i].device_sampling.has_value()) continue;
    if (fwd.sampled.size() != batch.sequences.size()) {
      return absl::InternalError(absl::StrCat("executor returned ", fwd.sampled.size(),
                                              " sampled tokens for ", batch.sequences.size(),
                                              " sequences"));
    }
    const int32_t t = fwd.sampled[i].token;
    if (t < 0 || t >= vocab_size_) {
      return absl::InternalError(absl::StrCat("executor sampled token ", t, " for sequence ", i,
                                              " (vocabulary of ", vocab_size_, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status EngineCore::ExecuteFillingMasks(const SchedulerOutput& plan,
                                             const worker::ForwardBatch& batch,
                                             worker::ForwardOutput* fwd) {
  // A grammar's next-token bitmask depends only on the tokens accepted so
  // far, so the rows about to be sampled get theirs on the core's helper
  // thread while the model runs (the loop thread only waits in Execute
  // meanwhile). Wait comes before any return: the task reads `masked`.
  // A chunk that verifies a draft gets one bitmask per position
  // (ProposeDrafts kept only what the grammar accepts).
  std::vector<std::pair<Request*, const std::vector<int32_t>*>> masked;
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const ScheduledChunk& c = plan.chunks[i];
    Request* r = c.request;
    if (r->matcher != nullptr && c.start_pos + c.num_tokens >= r->num_tokens()) {
      masked.emplace_back(r, &drafts_[i]);
    }
  }
  if (masked.empty()) return executor_->Execute(batch, fwd);
  mask_filler_.Start([&masked] {
    for (const auto& [r, draft] : masked) {
      if (r->matcher->Sync(r->output_token_ids).ok()) r->matcher->FillBitmasks(*draft);
    }
  });
  absl::Status s = executor_->Execute(batch, fwd);
  mask_filler_.Wait();
  return s;
}

absl::StatusOr<std::vector<EngineCoreOutput>> EngineCore::Step() {
  std::vector<EngineCoreOutput> outputs = TakePendingOutputs();
  const absl::Time step_start = absl::Now();
  const int64_t preempted_before = scheduler_.num_preemptions();
  SchedulerOutput plan = scheduler_.Schedule(step_start);
  stats_.preemptions += scheduler_.num_preemptions() - preempted_before;
  if (std::vector<std::pair<std::string, RequestState>> t = scheduler_.TakeTransitions();
      on_transitions_ && !t.empty()) {
    on_transitions_(t);
  }
  last_step_ = StepReport();
  if (plan.empty()) return outputs;
  DraftBudget draft_budget(plan, scheduler_.config().max_num_batched_tokens,
                           scheduler_.slo_budget());
  ProposeDrafts(plan, &draft_budget);

  worker::ForwardBatch batch;
  batch.sequences.reserve(plan.chunks.size());
  for (const ScheduledChunk& c : plan.chunks) {
    worker::SequenceChunk& s = batch.sequences.emplace_back();
    s.start_pos = static_cast<int32_t>(c.start_pos);
    s.tokens.reserve(c.num_tokens);
    for (int64_t i = 0; i < c.num_tokens; ++i) s.tokens.push_back(c.request->token_at(c.start_pos + i));
    s.block_table = blocks_.BlockTable(c.request->seq_no);
    s.lora = c.request->lora;
    s.all_logits = c.request->params.prompt_logprobs.has_value() &&
                   c.start_pos + 1 < static_cast<int64_t>(c.request->prompt_token_ids.size());
    const std::vector<int32_t>& draft = drafts_[batch.sequences.size() - 1];
    if (!draft.empty()) {
      // Verification: the logits after the last token and after each draft token.
      s.tokens.insert(s.tokens.end(), draft.begin(), draft.end());
      s.all_logits = true;
      last_step_.num_tokens += static_cast<int64_t>(draft.size());
    }
    // A row sampled this step (its chunk reaches the end of its tokens) goes
    // to the device when the executor samples there and the row allows it.
    if (executor_->samples_on_device() &&
        c.start_pos + c.num_tokens >= c.request->num_tokens()) {
      const HostSamplingReason why =
          WhyHostSamples(*c.request, !draft.empty(), s.all_logits);
      if (why == HostSamplingReason::kNone) {
        s.device_sampling = DeviceSamplingFor(c.request, eos_ids_, vocab_size_);
        ++stats_.device_sampled_rows;
      } else {
        ++stats_.host_sampled_rows;
      }
    }
  }
  worker::ForwardOutput& fwd = fwd_;  // Reused: its rows keep their capacity.
  last_step_.num_seqs = static_cast<int>(plan.chunks.size());
  last_step_.num_tokens += plan.num_batched_tokens;
  const absl::Time execute_start = absl::Now();
  if (absl::Status s = ExecuteFillingMasks(plan, batch, &fwd); !s.ok()) return s;
  const absl::Time sample_start = absl::Now();
  last_step_.execute += sample_start - execute_start;  // After the draft model's, if any.
  last_step_.collective = executor_->last_collective_time();
  if (fwd.logits.size() != plan.chunks.size()) {
    return absl::InternalError(absl::StrCat("executor returned ", fwd.logits.size(),
                                            " logits rows for ", plan.chunks.size(), " sequences"));
  }
  if (absl::Status s = CheckDeviceSampled(batch, fwd); !s.ok()) return s;
  ++stats_.steps;
  // Rows that end their sequence's computed tokens get a token: sampled
  // first, all at once on the executor's threads (each row is its own
  // request's), then advanced one by one in plan order.
  sample_rows_.clear();
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const ScheduledChunk& c = plan.chunks[i];
    Request* r = c.request;
    r->num_computed_tokens = c.start_pos + c.num_tokens;
    const bool is_decode = c.num_tokens == 1 && !r->output_token_ids.empty() &&
                           r->num_computed_tokens == r->num_tokens();
    if (!is_decode) stats_.prompt_tokens += c.num_tokens;
    const int bs = blocks_.block_size();
    if (blocks_.prefix_caching() && c.start_pos / bs != r->num_computed_tokens / bs) {
      blocks_.CacheFullBlocks(r->seq_no, r->AllTokens(), r->num_computed_tokens, r->lora_key);
    }
    const std::vector<float>& row = fwd.logits[i];
    if (!drafts_[i].empty()) {
      if (static_cast<int64_t>(row.size()) != static_cast<int64_t>(1 + drafts_[i].size()) * vocab_size_) {
        return absl::InternalError("executor ignored all_logits of a draft");
      }
      sample_rows_.push_back(i);
      continue;
    }
    if (batch.sequences[i].all_logits) {
      if (static_cast<int64_t>(row.size()) != c.num_tokens * vocab_size_) {
        return absl::InternalError("executor ignored all_logits");
      }
      RecordPromptLogprobs(c, row);
    }
    // Partial prefill: the logits of a chunk that does not reach the end are unused.
    if (r->num_computed_tokens < r->num_tokens()) continue;
    if (batch.sequences[i].device_sampling.has_value()) {
      sample_rows_.push_back(i);  // sampled already: no logits row
      continue;
    }
    if (static_cast<int64_t>(row.size()) < vocab_size_) {
      return absl::InternalError("executor returned a short logits row");
    }
    sample_rows_.push_back(i);
  }
  sampled_.resize(sample_rows_.size());
  executor_->ParallelFor(static_cast<int64_t>(sample_rows_.size()), [&](int64_t k) {
    const size_t i = sample_rows_[k];
    std::vector<float>& row = fwd.logits[i];
    Request* r = plan.chunks[i].request;
    if (batch.sequences[i].device_sampling.has_value()) {
      const worker::DeviceSampledToken& t = fwd.sampled[i];
      sampled_[k].assign(1, SampledRow{t.token, t.logprob, t.top});
    } else if (!drafts_[i].empty()) {
      sampled_[k] = draft_probs_[i].empty()
                        ? VerifyDraft(r, row.data(), drafts_[i])
                        : VerifySampledDraft(r, row.data(), drafts_[i], draft_probs_[i]);
    } else {
      sampled_[k].assign(1, SampleRow(r, row.data() + row.size() - vocab_size_));
    }
  });
  last_step_.sample = absl::Now() - sample_start;
  // Decode-only steps measure the rate drafts are priced against.
  bool decode_only = plan.num_batched_tokens == static_cast<int64_t>(plan.chunks.size());
  int64_t emitted = 0;
  for (size_t k = 0; k < sample_rows_.size(); ++k) {
    const size_t i = sample_rows_[k];
    Request* r = plan.chunks[i].request;
    decode_only = decode_only && !r->output_token_ids.empty();
    emitted += static_cast<int64_t>(sampled_[k].size());
    if (!drafts_[i].empty()) {
      outputs.push_back(AdvanceVerified(r, plan.chunks[i], drafts_[i], draft_contexts_[i],
                                        std::move(sampled_[k])));
    } else {
      outputs.push_back(Advance(r, std::move(sampled_[k][0])));
    }
  }
  // The verified drafts' tokens were computed too, accepted or not.
  const absl::Duration step_time = absl::Now() - step_start;
  scheduler_.RecordStepTime(draft_budget.step(), step_time);
  if (spec_.enabled() && decode_only) {
    // Half-life ~35 steps: follows the load and the policy it prices.
    constexpr double kKeep = 0.98;
    decode_tokens_ = kKeep * decode_tokens_ + static_cast<double>(emitted);
    decode_seconds_ = kKeep * decode_seconds_ + absl::ToDoubleSeconds(step_time);
  }
  return outputs;
}

absl::Status EngineCore::Sleep(int level) {
  if (level >= 1) {
    scheduler_.PreemptAll();
    blocks_.ResetPrefixCache();
  }
  if (draft_ != nullptr) {
    if (absl::Status s = draft_->executor()->Sleep(level); !s.ok()) return s;
  }
  return executor_->Sleep(level);
}

absl::Status EngineCore::WakeUp() {
  if (draft_ != nullptr) {
    if (absl::Status s = draft_->executor()->WakeUp(); !s.ok()) return s;
  }
  return executor_->WakeUp();
}

}  // namespace rill::engine
