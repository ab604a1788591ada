// Embedding throughput of the in-process engine: `batch` Encode requests of
// `tokens` tokens each are submitted at once (EncodeAsync), so the loop runs
// them as one batched model call; embeddings/s = requests / wall time, best
// and median over `reps` rounds after one warm-up round. Token ids are
// random vocabulary ids (BERT: wrapped in [CLS] ... [SEP]), seeded.
//   bazel run -c opt //bench/embed_bench -- --model=$HOME/.cache/rill/models/all-MiniLM-L6-v2
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <glog/logging.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "base/model_dir.h"
#include "engine/async_llm_engine.h"
#include "engine/engine_factory.h"

ABSL_FLAG(std::string, model, "", "Model: HF dir / .gguf / default (default: all-MiniLM-L6-v2).");
ABSL_FLAG(int, batch, 64, "Encode requests per round (all in flight together).");
ABSL_FLAG(int, tokens, 64, "Tokens per request (special tokens included).");
ABSL_FLAG(int, reps, 5, "Timed rounds.");
ABSL_FLAG(int, threads, 0, "Engine threads (0 = all cores).");
ABSL_FLAG(int, seed, 1, "Token id seed.");

namespace {

// Seconds to embed every prompt with all requests in flight at once.
double Round(rill::engine::AsyncLLMEngine* engine, const std::vector<std::vector<int32_t>>& prompts,
             int round) {
  struct Progress {
    int done = 0, failed = 0, n = 0;
    bool Done() const { return done == n; }
  };
  absl::Mutex mu;
  Progress st;
  st.n = static_cast<int>(prompts.size());
  const absl::Time start = absl::Now();
  for (size_t i = 0; i < prompts.size(); ++i) {
    absl::Status s = engine->EncodeAsync(
        prompts[i], {}, absl::StrCat("r", round, "-", i),
        [&](absl::StatusOr<rill::engine::EmbeddingOutput> r) {
          absl::MutexLock l(&mu);
          if (!r.ok()) {
            LOG(ERROR) << r.status();
            ++st.failed;
          }
          ++st.done;
        });
    CHECK(s.ok()) << s;
  }
  absl::MutexLock l(&mu);
  mu.Await(absl::Condition(&st, &Progress::Done));
  CHECK_EQ(st.failed, 0);
  return absl::ToDoubleSeconds(absl::Now() - start);
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  google::InitGoogleLogging(argv[0]);
  rill::engine::EngineArgs args;
  args.model = absl::GetFlag(FLAGS_model).empty() ? rill::base::DefaultEmbedModelPath()
                                                   : absl::GetFlag(FLAGS_model);
  args.threads = absl::GetFlag(FLAGS_threads);
  args.max_num_seqs = std::max(64, absl::GetFlag(FLAGS_batch));
  auto engine = rill::engine::CreateAsyncLLMEngine(args);
  if (!engine.ok()) {
    std::fprintf(stderr, "cannot load %s: %s\n", args.model.c_str(),
                 engine.status().ToString().c_str());
    return 1;
  }
  const rill::worker::loader::ModelConfig& cfg = (*engine)->GetModelConfig();
  const bool bert = cfg.architecture == "bert";
  std::mt19937 rng(absl::GetFlag(FLAGS_seed));
  // BERT: avoid the special ids at the start of the vocabulary.
  std::uniform_int_distribution<int32_t> id(bert ? 1000 : 0, static_cast<int32_t>(cfg.vocab_size) - 1);
  std::vector<std::vector<int32_t>> prompts(absl::GetFlag(FLAGS_batch));
  for (auto& p : prompts) {
    for (int t = 0; t < absl::GetFlag(FLAGS_tokens); ++t) p.push_back(id(rng));
    if (bert) {
      p.front() = 101;  // [CLS]
      p.back() = 102;   // [SEP]
    }
  }
  Round(engine->get(), prompts, -1);  // Warm-up: scratch buffers, page faults.
  std::vector<double> secs;
  for (int r = 0; r < absl::GetFlag(FLAGS_reps); ++r) secs.push_back(Round(engine->get(), prompts, r));
  std::sort(secs.begin(), secs.end());
  const double n = static_cast<double>(prompts.size());
  std::printf("model %s (%s), batch %zu x %d tokens, %d threads: best %.1f embeddings/s, "
              "median %.1f embeddings/s (%.1f ms per batch)\n",
              args.model.c_str(), cfg.architecture.c_str(), prompts.size(),
              absl::GetFlag(FLAGS_tokens), (*engine)->GetEngineConfig().parallel.threads,
              n / secs.front(), n / secs[secs.size() / 2], 1e3 * secs[secs.size() / 2]);
  return 0;
}
