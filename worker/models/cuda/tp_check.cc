#include "worker/models/cuda/tp_check.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "worker/comm/nccl_communicator.h"
#include "worker/forward_batch.h"
#include "worker/models/cuda/cuda_llama.h"
#include "worker/models/cuda/logits_compare.h"

namespace rill::worker {
namespace {

constexpr int kSeqs = 3;
constexpr int kPromptTokens = 40;
constexpr int kBlockSize = 16;
constexpr int kBlocksPerSeq = 4;  // 64 positions: the prompt and every later token

// One step of the script; `graph` marks decode-only steps (replayed or
// captured through the decode graphs), the others run eagerly.
struct Step {
  ForwardBatch batch;
  bool graph = false;
};

// The fixed script every model runs. Tokens are random (seeded), not the
// models' own choices, so every model sees the same contexts.
std::vector<Step> MakeScript(int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> tok(0, vocab - 1);
  std::vector<int> pos(kSeqs, 0);
  auto table = [](int s) {
    std::vector<int32_t> t;
    for (int b = 0; b < kBlocksPerSeq; ++b) t.push_back(s * kBlocksPerSeq + b);
    return t;
  };
  auto chunk = [&](int s, int n) {
    SequenceChunk c;
    for (int i = 0; i < n; ++i) c.tokens.push_back(tok(rng));
    c.start_pos = pos[s];
    pos[s] += n;
    c.block_table = table(s);
    return c;
  };
  auto sampled = [&](SequenceChunk c, int s) {
    DeviceSampling d;
    d.temperature = 1.0f;
    d.uniform = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    d.top_logprobs = s == 0 ? 5 : 0;
    c.device_sampling = d;
    return c;
  };
  std::vector<Step> script;
  Step prefill;  // eager: every prompt, every row's logits
  for (int s = 0; s < kSeqs; ++s) {
    SequenceChunk c = chunk(s, kPromptTokens);
    c.all_logits = true;
    prefill.batch.sequences.push_back(std::move(c));
  }
  script.push_back(std::move(prefill));
  // Decode: 3 sequences (bucket 4: captured, then replayed twice), then 2
  // (bucket 2: captured, replayed), then 3 again, sampled on the GPU.
  for (int i = 0; i < 6; ++i) {
    Step d;
    d.graph = true;
    const int n = i < 3 || i == 5 ? kSeqs : 2;
    for (int s = 0; s < n; ++s) {
      SequenceChunk c = chunk(s, 1);
      d.batch.sequences.push_back(i == 5 && s < 2 ? sampled(std::move(c), s) : std::move(c));
    }
    script.push_back(std::move(d));
  }
  // Eager again: a 3-token chunk beside two decode tokens, one GPU-sampled.
  Step mixed;
  mixed.batch.sequences.push_back(chunk(0, 3));
  mixed.batch.sequences.push_back(sampled(chunk(1, 1), 1));
  mixed.batch.sequences.push_back(chunk(2, 1));
  script.push_back(std::move(mixed));
  return script;
}

CudaLlamaOptions Options() {
  CudaLlamaOptions o;
  o.num_kv_blocks = kSeqs * kBlocksPerSeq;
  o.block_size = kBlockSize;
  o.max_batch_tokens = 256;
  o.max_graph_context = 256;
  return o;
}

absl::StatusOr<std::vector<ForwardOutput>> RunScript(CudaLlama* model,
                                                     const std::vector<Step>& script) {
  std::vector<ForwardOutput> outs(script.size());
  for (size_t i = 0; i < script.size(); ++i) {
    if (absl::Status s = model->Forward(script[i].batch, &outs[i]); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("step ", i, ": ", s.message()));
    }
  }
  return outs;
}

absl::StatusOr<std::vector<ForwardOutput>> RunModel(
    std::shared_ptr<const worker::loader::Checkpoint> ckpt, const CudaLlamaOptions& options,
    const std::vector<Step>& script) {
  absl::StatusOr<std::unique_ptr<CudaLlama>> model = CudaLlama::Create(std::move(ckpt), options);
  if (!model.ok()) return model.status();
  return RunScript(model->get(), script);
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

bool SameSampled(const DeviceSampledToken& a, const DeviceSampledToken& b) {
  return a.token == b.token && std::memcmp(&a.logprob, &b.logprob, sizeof(float)) == 0 &&
         a.top == b.top;
}

// Bitwise comparison of two runs of the script: logits rows of eager and of
// graph steps, and GPU-sampled tokens.
struct BitwiseTally {
  int eager_rows = 0, eager_equal = 0, graph_rows = 0, graph_equal = 0;
  int sampled = 0, sampled_equal = 0;
  bool Pass() const {
    return eager_rows == eager_equal && graph_rows == graph_equal && sampled == sampled_equal &&
           eager_rows > 0 && graph_rows > 0 && sampled > 0;
  }
};

BitwiseTally CompareBits(const std::vector<Step>& script, const std::vector<ForwardOutput>& a,
                         const std::vector<ForwardOutput>& b, int vocab) {
  BitwiseTally t;
  for (size_t i = 0; i < script.size(); ++i) {
    for (size_t s = 0; s < script[i].batch.sequences.size(); ++s) {
      if (script[i].batch.sequences[s].device_sampling.has_value()) {
        ++t.sampled;
        if (s < a[i].sampled.size() && s < b[i].sampled.size() &&
            SameSampled(a[i].sampled[s], b[i].sampled[s])) {
          ++t.sampled_equal;
        }
        continue;
      }
      const int rows = static_cast<int>(a[i].logits[s].size() / vocab);
      const bool equal = SameBits(a[i].logits[s], b[i].logits[s]);
      (script[i].graph ? t.graph_rows : t.eager_rows) += rows;
      if (equal) (script[i].graph ? t.graph_equal : t.eager_equal) += rows;
    }
  }
  return t;
}

void PrintBitwise(const char* what, const BitwiseTally& t) {
  printf("%s: eager %d/%d logits rows, graph %d/%d rows, GPU-sampled %d/%d tokens bitwise "
         "equal: %s\n",
         what, t.eager_equal, t.eager_rows, t.graph_equal, t.graph_rows, t.sampled_equal,
         t.sampled, t.Pass() ? "PASS" : "FAIL");
}

// Waits until every rank made its model, so that one rank's failure stops
// the others before they queue an all-reduce that would wait forever.
class StartGate {
 public:
  explicit StartGate(int ranks) : waiting_(ranks) {}
  // Returns whether every rank arrived ready.
  bool ArriveAndWait(bool ready) {
    std::unique_lock<std::mutex> lock(mu_);
    all_ready_ = all_ready_ && ready;
    if (--waiting_ == 0) cv_.notify_all();
    cv_.wait(lock, [&] { return waiting_ == 0; });
    return all_ready_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int waiting_;
  bool all_ready_ = true;
};

// Two ranks on GPUs 0 and 1, one thread each, over a fresh NCCL id.
absl::StatusOr<std::vector<std::vector<ForwardOutput>>> RunTwoRanks(
    std::shared_ptr<const worker::loader::Checkpoint> ckpt, const std::vector<Step>& script) {
  absl::StatusOr<std::string> id = NewNcclUniqueId();
  if (!id.ok()) return id.status();
  constexpr int kWorld = 2;
  std::vector<absl::Status> status(kWorld);
  std::vector<std::vector<ForwardOutput>> outs(kWorld);
  StartGate gate(kWorld);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      NcclOptions no;
      no.unique_id = *id;
      no.rank = r;
      no.world_size = kWorld;
      no.device = r;  // also this thread's device from here on
      no.timeout = std::chrono::seconds(60);
      absl::StatusOr<std::unique_ptr<DeviceCommunicator>> comm = CreateNcclCommunicator(no);
      std::unique_ptr<CudaLlama> model;  // destroyed before comm: it syncs its stream
      if (comm.ok()) {
        CudaLlamaOptions o = Options();
        o.tp_rank = r;
        o.tp_world_size = kWorld;
        o.comm = comm->get();
        absl::StatusOr<std::unique_ptr<CudaLlama>> m = CudaLlama::Create(ckpt, o);
        if (m.ok()) model = std::move(*m);
        status[r] = m.status();
      } else {
        status[r] = comm.status();
      }
      if (!gate.ArriveAndWait(status[r].ok())) return;
      absl::StatusOr<std::vector<ForwardOutput>> run = RunScript(model.get(), script);
      if (run.ok()) {
        outs[r] = std::move(*run);
      } else {
        status[r] = run.status();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kWorld; ++r) {
    if (!status[r].ok()) {
      return absl::Status(status[r].code(),
                          absl::StrCat("tensor-parallel rank ", r, ": ", status[r].message()));
    }
  }
  return outs;
}

}  // namespace

absl::StatusOr<bool> CheckTensorParallel(std::shared_ptr<const worker::loader::Checkpoint> ckpt,
                                         int devices, uint32_t seed) {
  const int vocab = static_cast<int>(ckpt->config().vocab_size);
  const std::vector<Step> script = MakeScript(vocab, seed);
  printf("tensor parallel (NCCL %s): %zu steps of %d sequences (prefill, graph decode, GPU "
         "sampling, mixed)\n",
         NcclVersionString().c_str(), script.size(), kSeqs);
  absl::StatusOr<std::vector<ForwardOutput>> whole = RunModel(ckpt, Options(), script);
  if (!whole.ok()) return whole.status();

  // (a) One rank in an NCCL world of one, on this thread's device 0.
  absl::StatusOr<std::string> id = NewNcclUniqueId();
  if (!id.ok()) return id.status();
  NcclOptions no;
  no.unique_id = *id;
  no.timeout = std::chrono::seconds(60);
  absl::StatusOr<std::unique_ptr<DeviceCommunicator>> comm = CreateNcclCommunicator(no);
  if (!comm.ok()) return comm.status();
  CudaLlamaOptions one = Options();
  one.comm = comm->get();
  absl::StatusOr<std::vector<ForwardOutput>> tp1 = RunModel(ckpt, one, script);
  if (!tp1.ok()) return tp1.status();
  const BitwiseTally world1 = CompareBits(script, *tp1, *whole, vocab);
  PrintBitwise("tp world 1 vs no TP", world1);
  bool pass = world1.Pass();

  // (b) Two ranks on two GPUs.
  if (devices < 2) {
    printf("tp world 2: skipped: needs 2 GPUs (this machine has %d)\n", devices);
    return pass;
  }
  absl::StatusOr<std::vector<std::vector<ForwardOutput>>> ranks = RunTwoRanks(ckpt, script);
  if (!ranks.ok()) return ranks.status();
  const BitwiseTally same = CompareBits(script, (*ranks)[0], (*ranks)[1], vocab);
  PrintBitwise("tp world 2 rank 0 vs rank 1", same);
  LogitStats stats;
  for (size_t i = 0; i < script.size(); ++i) {
    for (size_t s = 0; s < script[i].batch.sequences.size(); ++s) {
      if (script[i].batch.sequences[s].device_sampling.has_value()) continue;
      CompareLogits((*ranks)[0][i].logits[s], (*whole)[i].logits[s], vocab, &stats);
    }
  }
  PrintLogitStats("tp2 vs 1", stats);
  return pass && same.Pass() && stats.Pass();
}

}  // namespace rill::worker
