#include "engine/structured_output/grammar_compiler.h"

#include <exception>
#include <string_view>
#include <utility>

#include <glog/logging.h>
#include <xgrammar/xgrammar.h>

#include "absl/strings/str_cat.h"

namespace rill::engine::structured_output {
namespace {

// xgrammar's exception text without its log prefix ("[12:00:00]
// external/xgrammar/cpp/x.cc:83: ") or "Check failed: (...) is false: ", so
// clients see what is wrong and where in their constraint.
std::string CleanMessage(std::string_view what) {
  if (!what.empty() && what[0] == '[') {
    if (size_t end = what.find("] "); end != std::string_view::npos) what.remove_prefix(end + 2);
    if (size_t src = what.find(".cc:"); src != std::string_view::npos) {
      if (size_t colon = what.find(": ", src + 4); colon != std::string_view::npos) {
        what.remove_prefix(colon + 2);
      }
    }
  }
  if (what.rfind("Check failed:", 0) == 0) {
    if (size_t colon = what.find("is false: "); colon != std::string_view::npos) {
      what.remove_prefix(colon + 10);
    }
  }
  while (!what.empty() && (what.back() == '\n' || what.back() == ' ')) what.remove_suffix(1);
  return std::string(what);
}

}  // namespace

struct GrammarCompilerPool::Entry {
  Constraint constraint;
  std::string key;
  bool done = false;
  absl::StatusOr<CompiledConstraint> result = absl::UnknownError("not compiled");
  std::vector<Waiter> waiters;
};

absl::StatusOr<std::unique_ptr<GrammarCompilerPool>> GrammarCompilerPool::Create(
    const GrammarVocabulary& vocab, GrammarCompilerOptions options) {
  if (vocab.token_bytes.empty()) return absl::InvalidArgumentError("grammar vocabulary is empty");
  const int size = static_cast<int>(vocab.token_bytes.size());
  std::unique_ptr<xgrammar::TokenizerInfo> info;
  try {
    // RAW: token_bytes are already the bytes each token adds to the text.
    info = std::make_unique<xgrammar::TokenizerInfo>(vocab.token_bytes, xgrammar::VocabType::RAW,
                                                     size, vocab.stop_token_ids);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("xgrammar refused the vocabulary: ", e.what()));
  }
  return std::unique_ptr<GrammarCompilerPool>(
      new GrammarCompilerPool(std::move(info), options, size, vocab.stop_token_ids));
}

GrammarCompilerPool::GrammarCompilerPool(std::unique_ptr<xgrammar::TokenizerInfo> info,
                                         GrammarCompilerOptions options, int vocab_size,
                                         std::vector<int32_t> stop_token_ids)
    : options_(options),
      vocab_size_(vocab_size),
      stop_token_ids_(std::move(stop_token_ids)),
      info_(std::move(info)),
      // One xgrammar thread per compile (our pool runs compiles side by
      // side); caching is ours, keyed by the constraint.
      compiler_(std::make_unique<xgrammar::GrammarCompiler>(*info_, /*max_threads=*/1,
                                                            /*cache_enabled=*/false)) {
  for (int i = 0; i < std::max(1, options_.num_threads); ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
  }
  timeout_thread_ = std::thread([this] { TimeoutLoop(); });
}

GrammarCompilerPool::~GrammarCompilerPool() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  for (std::thread& t : workers_) t.join();
  timeout_thread_.join();
  std::vector<Waiter> left;
  for (auto& [key, entry] : cache_) {
    for (Waiter& w : entry->waiters) left.push_back(std::move(w));
    entry->waiters.clear();
  }
  for (Waiter& w : left) w.done(absl::CancelledError("the grammar compiler stopped"));
}

int64_t GrammarCompilerPool::num_compiled() const {
  absl::MutexLock lock(&mu_);
  return num_compiled_;
}

void GrammarCompilerPool::Compile(const Constraint& constraint, CompileCallback done) {
  if (absl::Status s = ValidateConstraint(constraint, options_.limits); !s.ok()) {
    done(s);
    return;
  }
  std::string key = constraint.CacheKey();
  absl::StatusOr<CompiledConstraint> cached;
  {
    absl::MutexLock lock(&mu_);
    if (stop_) {
      cached = absl::CancelledError("the grammar compiler stopped");
    } else {
      std::shared_ptr<Entry>& entry = cache_[key];
      if (entry == nullptr) {
        entry = std::make_shared<Entry>();
        entry->constraint = constraint;
        entry->key = key;
        queue_.push_back(entry);
      }
      if (!entry->done) {
        entry->waiters.push_back({absl::Now() + options_.timeout, std::move(done)});
        ++waiters_added_;
        return;
      }
      cached = entry->result;
    }
  }
  done(std::move(cached));
}

absl::StatusOr<CompiledConstraint> GrammarCompilerPool::RunCompile(const Constraint& c) {
  const char* name = ConstraintKindName(c.kind);
  try {
    xgrammar::CompiledGrammar g = [&] {
      switch (c.kind) {
        case ConstraintKind::kJsonSchema:
          // Compact JSON (no free whitespace), as vLLM's disable_any_whitespace:
          // small models otherwise spend their tokens on blanks.
          return compiler_->CompileJSONSchema(c.text, /*any_whitespace=*/false);
        case ConstraintKind::kJsonObject:
          return compiler_->CompileBuiltinJSONGrammar();
        case ConstraintKind::kRegex:
          return compiler_->CompileRegex(c.text);
        case ConstraintKind::kGrammar:
          return compiler_->CompileGrammar(c.text, "root");
        case ConstraintKind::kChoice:
          return compiler_->CompileGrammar(ChoiceGrammar(c.choices), "root");
        case ConstraintKind::kStructuralTag:
          return compiler_->CompileStructuralTag(c.text);
        case ConstraintKind::kNone:
          break;
      }
      throw std::invalid_argument("no constraint");
    }();
    return std::make_shared<const xgrammar::CompiledGrammar>(std::move(g));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", CleanMessage(e.what())));
  }
}

void GrammarCompilerPool::WorkerLoop() {
  while (true) {
    std::shared_ptr<Entry> entry;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (stop_) return;
      entry = std::move(queue_.front());
      queue_.pop_front();
    }
    const absl::Time start = absl::Now();
    absl::StatusOr<CompiledConstraint> result = RunCompile(entry->constraint);
    VLOG(1) << ConstraintKindName(entry->constraint.kind) << " compiled in "
            << absl::Now() - start << ": " << result.status();
    std::vector<Waiter> waiters;
    {
      absl::MutexLock lock(&mu_);
      ++num_compiled_;
      entry->done = true;
      entry->result = result;
      waiters.swap(entry->waiters);
      cache_order_.push_back(entry->key);
      while (static_cast<int>(cache_order_.size()) > std::max(1, options_.max_cached)) {
        cache_.erase(cache_order_.front());
        cache_order_.pop_front();
      }
    }
    for (Waiter& w : waiters) w.done(result);
  }
}

void GrammarCompilerPool::TimeoutLoop() {
  absl::MutexLock lock(&mu_);
  while (!stop_) {
    // Sleeps until the earliest deadline, a new waiter (whose deadline may be
    // earlier) or stop, so a wait ends at its timeout, not up to a tick later.
    absl::Time next = absl::Now() + absl::Milliseconds(100);
    for (const auto& [key, entry] : cache_) {
      for (const Waiter& w : entry->waiters) next = std::min(next, w.deadline);
    }
    const uint64_t seen = waiters_added_;
    auto woken = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stop_ || waiters_added_ != seen;
    };
    mu_.AwaitWithDeadline(absl::Condition(&woken), next);
    if (stop_) return;
    const absl::Time now = absl::Now();
    std::vector<std::pair<ConstraintKind, CompileCallback>> expired;
    for (auto& [key, entry] : cache_) {
      std::vector<Waiter>& ws = entry->waiters;
      for (auto it = ws.begin(); it != ws.end();) {
        if (it->deadline <= now) {
          expired.emplace_back(entry->constraint.kind, std::move(it->done));
          it = ws.erase(it);
        } else {
          ++it;
        }
      }
    }
    if (expired.empty()) continue;
    mu_.Unlock();
    for (auto& [kind, done] : expired) {
      done(absl::InvalidArgumentError(
          absl::StrCat(ConstraintKindName(kind), ": compiling took longer than "
                       "structured_output_compile_timeout=",
                       absl::FormatDuration(options_.timeout))));
    }
    mu_.Lock();
  }
}

}  // namespace rill::engine::structured_output
