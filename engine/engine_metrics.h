// The engine's Prometheus metrics, under vLLM's names (`vllm:` prefix,
// `model_name` label; the mapping is in deploy/README.md) plus Rill's own
// (`rill:`), and the per-request log line (--log_requests). EngineStats
// (Admin.GetStats, the periodic log line, GetLoad) is read from these same
// counters, so /metrics and GetStats never disagree.
//
// Threads: the On* methods run on the engine loop thread only (they keep
// the previous totals to turn the core's running totals into counter
// increments); Read and Exposition may be called from any thread.
#ifndef RILL_ENGINE_ENGINE_METRICS_H_
#define RILL_ENGINE_ENGINE_METRICS_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "base/metrics/registry.h"
#include "engine/engine_args.h"
#include "engine/engine_core.h"
#include "engine/engine_stats.h"
#include "engine/request.h"
#include "engine/spec_decode/spec_decode_config.h"

namespace rill::engine {

// The numbers the loop reads after each iteration: gauges, and the core's
// running totals (turned into counter increments).
struct EngineStateNumbers {
  int num_running = 0;
  int num_waiting = 0;
  double kv_usage = 0.0;
  bool sleeping = false;
  int64_t computed_prompt_tokens = 0;  // EngineCoreStats::prompt_tokens
  int64_t steps = 0;
  int64_t preemptions = 0;
  int64_t prefix_queried_tokens = 0;   // PrefixCacheStats
  int64_t prefix_hit_tokens = 0;
  spec_decode::SpecDecodeStats spec_decode;  // EngineCore::spec_stats()
  int64_t device_sampled_rows = 0;     // EngineCoreStats (executors that sample on device)
  int64_t host_sampled_rows = 0;
  int64_t step_token_budget = 0;       // Scheduler's SloBudget::TokenBudget()
  // Comma-separated adapter names; only set when LoRA is enabled.
  std::string running_loras;
  std::string waiting_loras;
};

// One engine step as the loop timed it.
struct StepTiming {
  absl::Duration step;     // Schedule + execute + sample + stop checks.
  absl::Duration execute;  // The executor's forward (TP: including its collectives).
  absl::Duration sample;   // Logits processing and sampling.
  int num_seqs = 0;
  int64_t num_tokens = 0;  // Scheduled tokens (prefill + decode).
  absl::Duration collective;  // Of execute: TP all-reduce, slowest rank.
};

class EngineMetrics {
 public:
  // `config`: the resolved engine (cache_config_info, lora_requests_info,
  // tensor_parallel_size).
  EngineMetrics(const EngineArgs& args, const EngineConfig& config);

  // One output of one sample, which is `state` after it (a stop string may
  // finish a sample the core still runs): `tokens_before` tokens it had
  // generated and the time of its previous token (InfinitePast before the
  // first). A finished sample is observed in the request histograms and
  // logged with --log_requests.
  void OnSampleOutput(const EngineCoreOutput& o, RequestState state, int64_t prompt_tokens,
                      int64_t tokens_before, absl::Time previous_token);
  // A request ended (all its samples): `state` is its last sample's.
  void OnRequestFinished(RequestState state);
  void OnStep(const StepTiming& t);
  void OnState(const EngineStateNumbers& n);

  // EngineStats from the counters and gauges (rates left 0).
  EngineStats Read() const;
  // The Prometheus text exposition of every family.
  std::string Exposition() const;
  base::metrics::Registry& registry() { return registry_; }

 private:
  base::metrics::Counter& NewCounter(const std::string& name, const std::string& help);
  base::metrics::Gauge& NewGauge(const std::string& name, const std::string& help);
  base::metrics::Histogram& NewHistogram(const std::string& name, const std::string& help,
                                      std::vector<double> bounds);

  const std::string model_name_;
  const bool log_requests_;
  const std::string max_lora_;
  base::metrics::Registry registry_;
  // vLLM's families (children with this engine's model_name).
  base::metrics::Gauge& running_;
  base::metrics::Gauge& waiting_;
  base::metrics::Gauge& kv_usage_;
  base::metrics::GaugeFamily& lora_info_;
  base::metrics::Counter& prompt_tokens_;
  base::metrics::Counter& generation_tokens_;
  base::metrics::CounterFamily& success_;
  base::metrics::Counter& success_stop_;
  base::metrics::Counter& success_length_;
  base::metrics::Counter& success_abort_;
  base::metrics::Counter& success_error_;
  base::metrics::Counter& preemptions_;
  base::metrics::Counter& prefix_queries_;
  base::metrics::Counter& prefix_hits_;
  base::metrics::Histogram& ttft_;
  base::metrics::Histogram& itl_;
  base::metrics::Histogram& e2e_;
  base::metrics::Histogram& queue_;
  base::metrics::Histogram& prefill_;
  base::metrics::Histogram& decode_;
  base::metrics::Histogram& inference_;
  base::metrics::Histogram& request_prompt_tokens_;
  base::metrics::Histogram& request_generation_tokens_;
  base::metrics::Histogram& iteration_tokens_;
  // Rill's own.
  base::metrics::Counter& computed_prompt_tokens_;
  base::metrics::Counter& steps_;
  base::metrics::Histogram& step_seconds_;
  base::metrics::Histogram& execute_seconds_;
  base::metrics::Histogram& sample_seconds_;
  base::metrics::Histogram& batch_size_;
  // Observed per step only with tensor parallelism (else empty).
  const bool tensor_parallel_;
  base::metrics::Histogram& tp_collective_seconds_;
  base::metrics::Gauge& sleeping_;
  base::metrics::Counter& engine_restarts_;
  // Speculative decoding (vLLM's spec_decode_* names).
  base::metrics::Counter& spec_drafts_;
  base::metrics::Counter& spec_draft_tokens_;
  base::metrics::Counter& spec_accepted_tokens_;
  base::metrics::CounterFamily& spec_accepted_per_pos_;  // {model_name, position}
  base::metrics::Gauge& step_token_budget_;
  // Rows an executor that samples on its device was sent, by where they
  // were sampled ({model_name, where}: "device" / "host").
  base::metrics::CounterFamily& device_sampling_rows_;
  base::metrics::Counter& device_sampling_device_rows_;
  base::metrics::Counter& device_sampling_host_rows_;

  // Loop thread: the totals already counted.
  EngineStateNumbers last_;
};

}  // namespace rill::engine

#endif  // RILL_ENGINE_ENGINE_METRICS_H_
