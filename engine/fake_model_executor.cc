#include "engine/fake_model_executor.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace rill::engine {
namespace {

uint64_t ContextHash(absl::Span<const int32_t> context) {
  uint64_t h = 1469598103934665603ULL;
  for (int32_t t : context) h = (h ^ static_cast<uint32_t>(t)) * 1099511628211ULL;
  return (h ^ context.size()) * 0x9e3779b97f4a7c15ULL;
}

}  // namespace

FakeModelExecutor::FakeModelExecutor(const Options& options)
    : options_(options),
      slots_(static_cast<size_t>(options.num_blocks) * options.block_size, -1) {
  config_.architecture = "fake";
  config_.vocab_size = options.vocab_size;
  config_.max_position_embeddings = options.max_model_len;
  config_.eos_token_id = options.eos_token_id;
  config_.eos_token_ids = {options.eos_token_id};
}

int32_t FakeModelExecutor::NextToken(absl::Span<const int32_t> context) const {
  const size_t window = options_.context_window;
  const uint64_t h = window > 0 && context.size() > window
                         ? ContextHash(context.subspan(context.size() - window))
                         : ContextHash(context);
  if (options_.eos_every > 0 && (h >> 32) % options_.eos_every == 0) return options_.eos_token_id;
  // Any id but eos.
  int32_t t = static_cast<int32_t>(h % (options_.vocab_size - 1));
  return t >= options_.eos_token_id ? t + 1 : t;
}

std::vector<int32_t> FakeModelExecutor::Generate(absl::Span<const int32_t> prompt, int n) const {
  std::vector<int32_t> all(prompt.begin(), prompt.end());
  for (int i = 0; i < n; ++i) all.push_back(NextToken(all));
  return std::vector<int32_t>(all.begin() + prompt.size(), all.end());
}

absl::Status FakeModelExecutor::CheckHealth() {
  absl::MutexLock lock(&mu_);
  return failure_;
}

void FakeModelExecutor::SetFailure(absl::Status status) {
  absl::MutexLock lock(&mu_);
  failure_ = std::move(status);
}

std::vector<std::vector<int>> FakeModelExecutor::chunk_sizes() const {
  absl::MutexLock lock(&mu_);
  return chunk_sizes_;
}

absl::Status FakeModelExecutor::Execute(const worker::ForwardBatch& batch,
                                        worker::ForwardOutput* out) {
  {
    absl::MutexLock lock(&mu_);
    if (!failure_.ok()) return failure_;
    std::vector<int>& sizes = chunk_sizes_.emplace_back();
    for (const auto& s : batch.sequences) sizes.push_back(static_cast<int>(s.tokens.size()));
  }
  if (options_.step_delay > absl::ZeroDuration()) absl::SleepFor(options_.step_delay);
  if (options_.extra_token_delay > absl::ZeroDuration()) {
    int64_t extra = 0;
    for (const auto& s : batch.sequences) extra += std::max<int64_t>(0, s.tokens.size() - 1);
    absl::SleepFor(options_.extra_token_delay * extra);
  }
  const int bs = options_.block_size;
  auto slot = [&](const worker::SequenceChunk& s, int64_t pos) -> int64_t {
    const int64_t b = pos / bs;
    if (b >= static_cast<int64_t>(s.block_table.size())) return -1;
    const int32_t block = s.block_table[b];
    if (block < 0 || block >= options_.num_blocks) return -1;
    return static_cast<int64_t>(block) * bs + pos % bs;
  };
  int64_t batch_tokens = 0;
  // Validate everything before writing, as the real model does.
  for (const auto& s : batch.sequences) {
    batch_tokens += s.tokens.size();
    if (s.tokens.empty()) return absl::InvalidArgumentError("empty sequence chunk");
    const int64_t end = s.start_pos + s.tokens.size();
    if (end > options_.max_model_len) return absl::InvalidArgumentError("position past context");
    for (int64_t p = 0; p < end; ++p) {
      if (slot(s, p) < 0) {
        return absl::InvalidArgumentError(absl::StrCat("block table too short for position ", p));
      }
    }
    for (int32_t t : s.tokens) {
      if (t < 0 || t >= options_.vocab_size) return absl::InvalidArgumentError("token out of range");
    }
  }
  out->logits.clear();
  for (const auto& s : batch.sequences) {
    for (size_t i = 0; i < s.tokens.size(); ++i) slots_[slot(s, s.start_pos + i)] = s.tokens[i];
    const int64_t end = s.start_pos + s.tokens.size();
    std::vector<int32_t> context(end);
    for (int64_t p = 0; p < end; ++p) {
      context[p] = slots_[slot(s, p)];
      if (context[p] < 0) return absl::InternalError(absl::StrCat("unwritten slot at ", p));
    }
    std::vector<float>& logits = out->logits.emplace_back();
    const int64_t first = s.all_logits ? s.start_pos : end - 1;
    logits.assign((end - first) * options_.vocab_size, 0.0f);
    for (int64_t p = first; p < end; ++p) {
      const int32_t next = NextToken(absl::MakeConstSpan(context.data(), p + 1));
      float* row = logits.data() + (p - first) * options_.vocab_size;
      // A little structure so logprobs and penalties have something to rank.
      for (int v = 0; v < options_.vocab_size; ++v) row[v] = -0.01f * ((v * 31 + p) % 97);
      row[next] = 8.0f;
    }
  }
  ++num_steps_;
  int64_t prev = max_batch_tokens_.load();
  while (batch_tokens > prev && !max_batch_tokens_.compare_exchange_weak(prev, batch_tokens)) {
  }
  return absl::OkStatus();
}

}  // namespace rill::engine
