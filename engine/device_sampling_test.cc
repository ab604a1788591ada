// Device sampling through the engine on a CPU machine: an executor that
// "samples on its device" with the CUDA sampler's CPU reference (which
// cuda_kernel_check holds the GPU kernels to) must give every request the
// tokens and logprobs of the host sampler, seeds included; rows the device
// cannot sample as the host would stay on the host.
#include "engine/device_sampling.h"

#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "engine/async_engine.h"
#include "engine/engine_core.h"
#include "engine/fake_model_executor.h"
#include "engine/logits_processor.h"
#include "gtest/gtest.h"
#include "kernels/cuda/reference.h"
#include "tests/util/test_seed.h"
#include "worker/models/cuda/sampling_arrays.h"

namespace rill::engine {
namespace {

namespace kc = ::rill::kernels::cuda;

// FakeModelExecutor's logits, sampled "on the device" by the CUDA reference
// for the sequences the engine marked.
class ReferenceSamplingExecutor : public ModelExecutor {
 public:
  explicit ReferenceSamplingExecutor(const FakeModelExecutor::Options& o) : inner_(o) {}

  absl::Status Execute(const worker::ForwardBatch& batch, worker::ForwardOutput* out) override {
    if (absl::Status s = inner_.Execute(batch, out); !s.ok()) return s;
    out->sampled.assign(batch.sequences.size(), {});
    const int vocab = static_cast<int>(inner_.model_config().vocab_size);
    for (size_t i = 0; i < batch.sequences.size(); ++i) {
      const std::optional<worker::DeviceSampling>& d = batch.sequences[i].device_sampling;
      if (!d.has_value()) continue;
      EXPECT_FALSE(batch.sequences[i].all_logits);
      std::vector<float>& row = out->logits[i];
      worker::ApplyLogitEdits(d->edits, row.data(), vocab);
      // What CudaLlama hands the kernels, to their CPU reference.
      out->sampled[i].token = kc::ref::Sample(row.data(), worker::KernelParams(*d), vocab);
      out->sampled[i].logprob = kc::ref::Logprob(row.data(), out->sampled[i].token, vocab);
      out->sampled[i].top = kc::ref::TopLogprobs(row.data(), d->top_logprobs, vocab);
      row.clear();  // only the token crosses back
      ++device_rows_;
    }
    return absl::OkStatus();
  }
  bool samples_on_device() const override { return true; }
  int num_blocks() const override { return inner_.num_blocks(); }
  int block_size() const override { return inner_.block_size(); }
  const worker::loader::ModelConfig& model_config() const override {
    return inner_.model_config();
  }
  int64_t device_rows() const { return device_rows_; }

 private:
  FakeModelExecutor inner_;
  int64_t device_rows_ = 0;
};

FakeModelExecutor::Options Fake() {
  FakeModelExecutor::Options o;
  o.num_blocks = 256;
  o.block_size = 4;
  o.vocab_size = 64;
  return o;
}

SchedulerConfig Sched() {
  SchedulerConfig c;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 40;
  c.max_model_len = 256;
  return c;
}

struct Result {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<TopLogprobs> top;
};

std::map<std::string, Result> RunEngine(ModelExecutor* executor,
                                  const std::map<std::string, SamplingParams>& requests,
                                  EngineCoreStats* stats) {
  EngineCore core(executor, Sched(), true);
  int n = 0;
  for (const auto& [id, params] : requests) {
    std::vector<int32_t> prompt;
    for (int i = 0; i < 5 + 3 * n; ++i) prompt.push_back(1 + (i * 7 + n) % 60);
    ++n;
    EXPECT_TRUE(core.AddRequest(std::make_unique<Request>(id, prompt, params)).ok());
  }
  std::map<std::string, Result> out;
  for (int step = 0; step < 1000 && core.HasUnfinished(); ++step) {
    absl::StatusOr<std::vector<EngineCoreOutput>> outs = core.Step();
    EXPECT_TRUE(outs.ok()) << outs.status();
    if (!outs.ok()) break;
    for (const EngineCoreOutput& o : *outs) {
      Result& r = out[o.request_id];
      r.tokens.insert(r.tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      r.logprobs.insert(r.logprobs.end(), o.new_logprobs.begin(), o.new_logprobs.end());
      r.top.insert(r.top.end(), o.new_top_logprobs.begin(), o.new_top_logprobs.end());
    }
  }
  EXPECT_FALSE(core.HasUnfinished());
  *stats = core.stats();
  return out;
}

SamplingParams Params(float temperature, uint64_t seed) {
  SamplingParams p;
  p.temperature = temperature;
  p.seed = seed;
  p.max_tokens = 24;
  p.ignore_eos = true;
  return p;
}

TEST(DeviceSamplingTest, EngineGivesTheHostSamplersTokensAndLogprobs) {
  std::mt19937_64 rng = tests::util::TestRng(1);
  std::map<std::string, SamplingParams> requests;
  requests["greedy"] = Params(0.0f, rng());
  requests["hot"] = Params(2.5f, rng());
  requests["warm_min_p"] = Params(1.5f, rng());
  requests["warm_min_p"].min_p = 0.02f;
  SamplingParams pen = Params(2.0f, rng());
  pen.repetition_penalty = 1.3f;
  pen.presence_penalty = 0.4f;
  pen.frequency_penalty = 0.3f;
  pen.logit_bias = {{5, 3.0f}, {6, -100.0f}};
  requests["penalties"] = pen;
  SamplingParams min_tokens = Params(2.0f, rng());
  min_tokens.ignore_eos = false;
  min_tokens.min_tokens = 10;
  min_tokens.stop_token_ids = {7, 8};
  requests["min_tokens"] = min_tokens;
  requests["top_k"] = Params(2.0f, rng());  // descending draw
  requests["top_k"].top_k = 5;
  requests["top_k_p"] = Params(2.0f, rng());
  requests["top_k_p"].top_k = 20;
  requests["top_k_p"].top_p = 0.7f;
  requests["top_k_p"].min_p = 0.01f;
  requests["top_logprobs"] = Params(2.0f, rng());
  requests["top_logprobs"].logprobs = 3;
  // top_p without top_k: the nucleus drawn in id order on both sides.
  requests["top_p"] = Params(2.0f, rng());
  requests["top_p"].top_p = 0.8f;
  requests["top_p_min_p"] = Params(1.2f, rng());
  requests["top_p_min_p"].top_p = 0.5f;
  requests["top_p_min_p"].min_p = 0.05f;
  // Host-sampled: prompt logprobs.
  requests["prompt_logprobs"] = Params(2.0f, rng());
  requests["prompt_logprobs"].prompt_logprobs = 1;

  FakeModelExecutor host(Fake());
  EngineCoreStats host_stats, device_stats;
  const std::map<std::string, Result> want = RunEngine(&host, requests, &host_stats);
  ReferenceSamplingExecutor device(Fake());
  const std::map<std::string, Result> got = RunEngine(&device, requests, &device_stats);

  ASSERT_EQ(got.size(), requests.size());
  for (const auto& [id, w] : want) {
    const Result& g = got.at(id);
    EXPECT_EQ(g.tokens, w.tokens) << id;
    ASSERT_EQ(g.logprobs.size(), w.logprobs.size()) << id;
    for (size_t i = 0; i < w.logprobs.size(); ++i) {
      EXPECT_NEAR(g.logprobs[i], w.logprobs[i], 1e-4) << id << " token " << i;
    }
    ASSERT_EQ(g.top.size(), w.top.size()) << id;
    for (size_t i = 0; i < w.top.size(); ++i) {
      ASSERT_EQ(g.top[i].size(), w.top[i].size()) << id << " token " << i;
      for (size_t j = 0; j < w.top[i].size(); ++j) {
        EXPECT_EQ(g.top[i][j].first, w.top[i][j].first) << id << " token " << i << " rank " << j;
        EXPECT_NEAR(g.top[i][j].second, w.top[i][j].second, 1e-4) << id << " token " << i;
      }
    }
  }
  // The seeded requests really sampled: not all greedy.
  EXPECT_NE(want.at("hot").tokens, want.at("greedy").tokens);
  EXPECT_EQ(want.at("top_logprobs").top.size(), want.at("top_logprobs").tokens.size());
  // Every request's tokens on the device except the prompt_logprobs
  // request's first (the prompt's chunk returns all its logits). (min_tokens
  // may end early: it may sample EOS.)
  auto tokens = [&](std::initializer_list<const char*> ids) {
    int64_t n = 0;
    for (const char* id : ids) n += static_cast<int64_t>(want.at(id).tokens.size());
    return n;
  };
  EXPECT_EQ(host_stats.device_sampled_rows + host_stats.host_sampled_rows, 0);
  EXPECT_EQ(device_stats.device_sampled_rows,
            tokens({"greedy", "hot", "warm_min_p", "penalties", "min_tokens", "top_k", "top_k_p",
                    "top_logprobs", "top_p", "top_p_min_p", "prompt_logprobs"}) -
                1);
  EXPECT_EQ(device.device_rows(), device_stats.device_sampled_rows);
  EXPECT_EQ(device_stats.host_sampled_rows, 1);
}

std::unique_ptr<Request> MakeRequest(SamplingParams p) {
  return std::make_unique<Request>("r", std::vector<int32_t>{1, 2, 3, 2}, p);
}

TEST(DeviceSamplingTest, RowsTheDeviceCannotSampleAsTheHostStayOnTheHost) {
  EXPECT_EQ(WhyHostSamples(*MakeRequest(Params(1.0f, 1)), false, false),
            HostSamplingReason::kNone);
  SamplingParams greedy_top_k = Params(0.0f, 1);
  greedy_top_k.top_k = 3;  // greedy ignores it
  EXPECT_EQ(WhyHostSamples(*MakeRequest(greedy_top_k), false, false),
            HostSamplingReason::kNone);
  SamplingParams top_k = Params(1.0f, 1);
  top_k.top_k = 3;
  top_k.top_p = 0.5f;  // with top_k the host draws in descending order, as the device can
  EXPECT_EQ(WhyHostSamples(*MakeRequest(top_k), false, false), HostSamplingReason::kNone);
  EXPECT_TRUE(DeviceSamplingFor(MakeRequest(top_k).get(), {}, 64).descending_draw);
  SamplingParams top_p = Params(1.0f, 1);
  top_p.top_p = 0.5f;  // the nucleus in id order, as the device draws it
  EXPECT_EQ(WhyHostSamples(*MakeRequest(top_p), false, false), HostSamplingReason::kNone);
  EXPECT_FALSE(DeviceSamplingFor(MakeRequest(top_p).get(), {}, 64).descending_draw);
  top_p.top_k = 64;  // the whole vocabulary: no top_k filter, so id order too
  EXPECT_FALSE(DeviceSamplingFor(MakeRequest(top_p).get(), {}, 64).descending_draw);
  SamplingParams logprobs = Params(0.0f, 1);
  logprobs.logprobs = 5;
  EXPECT_EQ(WhyHostSamples(*MakeRequest(logprobs), false, false), HostSamplingReason::kNone);
  EXPECT_EQ(DeviceSamplingFor(MakeRequest(logprobs).get(), {}, 64).top_logprobs, 5);
  EXPECT_EQ(WhyHostSamples(*MakeRequest(Params(0.0f, 1)), true, true),
            HostSamplingReason::kDraft);
  EXPECT_EQ(WhyHostSamples(*MakeRequest(Params(0.0f, 1)), false, true),
            HostSamplingReason::kPromptLogprobs);
  SamplingParams json = Params(0.0f, 1);
  json.constraint.kind = structured_output::ConstraintKind::kJsonObject;
  EXPECT_EQ(WhyHostSamples(*MakeRequest(json), false, false), HostSamplingReason::kGrammar);
  EXPECT_STREQ(HostSamplingReasonName(HostSamplingReason::kGrammar), "grammar");
}

TEST(DeviceSamplingTest, SpecKeepsTheRequestsGeneratorInStepWithTheHostSampler) {
  SamplingParams p = Params(0.9f, 1234);
  p.repetition_penalty = 1.2f;
  p.logit_bias = {{9, 1.5f}, {100, 2.0f}};  // 100: outside the vocabulary, dropped
  p.min_tokens = 3;
  p.ignore_eos = false;
  p.stop_token_ids = {4};
  std::unique_ptr<Request> device = MakeRequest(p), host = MakeRequest(p);
  const std::vector<int32_t> eos = {0};
  std::vector<float> logits(64, 0.25f);
  for (int step = 0; step < 3; ++step) {
    const worker::DeviceSampling d = DeviceSamplingFor(device.get(), eos, 64);
    host->sampler.Sample(logits.data(), 64);
    EXPECT_GE(d.uniform, 0.0);
    EXPECT_LT(d.uniform, 1.0);
    EXPECT_EQ(d.temperature, 0.9f);
    if (step == 0) {
      // Tokens 0 (EOS, masked), 1, 2, 3 (repetition), 4 (stop, masked), 9 (bias).
      ASSERT_EQ(d.edits.size(), 6u);
      EXPECT_TRUE(d.edits[0].mask);
      EXPECT_EQ(d.edits[1].repetition, 1.2f);
      EXPECT_TRUE(d.edits[4].mask);
      EXPECT_EQ(d.edits[5].token, 9);
      EXPECT_EQ(d.edits[5].add, 1.5f);
    }
  }
  // Both generators advanced by exactly one draw per token.
  EXPECT_EQ(device->sampler.Uniform(), host->sampler.Uniform());
  // Greedy rows take no draw, as the host sampler's greedy path takes none.
  std::unique_ptr<Request> greedy = MakeRequest(Params(0.0f, 7)), twin = MakeRequest(Params(0.0f, 7));
  DeviceSamplingFor(greedy.get(), eos, 64);
  EXPECT_EQ(greedy->sampler.Uniform(), twin->sampler.Uniform());
}

TEST(DeviceSamplingTest, ProcessLogitsIsTheEditsApplied) {
  SamplingParams p = Params(1.0f, 1);
  p.repetition_penalty = 1.5f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  p.logit_bias = {{2, 1.0f}, {10, -1.0f}};
  p.min_tokens = 5;
  p.ignore_eos = false;
  p.stop_token_ids = {11};
  std::unique_ptr<Request> r = MakeRequest(p);
  r->output_token_ids = {2, 2, 5};
  std::vector<float> logits(16);
  for (int i = 0; i < 16; ++i) logits[i] = (i % 3 == 0 ? -1.0f : 1.0f) * (0.5f + i);
  std::vector<float> want = logits;
  ProcessLogits(*r, {0}, want.data(), 16);
  // By hand: the documented order per token.
  std::vector<float> hand = logits;
  for (int t : {1, 2, 3, 5}) hand[t] = hand[t] > 0 ? hand[t] / 1.5f : hand[t] * 1.5f;
  hand[2] -= 0.5f + 0.25f * 2;
  hand[5] -= 0.5f + 0.25f * 1;
  hand[2] += 1.0f;
  hand[10] += -1.0f;
  hand[0] = -std::numeric_limits<float>::infinity();
  hand[11] = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(want, hand);
}

// rill:device_sampling_rows_total through a real AsyncEngine: a request the
// device can sample counts its tokens under where="device"; one with prompt
// logprobs counts its first token (the prompt's chunk returns all its
// logits) under where="host" and the others under "device".
TEST(DeviceSamplingTest, MetricsCountRowsByWhereTheyWereSampled) {
  EngineArgs args;
  args.model = "fake";
  args.max_num_batched_tokens = 40;
  args.max_num_seqs = 8;
  auto engine = AsyncEngine::Create(args, std::make_unique<ReferenceSamplingExecutor>(Fake()));
  ASSERT_TRUE(engine.ok()) << engine.status();
  SamplingParams on_device = Params(1.0f, 5);
  on_device.max_tokens = 5;
  SamplingParams on_host = Params(1.0f, 6);
  on_host.max_tokens = 3;
  on_host.prompt_logprobs = 1;
  for (const auto& [id, p] : {std::pair{"d", on_device}, std::pair{"h", on_host}}) {
    auto stream = (*engine)->Generate({3, 4, 5, 6, 7}, p, id);
    ASSERT_TRUE(stream.ok()) << stream.status();
    while ((*stream)->Next(absl::Seconds(60)).ok()) {
    }
  }
  // Counters advance after the loop's iteration: wait for both to arrive.
  auto value = [&](const std::string& where) {
    const std::string series =
        "rill:device_sampling_rows_total{model_name=\"fake\",where=\"" + where + "\"} ";
    for (absl::string_view line : absl::StrSplit((*engine)->Metrics().Exposition(), '\n')) {
      double v = 0;
      if (absl::StartsWith(line, series) && absl::SimpleAtod(line.substr(series.size()), &v)) {
        return v;
      }
    }
    return -1.0;
  };
  for (int i = 0; i < 2000 && (value("device") != 7 || value("host") != 1); ++i) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(value("device"), 7);
  EXPECT_EQ(value("host"), 1);
}

}  // namespace
}  // namespace rill::engine
