// cuda_model_check: the CUDA Llama (bf16) against the CPU Llama (f32, exact
// matmul) on one checkpoint, then its decode/prefill speed against targets.
//
//   cuda_model_check [--model=PATH] [--prompts=4] [--bench_layers=30] [--nobench] [--notp]
//
// Correctness: random prompts (seeded, printed) go through both models as
// one ragged prefill batch, the last prompt split into two chunks (so the
// second chunk attends to cached context), then greedy decode steps in which
// both models are fed the CPU's argmax token, so they always see the same
// context. Every logits row is compared: relative L2 error and top-1 agreement.
// Then sampling on the GPU inside Forward against the CPU reference sampler
// (device_sampling_check.h), then tensor parallelism over NCCL (tp_check.h).
// Exit status 1 when correctness fails (benchmark MISSes do not fail it),
// 2 on setup errors, 0 when passed or when there is no CUDA device.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/model_dir.h"
#include "glog/logging.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cuda/cuda_runtime_api.h"
#include "worker/forward_batch.h"
#include "worker/kv_cache.h"
#include "worker/loader/checkpoint.h"
#include "worker/models/cuda/cuda_llama.h"
#include "worker/models/cuda/device_sampling_check.h"
#include "worker/models/cuda/logits_compare.h"
#include "worker/models/cuda/tp_check.h"
#include "worker/models/llama.h"

ABSL_FLAG(std::string, model, "",
          "GGUF file or HF directory; default "
          "$RILL_MODEL_DIR (or $HOME/.cache/rill/models)/SmolLM2-135M-Instruct.Q4_1.gguf");
ABSL_FLAG(int, prompts, 4, "random prompts compared");
ABSL_FLAG(int, prompt_tokens, 64, "tokens per prompt");
ABSL_FLAG(int, decode_steps, 32, "greedy decode steps per prompt");
ABSL_FLAG(int64_t, seed, 1234, "seed of the prompt tokens");
ABSL_FLAG(bool, bench, true, "run the speed benchmarks after the correctness check");
ABSL_FLAG(int, bench_layers, 0,
          "decoder layers the benchmark model runs (cycling the checkpoint's), so a checkpoint "
          "cut to a few layers is timed at full depth; 0: the checkpoint's");
ABSL_FLAG(int, bench_iterations, 50, "graph replays per decode batch size");
ABSL_FLAG(int, threads, 0, "CPU threads for the reference model (0: all)");
ABSL_FLAG(bool, tp, true,
          "check tensor parallelism over NCCL: one rank in a world of one against the model "
          "without it (bitwise), and two ranks on two GPUs when there are two");

namespace rill::worker {
namespace {

// Runs `batch` through both models and compares every returned row.
absl::Status RunBoth(const ForwardBatch& batch, CausalLm* cpu, PagedKvCache* cache, CudaLlama* gpu,
                     int vocab, LogitStats* stats, ForwardOutput* cpu_out) {
  ForwardOutput gpu_out;
  if (absl::Status s = cpu->Forward(batch, cache, cpu_out); !s.ok()) return s;
  if (absl::Status s = gpu->Forward(batch, &gpu_out); !s.ok()) return s;
  if (gpu_out.logits.size() != cpu_out->logits.size()) {
    return absl::InternalError("GPU and CPU returned different numbers of sequences");
  }
  for (size_t s = 0; s < cpu_out->logits.size(); ++s) {
    if (gpu_out.logits[s].size() != cpu_out->logits[s].size()) {
      return absl::InternalError(absl::StrCat("sequence ", s, ": GPU returned ",
                                              gpu_out.logits[s].size(), " logits, CPU ",
                                              cpu_out->logits[s].size()));
    }
    CompareLogits(gpu_out.logits[s], cpu_out->logits[s], vocab, stats);
  }
  return absl::OkStatus();
}

// Malformed batches must come back as InvalidArgument, not crash or run.
bool CheckRejects(CudaLlama* gpu) {
  const int vocab = static_cast<int>(gpu->config().vocab_size);
  auto make = [](std::vector<int32_t> tokens, int start, std::vector<int32_t> table) {
    ForwardBatch b;
    SequenceChunk s;
    s.tokens = std::move(tokens);
    s.start_pos = start;
    s.block_table = std::move(table);
    b.sequences.push_back(std::move(s));
    return b;
  };
  const ForwardBatch bad[] = {
      make({vocab}, 0, {0}),    // token id out of range
      make({-1}, 0, {0}),       // negative token id
      make({1, 2}, 15, {0}),    // block table too short
      make({1}, 0, {1 << 30}),  // block past the cache
      make({1}, static_cast<int>(std::min<int64_t>(gpu->config().max_position_embeddings, 1 << 30)),
           std::vector<int32_t>(1, 0)),  // position past the context
      make({}, 0, {0}),                  // empty chunk
  };
  bool ok = true;
  for (const ForwardBatch& b : bad) {
    ForwardOutput out;
    absl::Status s = gpu->Forward(b, &out);
    if (s.code() != absl::StatusCode::kInvalidArgument) {
      printf("bad batch not rejected with InvalidArgument: %s\n", s.ToString().c_str());
      ok = false;
    }
  }
  printf("rejects  %zu malformed batches with InvalidArgument: %s\n", std::size(bad),
         ok ? "PASS" : "FAIL");
  return ok;
}

// Returns whether the GPU model matches the CPU model.
absl::StatusOr<bool> CheckCorrectness(std::shared_ptr<const worker::loader::Checkpoint> ckpt,
                                      CudaLlama* gpu) {
  const worker::loader::ModelConfig& cfg = ckpt->config();
  const int vocab = static_cast<int>(cfg.vocab_size), bs = 16;
  const int P = std::max(1, absl::GetFlag(FLAGS_prompts));
  const int L = std::max(2, absl::GetFlag(FLAGS_prompt_tokens));
  const int D = std::max(0, absl::GetFlag(FLAGS_decode_steps));
  const int blocks_per_seq = (L + D + bs - 1) / bs;
  kernels::cpu::ThreadPool pool(absl::GetFlag(FLAGS_threads));
  ModelOptions mo;  // the exact path (the default plan)
  absl::StatusOr<std::unique_ptr<CausalLm>> cpu = CreateLlama(ckpt, &pool, mo);
  if (!cpu.ok()) return cpu.status();
  absl::StatusOr<PagedKvCache> cache =
      PagedKvCache::Create((*cpu)->CacheShape(P * blocks_per_seq, bs));
  if (!cache.ok()) return cache.status();

  const int64_t seed = absl::GetFlag(FLAGS_seed);
  printf("prompts: %d x %d random tokens (seed %lld), %d greedy decode steps\n", P, L,
         static_cast<long long>(seed), D);
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_int_distribution<int32_t> tok(0, vocab - 1);
  std::vector<std::vector<int32_t>> prompts(P, std::vector<int32_t>(L));
  std::vector<std::vector<int32_t>> tables(P);
  for (int p = 0; p < P; ++p) {
    for (int32_t& t : prompts[p]) t = tok(rng);
    for (int b = 0; b < blocks_per_seq; ++b) tables[p].push_back(p * blocks_per_seq + b);
  }
  auto chunk = [&](int p, int begin, int end) {
    SequenceChunk s;
    s.tokens.assign(prompts[p].begin() + begin, prompts[p].begin() + end);
    s.start_pos = begin;
    s.block_table = tables[p];
    s.all_logits = true;
    return s;
  };
  // Prefill: prompts 0..P-2 whole plus the first part of the last one, then
  // the rest of the last one over its cached first part.
  const int split = L * 5 / 8;
  ForwardBatch first, second;
  for (int p = 0; p + 1 < P; ++p) first.sequences.push_back(chunk(p, 0, L));
  first.sequences.push_back(chunk(P - 1, 0, split));
  second.sequences.push_back(chunk(P - 1, split, L));
  LogitStats prefill, decode;
  ForwardOutput out1, out2;
  if (absl::Status s = RunBoth(first, cpu->get(), &*cache, gpu, vocab, &prefill, &out1); !s.ok()) {
    return s;
  }
  if (absl::Status s = RunBoth(second, cpu->get(), &*cache, gpu, vocab, &prefill, &out2); !s.ok()) {
    return s;
  }
  // The CPU's greedy choice after each prompt feeds both models.
  std::vector<int32_t> next(P);
  for (int p = 0; p < P; ++p) {
    const std::vector<float>& lg = p + 1 < P ? out1.logits[p] : out2.logits[0];
    next[p] = ArgMax(lg.data() + lg.size() - vocab, vocab);
  }
  // Decode steps replay the GPU's CUDA graphs (one per batch bucket, the
  // first step of a bucket runs eagerly and captures). On odd steps the last
  // prompt sits out, so its bucket is padded (with P = 3, 2 sequences in a
  // bucket of 2; with P = 4, 3 in a bucket of 4) and then resumes.
  std::vector<int> pos(P, L);
  for (int step = 0; step < D; ++step) {
    ForwardBatch b;
    std::vector<int> in_step;
    for (int p = 0; p < P; ++p) {
      if (step % 2 == 1 && P > 1 && p == P - 1) continue;
      SequenceChunk s;
      s.tokens = {next[p]};
      s.start_pos = pos[p]++;
      s.block_table = tables[p];
      b.sequences.push_back(std::move(s));
      in_step.push_back(p);
    }
    ForwardOutput out;
    if (absl::Status s = RunBoth(b, cpu->get(), &*cache, gpu, vocab, &decode, &out); !s.ok()) {
      return s;
    }
    for (size_t i = 0; i < in_step.size(); ++i) {
      next[in_step[i]] = ArgMax(out.logits[i].data(), vocab);
    }
  }
  PrintLogitStats("prefill", prefill);
  PrintLogitStats("decode", decode);
  const bool rejects = CheckRejects(gpu);
  // Past the prompts' blocks (the benchmarks overwrite them later).
  absl::StatusOr<bool> sampling =
      CheckDeviceSampling(gpu, P * blocks_per_seq, static_cast<uint32_t>(seed));
  if (!sampling.ok()) return sampling.status();
  return prefill.Pass() && (D == 0 || decode.Pass()) && rejects && *sampling;
}

struct BenchRow {
  std::string name;
  double value = 0;  // tokens/s, 0 on error
  double target = 0;
  std::string note;
};

std::vector<BenchRow> RunBench(CudaLlama* model) {
  std::vector<BenchRow> rows;
  const int context = 256;
  for (auto [batch, target] :
       {std::pair{1, 1500.0}, std::pair{16, 0.0}, std::pair{64, 0.0}, std::pair{256, 40000.0}}) {
    BenchRow r{absl::StrCat("decode batch ", batch, " (ctx ", context, ")"), 0, target, ""};
    absl::StatusOr<CudaLlama::DecodeBench> d =
        model->BenchDecode(batch, context, absl::GetFlag(FLAGS_bench_iterations));
    if (d.ok()) {
      r.value = d->tokens_per_s;
      char note[64];
      snprintf(note, sizeof(note), "%.3f ms/step", d->ms_per_step);
      r.note = note;
    } else {
      r.note = d.status().ToString();
    }
    rows.push_back(r);
  }
  BenchRow p{"prefill 2048 tokens", 0, 100000.0, ""};
  absl::StatusOr<double> pre = model->BenchPrefill(2048, 5);
  if (pre.ok()) {
    p.value = *pre;
    char note[64];
    snprintf(note, sizeof(note), "%.2f ms/prompt", 2048 / *pre * 1e3);
    p.note = note;
  } else {
    p.note = pre.status().ToString();
  }
  rows.push_back(p);
  return rows;
}

int Main() {
  const int devices = ::rill::kernels::cuda::DeviceCountOrError();
  if (devices <= 0) {
    printf("skipped: no CUDA device\n");
    return 0;
  }
  char name[256] = "?";
  ::rill::kernels::cuda::DeviceName(name, sizeof(name));
  size_t free_b = 0, total_b = 0;
  ::rill::kernels::cuda::MemInfo(&free_b, &total_b);
  printf("device: %s, %.1f of %.1f GiB free\n", name, free_b / 1073741824.0,
         total_b / 1073741824.0);

  std::string path = absl::GetFlag(FLAGS_model);
  if (path.empty()) path = base::DefaultModelFilePath();
  absl::StatusOr<std::unique_ptr<worker::loader::Checkpoint>> loaded =
      worker::loader::LoadCheckpoint(path);
  if (!loaded.ok()) {
    printf("error: %s\n", loaded.status().ToString().c_str());
    return 2;
  }
  std::shared_ptr<const worker::loader::Checkpoint> ckpt = std::move(*loaded);
  const worker::loader::ModelConfig& cfg = ckpt->config();
  printf("model: %s (%lld layers, hidden %lld, %lld/%lld heads, ffn %lld, vocab %lld)\n",
         path.c_str(), static_cast<long long>(cfg.num_layers),
         static_cast<long long>(cfg.hidden_size), static_cast<long long>(cfg.num_heads),
         static_cast<long long>(cfg.num_kv_heads), static_cast<long long>(cfg.intermediate_size),
         static_cast<long long>(cfg.vocab_size));

  // Enough blocks for the correctness prompts and for the benchmarks (256
  // sequences x 17 blocks of decode context, 128 blocks of prefill).
  CudaLlamaOptions opt;
  opt.num_kv_blocks = 4608;
  opt.block_size = 16;
  opt.max_batch_tokens = 4096;
  absl::StatusOr<std::unique_ptr<CudaLlama>> gpu = CudaLlama::Create(ckpt, opt);
  if (!gpu.ok()) {
    printf("error: %s\n", gpu.status().ToString().c_str());
    return 2;
  }
  absl::StatusOr<bool> correct = CheckCorrectness(ckpt, gpu->get());
  if (!correct.ok()) {
    printf("error: %s\n", correct.status().ToString().c_str());
    return 2;
  }
  printf("correctness: %s (thresholds: mean rel L2 < %.0e, top-1 >= %.0f%%)\n",
         *correct ? "PASS" : "FAIL", kMaxMeanRelL2, 100 * kMinTop1);
  bool passed = *correct;
  if (absl::GetFlag(FLAGS_tp)) {
    absl::StatusOr<bool> tp = CheckTensorParallel(
        ckpt, devices, static_cast<uint32_t>(absl::GetFlag(FLAGS_seed)));
    if (!tp.ok()) {
      printf("tensor parallel: error: %s\n", tp.status().ToString().c_str());
      return 2;
    }
    printf("tensor parallel: %s\n", *tp ? "PASS" : "FAIL");
    passed = passed && *tp;
  }

  if (absl::GetFlag(FLAGS_bench)) {
    std::unique_ptr<CudaLlama> bench_model;
    CudaLlama* bm = gpu->get();
    const int bench_layers = absl::GetFlag(FLAGS_bench_layers);
    if (bench_layers > 0 && bench_layers != cfg.num_layers) {
      gpu->reset();  // free its memory first
      opt.bench_num_layers = bench_layers;
      absl::StatusOr<std::unique_ptr<CudaLlama>> b = CudaLlama::Create(ckpt, opt);
      if (!b.ok()) {
        printf("error: %s\n", b.status().ToString().c_str());
        return 2;
      }
      bench_model = std::move(*b);
      bm = bench_model.get();
    }
    printf("benchmark model: %d layers, %.1f MiB bf16 weights, %.1f MiB KV cache\n",
           bm->num_layers(), bm->weight_bytes() / 1048576.0, bm->kv_cache_bytes() / 1048576.0);
    printf("%-28s %14s %12s  %-6s %s\n", "benchmark", "tokens/s", "target", "result", "note");
    for (const BenchRow& r : RunBench(bm)) {
      const char* result = r.value <= 0          ? "ERROR"
                           : r.target <= 0       ? "-"
                           : r.value >= r.target ? "PASS"
                                                 : "MISS";
      char target[32] = "-";
      if (r.target > 0) snprintf(target, sizeof(target), ">= %.0f", r.target);
      printf("%-28s %14.0f %12s  %-6s %s\n", r.name.c_str(), r.value, target, result,
             r.note.c_str());
    }
  }
  return passed ? 0 : 1;
}

}  // namespace
}  // namespace rill::worker

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  setvbuf(stdout, nullptr, _IOLBF, 0);
  return rill::worker::Main();
}
