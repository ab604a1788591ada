// Test-only: what the EngineCore speculation tests (n-gram and draft-model
// drafting) share: configs, a driver that steps a core to completion while
// checking that no running request holds blocks past its tokens, a Markov
// model whose exact next-token distribution is known, and the chi-square
// statistic of sampled transitions against it.
#ifndef RILL_ENGINE_SPEC_DECODE_SPEC_DECODE_TEST_UTIL_H_
#define RILL_ENGINE_SPEC_DECODE_SPEC_DECODE_TEST_UTIL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine_core.h"
#include "engine/fake_model_executor.h"
#include "engine/model_executor.h"
#include "engine/spec_decode/spec_decode_config.h"

namespace rill::engine::spec_decode::testing {

// n-gram drafting of up to k tokens (n = 1..3), speculating at any batch size.
SpecDecodeConfig NgramSpec(int k);
// Draft-model drafting of up to k tokens (the executor's draft model).
SpecDecodeConfig DraftModelSpec(int k);

SchedulerConfig Sched(int budget = 64);
SamplingParams Greedy(int max_tokens);
// n token ids in [1, vocab), varied by salt.
std::vector<int32_t> Prompt(int n, int32_t salt, int vocab);
std::unique_ptr<Request> MakeRequest(const std::string& id, std::vector<int32_t> prompt,
                                     const SamplingParams& params);
// A fake model of 16 tokens, blocks of 4, whose greedy outputs cycle (its
// next token depends on the last 2 tokens), so n-gram drafts get accepted.
FakeModelExecutor::Options Cyclic(int num_blocks);

// Drives one EngineCore to completion, checking after every step that no
// running request holds blocks past its tokens (rejected drafts rolled back).
struct Driver {
  std::map<std::string, std::vector<int32_t>> tokens;
  std::map<std::string, RequestState> state;
  int preemptions = 0;

  void Collect(const std::vector<EngineCoreOutput>& outs);
  void Step(EngineCore* core);
  void ToCompletion(EngineCore* core);
};

// A model whose next-token distribution depends on the previous token only,
// through a fixed transition matrix: the exact distribution every sampled
// token must follow. It ignores the KV cache.
class MarkovExecutor : public ModelExecutor {
 public:
  static constexpr int kVocab = 6;

  // `matrix_seed` draws the transition matrix: another seed, another model
  // (a draft model that disagrees with the target).
  explicit MarkovExecutor(uint32_t matrix_seed = 7);
  double P(int a, int b) const { return p_[a][b]; }

  absl::Status Execute(const worker::ForwardBatch& batch, worker::ForwardOutput* out) override;
  int num_blocks() const override { return 512; }
  int block_size() const override { return 4; }
  const worker::loader::ModelConfig& model_config() const override { return config_; }

 private:
  worker::loader::ModelConfig config_;
  double p_[kVocab][kVocab];
};

// Outputs of `requests` requests (prompt {1,2,3,1,2,3,4,1,2}, seeds seed0 +
// i) sampled from a MarkovExecutor with `spec`, in batches of 16; with
// `draft`, that is the executor's draft model. `accepted`: the accepted
// draft tokens (may be null).
std::map<std::string, std::vector<int32_t>> RunMarkov(const SpecDecodeConfig& spec,
                                                      const SamplingParams& base, int requests,
                                                      uint64_t seed0, int64_t* accepted,
                                                      std::unique_ptr<ModelExecutor> draft = nullptr);

// Pearson chi-square of the transitions (a -> b) in `outs` (each output
// following the prompt's last token 2) against MarkovExecutor's matrix:
// kVocab * (kVocab - 1) = 30 degrees of freedom. `total`: transitions counted.
double MarkovChiSquare(const std::map<std::string, std::vector<int32_t>>& outs, int64_t* total);

// Six greedy requests (8-token prompts, 40 tokens) on `core` over `model`,
// driven to completion while r1, then r4, are aborted right after steps
// that accepted drafts; `check` runs after every step and abort. Expects
// both aborts, a preemption, accepted drafts and the model's outputs for
// the others.
void RunWithAbortsAfterAcceptedDrafts(const FakeModelExecutor& model, EngineCore* core,
                                      const std::function<void()>& check = [] {});

// Seeded sampling with `p` on the Markov model (32 requests): outputs with
// `spec` (and `draft`) equal those without speculation, draw for draw, and
// draft tokens were accepted.
void ExpectSeededSamplingUnchanged(const SamplingParams& p, const SpecDecodeConfig& spec,
                                   std::unique_ptr<ModelExecutor> draft = nullptr);
// Temperature 1 on the Markov model, 320 requests x 64 tokens (seeds from
// the suite's stream 0): more than 200 draft tokens accepted, and the
// chi-square of the transitions below 67.6 (P = 1e-4 under the model).
// Accepting drafts too often, or resampling a rejected position from p
// instead of p without the draft token, skews it far past that.
// With min_p > 0 (small enough to filter nothing), draft-model proposals
// stay greedy; without, they are sampled (EngineCore::VerifySampledDraft).
void ExpectTemperatureOneMatchesMarkov(const SpecDecodeConfig& spec,
                                       std::unique_ptr<ModelExecutor> draft = nullptr,
                                       float min_p = 0.0f);

}  // namespace rill::engine::spec_decode::testing

#endif  // RILL_ENGINE_SPEC_DECODE_SPEC_DECODE_TEST_UTIL_H_
