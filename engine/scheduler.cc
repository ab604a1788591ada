#include "engine/scheduler.h"

#include <algorithm>
#include <set>
#include <tuple>

#include <glog/logging.h>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace rill::engine {

absl::Status ValidateSchedulerConfig(const SchedulerConfig& c) {
  if (c.max_num_seqs < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_num_seqs must be >= 1, got ", c.max_num_seqs));
  }
  if (c.max_num_batched_tokens < c.max_num_seqs) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_num_batched_tokens (", c.max_num_batched_tokens,
                     ") must be >= max_num_seqs (", c.max_num_seqs, ")"));
  }
  if (c.max_model_len < 2) {
    return absl::InvalidArgumentError(absl::StrCat("max_model_len must be >= 2, got ", c.max_model_len));
  }
  if (c.slo.itl < absl::ZeroDuration() || c.slo.ttft < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("target_itl_ms and target_ttft_ms must be >= 0");
  }
  if (c.slo.ttft > absl::ZeroDuration() && !c.slo.enabled()) {
    return absl::InvalidArgumentError(
        "target_ttft_ms needs target_itl_ms: the TTFT target only enlarges chunks that the ITL "
        "target would otherwise keep small");
  }
  return absl::OkStatus();
}

bool Scheduler::Order::operator()(const Request* a, const Request* b) const {
  if (policy == SchedulingPolicy::kPriority) {
    return std::tie(a->priority, a->times.arrival, a->seq_no) <
           std::tie(b->priority, b->times.arrival, b->seq_no);
  }
  return std::tie(a->times.arrival, a->seq_no) < std::tie(b->times.arrival, b->seq_no);
}

Scheduler::Scheduler(const SchedulerConfig& config, BlockManager* blocks)
    : config_(config),
      blocks_(blocks),
      order_{config.policy},
      waiting_(order_),
      slo_(config.slo, config.max_num_batched_tokens) {}

absl::Status Scheduler::AddRequest(std::unique_ptr<Request> request) {
  if (requests_.contains(request->request_id)) {
    return absl::AlreadyExistsError(
        absl::StrCat("request id '", request->request_id, "' is already in use"));
  }
  if (absl::Status s = CheckFits(*request); !s.ok()) return s;
  request->seq_no = next_seq_no_++;
  request->state = RequestState::kWaiting;
  request->num_computed_tokens = 0;
  Request* r = request.get();
  requests_[r->request_id] = std::move(request);
  waiting_.insert(r);
  return absl::OkStatus();
}

absl::Status Scheduler::CheckFits(const Request& req) const {
  const Request* request = &req;
  const int64_t prompt = request->prompt_token_ids.size();
  if (prompt == 0) return absl::InvalidArgumentError("the prompt has no tokens");
  const int64_t total = prompt + request->params.max_tokens;
  if (total > config_.max_model_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt (", prompt, " tokens) + max_tokens (", request->params.max_tokens,
        ") = ", total, " exceeds the maximum model length of ", config_.max_model_len, " tokens"));
  }
  // A request that cannot fit in the whole cache would preempt itself forever.
  // Under a window on every layer a step holds only the window's blocks and
  // its own new tokens' (plus a partial block at each end).
  int64_t needed = blocks_->BlocksFor(total);
  if (config_.sliding_window > 0) {
    needed = std::min<int64_t>(
        needed, (config_.sliding_window + config_.max_num_batched_tokens - 2) /
                        blocks_->block_size() + 2);
  }
  if (needed > blocks_->num_blocks()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt (", prompt, " tokens) + max_tokens (", request->params.max_tokens, ") needs ",
        needed, " KV blocks but the cache has only ", blocks_->num_blocks(),
        " blocks of ", blocks_->block_size(), " tokens"));
  }
  return absl::OkStatus();
}

Request* Scheduler::Find(const std::string& request_id) const {
  auto it = requests_.find(request_id);
  return it == requests_.end() ? nullptr : it->second.get();
}

std::vector<std::string> Scheduler::UnfinishedIds() const {
  std::vector<std::string> ids;
  for (const auto& [id, r] : requests_) ids.push_back(id);
  return ids;
}

int64_t Scheduler::DeadBlocks(int64_t start) const {
  if (config_.sliding_window <= 0) return 0;
  return std::max<int64_t>(0, start - config_.sliding_window + 1) / blocks_->block_size();
}

void Scheduler::RemoveFromRunning(Request* r) {
  auto it = std::find(running_.begin(), running_.end(), r);
  if (it != running_.end()) running_.erase(it);
}

void Scheduler::Preempt(Request* r) {
  CHECK(r->state == RequestState::kRunning);
  blocks_->Free(r->seq_no);
  RemoveFromRunning(r);
  r->state = RequestState::kPreempted;
  r->num_computed_tokens = 0;
  ++r->num_preemptions;
  ++num_preemptions_;
  waiting_.insert(r);
  transitions_.emplace_back(r->request_id, RequestState::kPreempted);
  VLOG(1) << "preempted " << r->request_id << " (" << r->num_tokens() << " tokens to recompute)";
}

void Scheduler::PreemptAll() {
  std::vector<Request*> running = running_;
  for (Request* r : running) Preempt(r);
}

std::unique_ptr<Request> Scheduler::FinishRequest(const std::string& request_id,
                                                  RequestState state) {
  CHECK(IsFinished(state));
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return nullptr;
  std::unique_ptr<Request> r = std::move(it->second);
  requests_.erase(it);
  waiting_.erase(r.get());
  RemoveFromRunning(r.get());
  blocks_->Free(r->seq_no);
  r->state = state;
  return r;
}

std::vector<std::pair<std::string, RequestState>> Scheduler::TakeTransitions() {
  std::vector<std::pair<std::string, RequestState>> t;
  t.swap(transitions_);
  return t;
}

bool Scheduler::ForkBlocks(const Request& r, std::vector<int32_t>* blocks) const {
  blocks->clear();
  if (r.fork_parent_id.empty() || r.num_preemptions > 0) return true;
  const Request* parent = Find(r.fork_parent_id);
  if (parent == nullptr) return true;  // Finished: compute the prompt alone.
  const int64_t prompt = r.prompt_token_ids.size();
  if (parent->state != RequestState::kRunning || parent->num_computed_tokens < prompt) {
    return parent->state == RequestState::kPreempted;  // Don't wait on a preempted parent.
  }
  // Full blocks holding prompt tokens only, leaving the last prompt token to
  // compute (its logits start the sample).
  // A parent whose first blocks fell out of the window has no whole prompt
  // left to share: the sample computes its prompt alone.
  if (blocks_->NumDeadBlocks(parent->seq_no) > 0) return true;
  const std::vector<int32_t>& table = blocks_->BlockTable(parent->seq_no);
  const size_t n = std::min<size_t>(table.size(), (prompt - 1) / blocks_->block_size());
  blocks->assign(table.begin(), table.begin() + n);
  return true;
}

bool Scheduler::PreemptFor(const Request* r, absl::flat_hash_map<Request*, size_t>* chunk_of,
                           SchedulerOutput* out, int64_t* budget) {
  if (config_.policy != SchedulingPolicy::kPriority || running_.empty()) return false;
  Request* victim = *std::max_element(running_.begin(), running_.end(), order_);
  if (!(r->priority < victim->priority)) return false;
  if (auto c = chunk_of->find(victim); c != chunk_of->end()) {
    *budget += out->chunks[c->second].num_tokens;
    out->chunks[c->second].num_tokens = 0;
    chunk_of->erase(c);
  }
  Preempt(victim);
  out->preempted.push_back(victim);
  return true;
}

bool Scheduler::LoraFits(const Request& request) const {
  if (config_.max_loras <= 0 || request.lora_key == 0) return true;
  absl::flat_hash_set<uint64_t> active;
  for (const Request* r : running_) {
    if (r->lora_key == 0) continue;
    if (r->lora_key == request.lora_key) return true;
    active.insert(r->lora_key);
  }
  return static_cast<int>(active.size()) < config_.max_loras;
}

int64_t Scheduler::PrefillLimit(const Request& r, int64_t start, int64_t remaining,
                                const StepShape& planned, bool first_prefill,
                                absl::Time now) const {
  // One token left is a decode (or a prompt's last token): never held back.
  if (!slo_.enabled() || remaining <= 1) return remaining;
  const absl::Time deadline = config_.slo.ttft > absl::ZeroDuration()
                                  ? r.times.arrival + config_.slo.ttft
                                  : absl::InfiniteFuture();
  return slo_.ChunkLimit(planned, start, remaining, deadline, now, first_prefill);
}

StepShape SchedulerOutput::Shape() const {
  StepShape shape;
  for (const ScheduledChunk& c : chunks) shape.AddChunk(c.start_pos, c.num_tokens);
  return shape;
}

void Scheduler::RecordStepTime(const StepShape& step, absl::Duration step_time) {
  if (!(slo_.enabled() || measure_step_times_) || step.tokens == 0) return;
  slo_.ObserveStep(step, step_time);
}

SchedulerOutput Scheduler::Schedule(absl::Time now) {
  SchedulerOutput out;
  // What the step holds so far, for the SLO budget.
  StepShape planned;
  bool has_prefill = false;
  int64_t budget = config_.max_num_batched_tokens;
  // Index into out.chunks per scheduled request, so a later preemption in
  // this step can take its chunk back.
  absl::flat_hash_map<Request*, size_t> chunk_of;

  std::vector<Request*> order = running_;
  std::stable_sort(order.begin(), order.end(), [&](const Request* a, const Request* b) {
    const bool a_prefill = a->num_tokens() - a->num_computed_tokens > 1;
    const bool b_prefill = b->num_tokens() - b->num_computed_tokens > 1;
    if (a_prefill != b_prefill) return !a_prefill;
    return order_(a, b);
  });
  for (Request* r : order) {
    if (budget == 0) break;
    if (r->state != RequestState::kRunning) continue;  // Preempted by an earlier one.
    const int64_t remaining = r->num_tokens() - r->num_computed_tokens;
    CHECK_GT(remaining, 0) << r->request_id;
    const int64_t num_new = PrefillLimit(*r, r->num_computed_tokens, std::min(remaining, budget),
                                         planned, !has_prefill, now);
    if (num_new == 0) continue;  // Its next chunk waits for a step with time left.
    while (true) {
      if (blocks_->Allocate(r->seq_no, r->num_computed_tokens + num_new, {},
                            DeadBlocks(r->num_computed_tokens))) {
        chunk_of[r] = out.chunks.size();
        out.chunks.push_back({r, r->num_computed_tokens, num_new});
        budget -= num_new;
        planned.AddChunk(r->num_computed_tokens, num_new);
        has_prefill = has_prefill || remaining > 1;
        break;
      }
      Request* victim = *std::max_element(running_.begin(), running_.end(), order_);
      if (auto c = chunk_of.find(victim); c != chunk_of.end()) {
        budget += out.chunks[c->second].num_tokens;
        out.chunks[c->second].num_tokens = 0;
        chunk_of.erase(c);
      }
      Preempt(victim);
      out.preempted.push_back(victim);
      if (victim == r) break;
    }
  }

  // Admitting new work right after preempting for memory would only thrash
  // the cache.
  const bool preempted_for_memory = !out.preempted.empty();
  const int bs = blocks_->block_size();
  auto it = waiting_.begin();
  while (!preempted_for_memory && it != waiting_.end() && budget > 0) {
    Request* r = *it;
    std::vector<int32_t> forked;
    if (!ForkBlocks(*r, &forked)) {
      ++it;  // Its parent is still computing the shared prompt.
      continue;
    }
    if (!LoraFits(*r)) {
      ++it;  // Waits until a running adapter's requests finish.
      continue;
    }
    if (static_cast<int>(running_.size()) >= config_.max_num_seqs) {
      if (!PreemptFor(r, &chunk_of, &out, &budget)) break;
      it = waiting_.find(r);
      continue;
    }
    const std::vector<int32_t> tokens = r->AllTokens();
    // prompt_logprobs needs the logits of every prompt position.
    std::vector<int32_t> cached;
    if (!r->params.prompt_logprobs.has_value()) {
      cached = blocks_->FindCachedPrefix(tokens, r->lora_key);
      if (forked.size() > cached.size()) cached = std::move(forked);
    }
    const int64_t num_cached = static_cast<int64_t>(cached.size()) * bs;
    const int64_t num_new =
        PrefillLimit(*r, num_cached, std::min<int64_t>(tokens.size() - num_cached, budget),
                     planned, !has_prefill, now);
    if (num_new == 0) break;  // No time left in this step for another prompt.
    if (!blocks_->Allocate(r->seq_no, num_cached + num_new, cached, DeadBlocks(num_cached))) {
      if (!PreemptFor(r, &chunk_of, &out, &budget)) break;
      it = waiting_.find(r);
      continue;
    }
    blocks_->RecordQuery(tokens.size(), num_cached);
    it = waiting_.erase(it);
    r->num_computed_tokens = num_cached;
    r->num_cached_prompt_tokens = num_cached;
    r->state = RequestState::kRunning;
    transitions_.emplace_back(r->request_id, RequestState::kRunning);
    if (r->times.first_scheduled == absl::InfinitePast()) r->times.first_scheduled = now;
    running_.push_back(r);
    chunk_of[r] = out.chunks.size();
    out.chunks.push_back({r, num_cached, num_new});
    budget -= num_new;
    planned.AddChunk(num_cached, num_new);
    has_prefill = has_prefill || static_cast<int64_t>(tokens.size()) - num_cached > 1;
  }

  out.chunks.erase(std::remove_if(out.chunks.begin(), out.chunks.end(),
                                  [](const ScheduledChunk& c) { return c.num_tokens == 0; }),
                   out.chunks.end());
  out.num_batched_tokens = config_.max_num_batched_tokens - budget;
  return out;
}

namespace {

template <typename Requests>
std::string LoraNamesOf(const Requests& requests) {
  std::set<std::string> names;
  for (const Request* r : requests) {
    if (!r->lora_name.empty()) names.insert(r->lora_name);
  }
  return absl::StrJoin(names, ",");
}

}  // namespace

std::string Scheduler::RunningLoraNames() const { return LoraNamesOf(running_); }
std::string Scheduler::WaitingLoraNames() const { return LoraNamesOf(waiting_); }

}  // namespace rill::engine
