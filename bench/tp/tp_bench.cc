// Tensor-parallel step costs on this machine: the same ragged decode batches
// through the in-process executor (TP=1) and through rill-worker processes
// (TP=2, gloo), same run. Reports per-step time of both, their ratio, and
// the engine -> workers control broadcast (serialize once + one write per
// rank) with its size: the target is "well under a millisecond".
//
//   bazel build -c opt //bench/tp:tp_bench //worker:rill-worker
//   bazel-bin/bench/tp/tp_bench --threads=2
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <glog/logging.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "engine/local_model_executor.h"
#include "engine/model_path.h"
#include "engine/multiproc_executor.h"
#include "rill/internal/worker.pb.h"

ABSL_FLAG(std::string, model, "default", "Model (see ResolveModelPath).");
ABSL_FLAG(int, threads, 2, "Threads in total (TP=2 gives each rank half).");
ABSL_FLAG(std::string, batches, "1,16,64", "Decode batch sizes.");
ABSL_FLAG(int, context, 128, "Context tokens per sequence before the decode steps.");
ABSL_FLAG(int, steps, 16, "Decode steps measured per batch size.");
ABSL_FLAG(std::string, worker_binary, "bazel-bin/worker/rill-worker", "rill-worker path.");

namespace {

using rill::engine::ModelExecutor;

// B sequences with `context` tokens cached (prefilled once), then one new token each.
struct Workload {
  rill::worker::ForwardBatch prefill, decode;
};

Workload MakeWorkload(int batch, int context, int block_size) {
  Workload w;
  const int blocks = (context + 64) / block_size + 1;
  for (int s = 0; s < batch; ++s) {
    rill::worker::SequenceChunk seq;
    for (int b = 0; b < blocks; ++b) seq.block_table.push_back(s * blocks + b);
    for (int t = 0; t < context; ++t) seq.tokens.push_back(300 + (s * 31 + t * 7) % 40000);
    w.prefill.sequences.push_back(seq);
    seq.start_pos = context;
    seq.tokens = {1000 + s};
    w.decode.sequences.push_back(seq);
  }
  return w;
}

// Mean ms per decode step; *broadcast_us (multi-process only): mean control
// broadcast of those decode steps.
double StepMs(ModelExecutor* ex, const Workload& w, int steps, double* broadcast_us = nullptr) {
  rill::worker::ForwardOutput out;
  CHECK(ex->Execute(w.prefill, &out).ok());
  CHECK(ex->Execute(w.decode, &out).ok());  // warm-up
  auto* mp = dynamic_cast<rill::engine::MultiprocExecutor*>(ex);
  const auto before = mp ? mp->broadcast_stats() : rill::engine::MultiprocExecutor::BroadcastStats{};
  const absl::Time t0 = absl::Now();
  for (int i = 0; i < steps; ++i) CHECK(ex->Execute(w.decode, &out).ok());
  const double ms = absl::ToDoubleMilliseconds(absl::Now() - t0) / steps;
  if (mp && broadcast_us) {
    const auto after = mp->broadcast_stats();
    *broadcast_us = absl::ToDoubleMicroseconds(after.total - before.total) /
                    std::max<int64_t>(1, after.steps - before.steps);
  }
  return ms;
}

size_t ControlBytes(const rill::worker::ForwardBatch& b) {
  rill::internal::WorkerCommand cmd;
  for (const auto& s : b.sequences) {
    auto* q = cmd.mutable_step()->add_sequences();
    q->mutable_tokens()->Add(s.tokens.begin(), s.tokens.end());
    q->set_start_pos(s.start_pos);
    q->mutable_block_table()->Add(s.block_table.begin(), s.block_table.end());
  }
  return cmd.ByteSizeLong();
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  google::InitGoogleLogging(argv[0]);
  std::vector<int> batches;
  for (absl::string_view b : absl::StrSplit(absl::GetFlag(FLAGS_batches), ',')) {
    batches.push_back(std::stoi(std::string(b)));
  }
  int max_batch = 1;
  for (int b : batches) max_batch = std::max(max_batch, b);
  const int context = absl::GetFlag(FLAGS_context), block_size = 16;
  const int num_blocks = max_batch * ((context + 64) / block_size + 1) + 1;
  const std::string model = rill::engine::ResolveModelPath(absl::GetFlag(FLAGS_model));

  rill::engine::LocalExecutorOptions lo;
  lo.model_path = model;
  lo.num_blocks = num_blocks;
  lo.threads = absl::GetFlag(FLAGS_threads);
  auto local = rill::engine::LocalModelExecutor::Create(lo);
  CHECK(local.status().ok());
  std::vector<double> tp1;
  for (int b : batches) {
    tp1.push_back(StepMs(local->get(), MakeWorkload(b, context, block_size),
                         absl::GetFlag(FLAGS_steps)));
  }
  local->reset();

  rill::engine::MultiprocExecutorOptions mo;
  mo.model_path = model;
  mo.tensor_parallel_size = 2;
  mo.worker_binary = absl::GetFlag(FLAGS_worker_binary);
  mo.num_blocks = num_blocks;
  mo.threads = absl::GetFlag(FLAGS_threads);
  std::printf("\nTensor-parallel decode step, %s, %d threads in total, %d-token context\n",
              model.c_str(), mo.threads, context);
  std::printf("%-6s | %-12s | %-12s | %-9s | %-14s | %s\n", "batch", "TP=1 ms/step",
              "TP=2 ms/step", "TP2/TP1", "broadcast us", "control bytes");
  std::printf("-------+--------------+--------------+-----------+----------------+--------------\n");
  auto mp = rill::engine::MultiprocExecutor::Create(mo);
  CHECK(mp.status().ok());
  for (size_t i = 0; i < batches.size(); ++i) {
    const Workload w = MakeWorkload(batches[i], context, block_size);
    double broadcast_us = 0;
    const double tp2 = StepMs(mp->get(), w, absl::GetFlag(FLAGS_steps), &broadcast_us);
    std::printf("%-6d | %12.2f | %12.2f | %9.2f | %14.1f | %zu\n", batches[i], tp1[i], tp2,
                tp2 / tp1[i], broadcast_us, ControlBytes(w.decode));
  }
  std::printf("\nbroadcast us = mean over the decode steps of serializing the step's command\n"
              "once and writing it to both ranks' control sockets.\n");
  return 0;
}
