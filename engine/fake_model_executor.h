// Test executor whose next token is a deterministic function of the whole
// context as read back through the block tables from its own token-slot
// "KV cache", plus the position. Wrong block tables, stale prefix-cache
// blocks or unwritten slots therefore change (or fail) the output, and tests
// can predict every output with NextToken.
#ifndef RILL_ENGINE_FAKE_MODEL_EXECUTOR_H_
#define RILL_ENGINE_FAKE_MODEL_EXECUTOR_H_

#include <atomic>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "engine/model_executor.h"

namespace rill::engine {

class FakeModelExecutor : public ModelExecutor {
 public:
  struct Options {
    int num_blocks = 64;
    int block_size = 4;
    int vocab_size = 64;
    int64_t max_model_len = 256;
    int32_t eos_token_id = 0;  // NextToken never returns it unless eos_every > 0.
    // If > 0, NextToken returns eos when (hash % eos_every) == 0.
    int eos_every = 0;
    absl::Duration step_delay = absl::ZeroDuration();  // Sleep per Execute.
    // Sleep per token past each sequence's first: what verifying a draft
    // token (or a prefill token) costs (speculation pricing tests).
    absl::Duration extra_token_delay = absl::ZeroDuration();
    // If > 0, NextToken hashes only the last context_window tokens (not the
    // position), so greedy outputs fall into cycles that n-gram drafts
    // predict (speculative decoding tests). The whole context is still read
    // back from the cache and must be written.
    int context_window = 0;
    // What it reports as its tensor parallelism and each step's collective
    // time (metrics tests; it runs no collectives).
    int tensor_parallel_size = 1;
    absl::Duration collective_per_step = absl::ZeroDuration();
  };

  explicit FakeModelExecutor(const Options& options);

  // The token the fake model predicts after `context` (position = size - 1).
  int32_t NextToken(absl::Span<const int32_t> context) const;
  // Greedy continuation of `prompt` for `n` tokens, ignoring EOS.
  std::vector<int32_t> Generate(absl::Span<const int32_t> prompt, int n) const;

  absl::Status Execute(const worker::ForwardBatch& batch, worker::ForwardOutput* out) override;
  int num_blocks() const override { return options_.num_blocks; }
  int block_size() const override { return options_.block_size; }
  const worker::loader::ModelConfig& model_config() const override { return config_; }
  int tensor_parallel_size() const override { return options_.tensor_parallel_size; }
  absl::Duration last_collective_time() const override { return options_.collective_per_step; }
  absl::Status CheckHealth() override;

  // Test hooks.
  void SetFailure(absl::Status status);  // Execute fails with it from now on.
  int64_t num_steps() const { return num_steps_.load(); }
  int64_t max_batch_tokens() const { return max_batch_tokens_.load(); }
  // Token counts of every sequence chunk of every step, in order.
  std::vector<std::vector<int>> chunk_sizes() const;

 private:
  Options options_;
  worker::loader::ModelConfig config_;
  std::vector<int32_t> slots_;  // num_blocks * block_size token ids, -1 = unwritten.
  std::atomic<int64_t> num_steps_{0};
  std::atomic<int64_t> max_batch_tokens_{0};
  mutable absl::Mutex mu_;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<int>> chunk_sizes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rill::engine

#endif  // RILL_ENGINE_FAKE_MODEL_EXECUTOR_H_
