// Compiles constraints into xgrammar grammars on its own threads, never on the
// engine loop, with a cache keyed by the constraint (kind + text) for this
// engine's one vocabulary. Thread-safe: any thread may call Compile.
#ifndef RILL_ENGINE_STRUCTURED_OUTPUT_GRAMMAR_COMPILER_H_
#define RILL_ENGINE_STRUCTURED_OUTPUT_GRAMMAR_COMPILER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/structured_output/constraint.h"

namespace xgrammar {
class CompiledGrammar;
class GrammarCompiler;
class TokenizerInfo;
}  // namespace xgrammar

namespace rill::engine::structured_output {

// The model's vocabulary as grammars see it: each id's bytes as it appears in
// output text ("" for control tokens, which no grammar produces), padded to
// the logits width, and the ids that end generation (allowed only where the
// grammar accepts).
struct GrammarVocabulary {
  std::vector<std::string> token_bytes;
  std::vector<int32_t> stop_token_ids;
};

struct GrammarCompilerOptions {
  int num_threads = 1;  // Compile threads (each compile runs on one).
  absl::Duration timeout = absl::Seconds(10);
  ConstraintLimits limits;
  int max_cached = 256;  // Compiled grammars kept; the oldest go first.
};

// A compiled constraint, shared by every request (and sample) that uses it.
using CompiledConstraint = std::shared_ptr<const xgrammar::CompiledGrammar>;
using CompileCallback = std::function<void(absl::StatusOr<CompiledConstraint>)>;

class GrammarCompilerPool {
 public:
  // Builds the vocabulary's xgrammar TokenizerInfo once (InvalidArgument if
  // xgrammar refuses it).
  static absl::StatusOr<std::unique_ptr<GrammarCompilerPool>> Create(
      const GrammarVocabulary& vocab, GrammarCompilerOptions options);
  ~GrammarCompilerPool();  // Joins the threads; pending callbacks get Cancelled.

  // Calls `done` exactly once: at once (on this thread) for a cached result or
  // a limit error, else from a compiler thread when the compile ends, or
  // from the timeout thread with InvalidArgument naming
  // structured_output_compile_timeout when it takes longer. A failed compile
  // is InvalidArgument with xgrammar's message (position included).
  void Compile(const Constraint& constraint, CompileCallback done);

  int vocab_size() const { return vocab_size_; }
  const std::vector<int32_t>& stop_token_ids() const { return stop_token_ids_; }
  int64_t num_compiled() const;  // Compiles run (not cache hits); for tests and benchmarks.

 private:
  struct Entry;
  struct Waiter {
    absl::Time deadline;
    CompileCallback done;
  };
  GrammarCompilerPool(std::unique_ptr<xgrammar::TokenizerInfo> info, GrammarCompilerOptions options,
                      int vocab_size, std::vector<int32_t> stop_token_ids);
  void WorkerLoop();
  void TimeoutLoop();
  absl::StatusOr<CompiledConstraint> RunCompile(const Constraint& constraint);

  const GrammarCompilerOptions options_;
  const int vocab_size_;
  const std::vector<int32_t> stop_token_ids_;
  std::unique_ptr<xgrammar::TokenizerInfo> info_;
  std::unique_ptr<xgrammar::GrammarCompiler> compiler_;

  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Bumped when a waiter is added, so the timeout thread re-reads the
  // earliest deadline at once instead of on its next 100 ms tick.
  uint64_t waiters_added_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, std::shared_ptr<Entry>> cache_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> cache_order_ ABSL_GUARDED_BY(mu_);  // Finished keys, oldest first.
  std::deque<std::shared_ptr<Entry>> queue_ ABSL_GUARDED_BY(mu_);
  int64_t num_compiled_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> workers_;
  std::thread timeout_thread_;
};

}  // namespace rill::engine::structured_output

#endif  // RILL_ENGINE_STRUCTURED_OUTPUT_GRAMMAR_COMPILER_H_
