#include "engine/engine_metrics.h"

#include <algorithm>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/metrics/text_format.h"

namespace rill::engine {
namespace {

using base::metrics::Buckets125;

// vLLM's buckets (vllm/v1/metrics/loggers.py), so dashboards' quantiles match.
const std::vector<double> kTtftBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
                                          0.25,  0.5,   0.75, 1.0,  2.5,  5.0,  7.5,  10.0,
                                          20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kItlBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,
                                         0.3,  0.4,   0.5,  0.75,  1.0, 2.5,  5.0,
                                         7.5,  10.0,  20.0, 40.0,  80.0};
const std::vector<double> kRequestLatencyBuckets = {
    0.3,  0.5,  0.8,  1.0,  1.5,  2.0,  2.5,   5.0,   10.0,  15.0,  20.0,
    30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
const std::vector<double> kIterationTokenBuckets = {1,   8,    16,   32,   64,   128,  256,
                                                    512, 1024, 2048, 4096, 8192, 16384};
// Rill's step-level times: 100 us .. ~50 s.
const std::vector<double> kStepBuckets = base::metrics::ExponentialBuckets(1e-4, 2, 20);

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }
bool Set(absl::Time t) { return t != absl::InfinitePast(); }

}  // namespace

base::metrics::Counter& EngineMetrics::NewCounter(const std::string& name,
                                                  const std::string& help) {
  return registry_.AddCounter(name, help, {"model_name"}).Labels({model_name_});
}

base::metrics::Gauge& EngineMetrics::NewGauge(const std::string& name, const std::string& help) {
  return registry_.AddGauge(name, help, {"model_name"}).Labels({model_name_});
}

base::metrics::Histogram& EngineMetrics::NewHistogram(const std::string& name,
                                                      const std::string& help,
                                                      std::vector<double> bounds) {
  return registry_.AddHistogram(name, help, {"model_name"}, std::move(bounds))
      .Labels({model_name_});
}

EngineMetrics::EngineMetrics(const EngineArgs& args, const EngineConfig& config)
    : model_name_(args.model),
      log_requests_(args.log_requests),
      max_lora_(absl::StrCat(config.lora.enabled ? config.lora.max_loras : 0)),
      running_(NewGauge("vllm:num_requests_running", "Number of requests in model execution batches.")),
      waiting_(NewGauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")),
      kv_usage_(NewGauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")),
      lora_info_(registry_.AddGauge(
          "vllm:lora_requests_info", "Running stats on lora requests (value: last update time).",
          {"max_lora", "running_lora_adapters", "waiting_lora_adapters"})),
      prompt_tokens_(NewCounter("vllm:prompt_tokens_total",
                                "Number of prefill tokens processed (prompt lengths, counted "
                                "at each request's first token).")),
      generation_tokens_(NewCounter("vllm:generation_tokens_total",
                                    "Number of generation tokens processed.")),
      success_(registry_.AddCounter("vllm:request_success_total",
                                    "Count of finished requests, by finish reason.",
                                    {"model_name", "finished_reason"})),
      success_stop_(success_.Labels({model_name_, "stop"})),
      success_length_(success_.Labels({model_name_, "length"})),
      success_abort_(success_.Labels({model_name_, "abort"})),
      success_error_(success_.Labels({model_name_, "error"})),
      preemptions_(NewCounter("vllm:num_preemptions_total", "Cumulative number of preemptions.")),
      prefix_queries_(NewCounter("vllm:prefix_cache_queries_total",
                                 "Prefix cache queries, in terms of number of queried tokens.")),
      prefix_hits_(NewCounter("vllm:prefix_cache_hits_total",
                              "Prefix cache hits, in terms of number of cached tokens.")),
      ttft_(NewHistogram("vllm:time_to_first_token_seconds",
                         "Histogram of time to first token in seconds.", kTtftBuckets)),
      itl_(NewHistogram("vllm:inter_token_latency_seconds",
                        "Histogram of inter-token latency in seconds.", kItlBuckets)),
      e2e_(NewHistogram("vllm:e2e_request_latency_seconds",
                        "Histogram of e2e request latency in seconds.", kRequestLatencyBuckets)),
      queue_(NewHistogram("vllm:request_queue_time_seconds",
                          "Histogram of time spent in WAITING phase for request.",
                          kRequestLatencyBuckets)),
      prefill_(NewHistogram("vllm:request_prefill_time_seconds",
                            "Histogram of time spent in PREFILL phase for request.",
                            kRequestLatencyBuckets)),
      decode_(NewHistogram("vllm:request_decode_time_seconds",
                           "Histogram of time spent in DECODE phase for request.",
                           kRequestLatencyBuckets)),
      inference_(NewHistogram("vllm:request_inference_time_seconds",
                              "Histogram of time spent in RUNNING phase for request.",
                              kRequestLatencyBuckets)),
      request_prompt_tokens_(NewHistogram("vllm:request_prompt_tokens",
                                          "Number of prefill tokens processed.",
                                          Buckets125(std::max<int64_t>(1, args.max_model_len)))),
      request_generation_tokens_(NewHistogram("vllm:request_generation_tokens",
                                              "Number of generation tokens processed.",
                                              Buckets125(std::max<int64_t>(1, args.max_model_len)))),
      iteration_tokens_(NewHistogram("vllm:iteration_tokens_total",
                                     "Histogram of number of tokens per engine_step.",
                                     kIterationTokenBuckets)),
      computed_prompt_tokens_(NewCounter(
          "rill:prompt_tokens_computed_total",
          "Prompt tokens the model computed (prefix-cache hits excluded, recompute after "
          "preemption included); Admin.GetStats prompt_tokens_total.")),
      steps_(NewCounter("rill:engine_steps_total", "Engine steps that ran the model.")),
      step_seconds_(NewHistogram("rill:engine_step_seconds",
                                 "Wall time of one engine step (schedule, forward, sample).",
                                 kStepBuckets)),
      execute_seconds_(NewHistogram(
          "rill:model_execute_seconds",
          "Wall time of the model forward in one step (tensor parallel: with its collectives).",
          kStepBuckets)),
      sample_seconds_(NewHistogram("rill:sampler_seconds",
                                   "Wall time of logits processing and sampling in one step.",
                                   kStepBuckets)),
      batch_size_(NewHistogram("rill:engine_batch_size", "Sequences in one engine step.",
                               Buckets125(std::max(1, args.max_num_seqs)))),
      tensor_parallel_(config.parallel.tensor_parallel_size > 1),
      tp_collective_seconds_(NewHistogram(
          "rill:tp_collective_seconds",
          "Wall time one engine step spent in tensor-parallel all-reduce (the slowest rank, "
          "waiting for its peers included); no observations at tensor_parallel_size 1.",
          kStepBuckets)),
      sleeping_(NewGauge("rill:engine_sleeping", "1 while the engine sleeps (Admin.Sleep).")),
      engine_restarts_(NewCounter(
          "rill:engine_restarts_total",
          "Times rill serve restarted a dead engine process (this one counts the ones before "
          "it; 0 when not supervised).")),
      spec_drafts_(NewCounter("vllm:spec_decode_num_drafts_total",
                              "Number of spec decoding drafts (one sequence's draft verified "
                              "in one step).")),
      spec_draft_tokens_(NewCounter("vllm:spec_decode_num_draft_tokens_total",
                                    "Number of draft tokens.")),
      spec_accepted_tokens_(NewCounter("vllm:spec_decode_num_accepted_tokens_total",
                                       "Number of accepted tokens.")),
      spec_accepted_per_pos_(registry_.AddCounter(
          "vllm:spec_decode_num_accepted_tokens_per_pos_total",
          "Accepted tokens per draft (0-based) position.", {"model_name", "position"})),
      step_token_budget_(NewGauge(
          "rill:step_token_budget",
          "Tokens one engine step may hold: with --target_itl_ms, what the step-time model "
          "predicts fits the target (a prefill from position 0 alone); else "
          "--max_num_batched_tokens.")),
      device_sampling_rows_(registry_.AddCounter(
          "rill:device_sampling_rows_total",
          "Rows sampled for an executor that samples on its device (--device_sampling), by "
          "where: device, or host (a grammar, a draft to verify, or prompt logprobs); both 0 "
          "on the CPU backend.",
          {"model_name", "where"})),
      device_sampling_device_rows_(device_sampling_rows_.Labels({model_name_, "device"})),
      device_sampling_host_rows_(device_sampling_rows_.Labels({model_name_, "host"})) {
  engine_restarts_.Increment(static_cast<double>(args.engine_restarts));
  // Present (at 0) from the start for every position a draft can have.
  for (int i = 0; i < std::max(args.speculative_ngram_k, args.speculative_num_draft_tokens); ++i) {
    spec_accepted_per_pos_.Labels({model_name_, absl::StrCat(i)});
  }
  // The SLO targets as set (0: none), beside the budget chosen for them.
  NewGauge("rill:target_itl_seconds", "Target inter-token latency (--target_itl_ms); 0: off.")
      .Set(args.target_itl_ms / 1000.0);
  NewGauge("rill:target_ttft_seconds", "Target time to first token (--target_ttft_ms); 0: none.")
      .Set(args.target_ttft_ms / 1000.0);
  registry_
      .AddGauge("vllm:cache_config_info", "Information of the KV cache config (value 1).",
                {"model_name", "block_size", "cache_dtype", "enable_prefix_caching",
                 "num_gpu_blocks", "kv_cache_bytes"})
      .Labels({model_name_, absl::StrCat(config.cache.block_size), config.cache.kv_cache_dtype,
               config.cache.enable_prefix_caching ? "True" : "False",
               absl::StrCat(config.cache.num_blocks), absl::StrCat(config.cache.kv_cache_bytes)})
      .Set(1);
  // Present (at 0) before the first request, as vLLM's are.
  lora_info_.Labels({max_lora_, "", ""}).Set(absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
}

void EngineMetrics::OnSampleOutput(const EngineCoreOutput& o, RequestState state,
                                   int64_t prompt_tokens, int64_t tokens_before,
                                   absl::Time previous_token) {
  const int64_t n = static_cast<int64_t>(o.new_token_ids.size());
  if (n > 0) {
    generation_tokens_.Increment(n);
    if (tokens_before == 0) {
      prompt_tokens_.Increment(prompt_tokens);
      if (Set(o.times.first_token)) ttft_.Observe(Seconds(o.times.first_token - o.times.arrival));
    } else if (Set(previous_token) && Set(o.times.last_token)) {
      itl_.Observe(Seconds(o.times.last_token - previous_token));
    }
  }
  if (!IsFinished(state)) return;
  const int64_t generated = tokens_before + n;
  const absl::Time end = Set(o.times.finished) ? o.times.finished : absl::Now();
  e2e_.Observe(Seconds(end - o.times.arrival));
  request_prompt_tokens_.Observe(prompt_tokens);
  request_generation_tokens_.Observe(generated);
  const bool scheduled = Set(o.times.first_scheduled);
  const bool has_token = Set(o.times.first_token);
  if (scheduled) {
    queue_.Observe(Seconds(o.times.first_scheduled - o.times.arrival));
    inference_.Observe(Seconds(end - o.times.first_scheduled));
  }
  if (scheduled && has_token) prefill_.Observe(Seconds(o.times.first_token - o.times.first_scheduled));
  if (has_token) decode_.Observe(Seconds(o.times.last_token - o.times.first_token));
  if (!log_requests_) return;
  auto ms = [](bool ok, absl::Time a, absl::Time b) {
    return ok ? absl::StrFormat("%.1fms", absl::ToDoubleMilliseconds(b - a)) : std::string("-");
  };
  LOG(INFO) << absl::StrFormat(
      "request %s finished: reason=%s prompt_tokens=%d generated_tokens=%d cached_tokens=%d "
      "preemptions=%d queue=%s ttft=%s e2e=%s lora=%s%s",
      o.request_id, FinishReason(state), prompt_tokens, generated, o.num_cached_tokens,
      o.num_preemptions, ms(scheduled, o.times.arrival, o.times.first_scheduled),
      ms(has_token, o.times.arrival, o.times.first_token), ms(true, o.times.arrival, end),
      o.lora_name.empty() ? "-" : o.lora_name,
      o.error.ok() ? "" : absl::StrCat(" error=\"", o.error.message(), "\""));
}

void EngineMetrics::OnRequestFinished(RequestState state) {
  switch (state) {
    case RequestState::kFinishedStopped: success_stop_.Increment(); break;
    case RequestState::kFinishedLength: success_length_.Increment(); break;
    case RequestState::kFinishedAborted: success_abort_.Increment(); break;
    case RequestState::kFinishedError: success_error_.Increment(); break;
    default: break;
  }
}

void EngineMetrics::OnStep(const StepTiming& t) {
  step_seconds_.Observe(Seconds(t.step));
  execute_seconds_.Observe(Seconds(t.execute));
  sample_seconds_.Observe(Seconds(t.sample));
  batch_size_.Observe(t.num_seqs);
  if (tensor_parallel_) tp_collective_seconds_.Observe(Seconds(t.collective));
  iteration_tokens_.Observe(static_cast<double>(t.num_tokens));
}

void EngineMetrics::OnState(const EngineStateNumbers& n) {
  running_.Set(n.num_running);
  waiting_.Set(n.num_waiting);
  kv_usage_.Set(n.kv_usage);
  sleeping_.Set(n.sleeping ? 1 : 0);
  step_token_budget_.Set(static_cast<double>(n.step_token_budget));
  // A total that went down was reset (ResetPrefixCache): count it afresh.
  auto advance = [](base::metrics::Counter& c, int64_t now, int64_t before) {
    c.Increment(static_cast<double>(now >= before ? now - before : now));
  };
  advance(computed_prompt_tokens_, n.computed_prompt_tokens, last_.computed_prompt_tokens);
  advance(steps_, n.steps, last_.steps);
  advance(preemptions_, n.preemptions, last_.preemptions);
  advance(prefix_queries_, n.prefix_queried_tokens, last_.prefix_queried_tokens);
  advance(prefix_hits_, n.prefix_hit_tokens, last_.prefix_hit_tokens);
  const spec_decode::SpecDecodeStats& spec = n.spec_decode;
  const spec_decode::SpecDecodeStats& spec_before = last_.spec_decode;
  advance(spec_drafts_, spec.num_drafts, spec_before.num_drafts);
  advance(spec_draft_tokens_, spec.num_draft_tokens, spec_before.num_draft_tokens);
  advance(spec_accepted_tokens_, spec.num_accepted_tokens, spec_before.num_accepted_tokens);
  advance(device_sampling_device_rows_, n.device_sampled_rows, last_.device_sampled_rows);
  advance(device_sampling_host_rows_, n.host_sampled_rows, last_.host_sampled_rows);
  for (size_t i = 0; i < spec.accepted_per_position.size(); ++i) {
    const int64_t before =
        i < spec_before.accepted_per_position.size() ? spec_before.accepted_per_position[i] : 0;
    if (spec.accepted_per_position[i] == before) continue;
    advance(spec_accepted_per_pos_.Labels({model_name_, absl::StrCat(i)}),
            spec.accepted_per_position[i], before);
  }
  if (n.running_loras != last_.running_loras || n.waiting_loras != last_.waiting_loras) {
    lora_info_.Remove({max_lora_, last_.running_loras, last_.waiting_loras});
    lora_info_.Labels({max_lora_, n.running_loras, n.waiting_loras})
        .Set(absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
  }
  last_ = n;
}

EngineStats EngineMetrics::Read() const {
  EngineStats s;
  s.num_running = static_cast<int>(running_.Value());
  s.num_waiting = static_cast<int>(waiting_.Value());
  s.kv_usage = kv_usage_.Value();
  const double queried = prefix_queries_.Value();
  s.prefix_cache_hit_rate = queried > 0 ? prefix_hits_.Value() / queried : 0.0;
  s.prompt_tokens = static_cast<int64_t>(computed_prompt_tokens_.Value());
  s.generation_tokens = static_cast<int64_t>(generation_tokens_.Value());
  s.steps = static_cast<int64_t>(steps_.Value());
  s.preemptions = static_cast<int64_t>(preemptions_.Value());
  s.step_token_budget = static_cast<int64_t>(step_token_budget_.Value());
  s.requests_finished = static_cast<int64_t>(success_stop_.Value() + success_length_.Value());
  s.requests_aborted = static_cast<int64_t>(success_abort_.Value());
  s.requests_failed = static_cast<int64_t>(success_error_.Value());
  s.tp_collective_seconds = tp_collective_seconds_.Sum();
  s.engine_restarts = static_cast<int64_t>(engine_restarts_.Value());
  return s;
}

std::string EngineMetrics::Exposition() const {
  return base::metrics::TextFormat(registry_.Collect());
}

}  // namespace rill::engine
