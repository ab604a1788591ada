// rill-bench-serve (also `./rill bench serve`): replays a workload against a
// Rill server (gRPC), llama.cpp's llama-server (HTTP) or any OpenAI-compatible
// server (/v1/completions, e.g. smg in front of Rill), at one or more load
// levels, and reports TTFT, TPOT, inter-token latency, end-to-end latency and
// throughput as a table on stdout and as JSON (--out_json). With --goodput
// it also reports goodput (requests/s meeting every SLO; goodput.h); with
// --long_fraction the workload mixes long-document prompts into it.
//
//   rill-bench-serve --backend=rill --address=127.0.0.1:50051 --concurrency=1,4,16
//   rill-bench-serve --backend=llama-server --address=127.0.0.1:8080 --request_rate=2
//   rill-bench-serve --backend=openai --address=127.0.0.1:8000 --model_name=m --concurrency=16
//   rill-bench-serve --request_rate=1 --concurrency=64 --long_fraction=0.1 \
//       --long_input_len=3000 --goodput=ttft_ms:2000,itl_ms:150
#include <fstream>
#include <iostream>
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <glog/logging.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/flags_usage.h"
#include "bench/serve_bench/goodput.h"
#include "bench/serve_bench/llama_server_backend.h"
#include "bench/serve_bench/load_runner.h"
#include "bench/serve_bench/openai_backend.h"
#include "bench/serve_bench/progress_bar.h"
#include "bench/serve_bench/results_json.h"
#include "bench/serve_bench/rill_backend.h"
#include "bench/serve_bench/workload.h"

ABSL_FLAG(std::string, backend, "rill",
          "rill (gRPC), llama-server (HTTP /completion) or openai (HTTP /v1/completions)");
ABSL_FLAG(std::string, model_name, "", "openai: the request's model (the server's /v1/models id)");
ABSL_FLAG(std::string, address, "127.0.0.1:50051", "host:port of the server");
ABSL_FLAG(std::string, concurrency, "1", "comma-separated load levels (clients in flight)");
ABSL_FLAG(double, request_rate, 0, "> 0: Poisson arrivals at this rate (req/s), capped by concurrency");
ABSL_FLAG(int, num_requests, 0, "requests per level; 0 = max(8, 2 x concurrency)");
ABSL_FLAG(int, warmup_requests, 2, "unrecorded requests before each level");
ABSL_FLAG(double, duration_s, 0, "> 0: stop sending new requests after this long per level");
ABSL_FLAG(std::string, dataset, "", "JSONL of prompts (see workload.h); empty = synthetic");
ABSL_FLAG(int, input_len, 128, "synthetic prompt tokens");
ABSL_FLAG(double, input_len_range, 0, "synthetic prompt length spread, fraction in [0, 1)");
ABSL_FLAG(int, output_len, 128, "output tokens per request (EOS ignored)");
ABSL_FLAG(double, output_len_range, 0, "output length spread, fraction in [0, 1)");
ABSL_FLAG(int, shared_prefix_len, 0, "synthetic: tokens shared by every prompt (prefix caching)");
ABSL_FLAG(uint64_t, seed, 0, "workload and arrival seed");
ABSL_FLAG(int, connections, 4, "rill: gRPC connections used round-robin");
ABSL_FLAG(double, long_fraction, 0,
          "mixed workload: this fraction of the requests (in [0, 1]) become long-document "
          "prompts of --long_input_len synthetic tokens");
ABSL_FLAG(int, long_input_len, 4000, "mixed workload: prompt tokens of a long-document request");
ABSL_FLAG(int, long_output_len, 64, "mixed workload: output tokens of a long-document request");
ABSL_FLAG(std::string, goodput, "",
          "SLOs in ms, e.g. 'ttft_ms:2000,itl_ms:150' (keys ttft_ms, tpot_ms, itl_ms = the "
          "request's p90 gap, e2e_ms): also report goodput, the requests/s meeting all of them");
ABSL_FLAG(std::string, out_json, "", "write results here");
ABSL_FLAG(bool, progress, true, "progress bar on stderr");

namespace rill::bench {
namespace {

int Run() {
  std::vector<int> levels;
  for (absl::string_view part : absl::StrSplit(absl::GetFlag(FLAGS_concurrency), ',')) {
    int c = 0;
    if (!absl::SimpleAtoi(part, &c) || c < 1) {
      std::cerr << "error: --concurrency must be a list of integers >= 1, got '"
                << absl::GetFlag(FLAGS_concurrency) << "'\n";
      return 2;
    }
    levels.push_back(c);
  }
  if (absl::GetFlag(FLAGS_warmup_requests) < 0) {
    std::cerr << "error: --warmup_requests must be >= 0\n";
    return 2;
  }
  std::optional<SloSpec> slo;
  if (!absl::GetFlag(FLAGS_goodput).empty()) {
    absl::StatusOr<SloSpec> parsed = ParseSloSpec(absl::GetFlag(FLAGS_goodput));
    if (!parsed.ok()) {
      std::cerr << "error: " << parsed.status().message() << "\n";
      return 2;
    }
    slo = *parsed;
  }
  const std::string backend_name = absl::GetFlag(FLAGS_backend);
  const std::string address = absl::GetFlag(FLAGS_address);
  const auto epoch = BenchClock::now();
  std::unique_ptr<Backend> backend;
  if (backend_name == "rill") {
    backend = std::make_unique<RillBackend>(epoch, address, absl::GetFlag(FLAGS_connections));
  } else if (backend_name == "llama-server") {
    backend = std::make_unique<LlamaServerBackend>(epoch, address);
  } else if (backend_name == "openai") {
    if (absl::GetFlag(FLAGS_model_name).empty()) {
      std::cerr << "error: --backend=openai needs --model_name (an id from GET /v1/models)\n";
      return 2;
    }
    backend = std::make_unique<OpenAiBackend>(epoch, address, absl::GetFlag(FLAGS_model_name));
  } else {
    std::cerr << "error: --backend must be rill, llama-server or openai, got '" << backend_name
              << "'\n";
    return 2;
  }

  std::vector<LevelResult> results;
  std::string workload_desc;
  for (size_t level_index = 0; level_index < levels.size(); ++level_index) {
    const int concurrency = levels[level_index];
    const int n = absl::GetFlag(FLAGS_num_requests) > 0 ? absl::GetFlag(FLAGS_num_requests)
                                                         : std::max(8, 2 * concurrency);
    const int warmup = absl::GetFlag(FLAGS_warmup_requests);
    absl::StatusOr<std::vector<BenchRequest>> requests;
    if (!absl::GetFlag(FLAGS_dataset).empty()) {
      // The extra ones are the warm-up's own prompts (see below): the next
      // lines of the file, so a measured prompt is not warmed into a cache.
      requests = LoadDataset(absl::GetFlag(FLAGS_dataset), n + warmup,
                             absl::GetFlag(FLAGS_output_len));
      workload_desc = absl::StrCat("dataset ", absl::GetFlag(FLAGS_dataset));
    } else {
      SyntheticOptions so;
      // The extra ones are the warm-up's own prompts (see below).
      so.num_requests = n + warmup;
      so.input_len = absl::GetFlag(FLAGS_input_len);
      so.input_len_range = absl::GetFlag(FLAGS_input_len_range);
      so.output_len = absl::GetFlag(FLAGS_output_len);
      so.output_len_range = absl::GetFlag(FLAGS_output_len_range);
      so.shared_prefix_len = absl::GetFlag(FLAGS_shared_prefix_len);
      // Fresh prompts per level, so no level finds the previous level's
      // prompts in a server's cache (the shared prefix stays shared).
      so.seed = absl::GetFlag(FLAGS_seed) * 1000003 + level_index;
      requests = SyntheticWorkload(so);
      workload_desc = absl::StrCat("synthetic in=", so.input_len, " out=", so.output_len,
                                   " shared_prefix=", so.shared_prefix_len);
    }
    if (!requests.ok()) {
      std::cerr << "error: " << requests.status().message() << "\n";
      return 2;
    }
    if (absl::GetFlag(FLAGS_long_fraction) > 0) {
      LongPromptOptions lp;
      lp.fraction = absl::GetFlag(FLAGS_long_fraction);
      lp.input_len = absl::GetFlag(FLAGS_long_input_len);
      lp.output_len = absl::GetFlag(FLAGS_long_output_len);
      lp.seed = absl::GetFlag(FLAGS_seed) * 1000003 + level_index;
      // Only the measured requests: the warm-up pool (the list's tail, split
      // off below) stays short.
      std::vector<BenchRequest> measured(requests->begin(), requests->begin() + n);
      if (absl::Status s = MixInLongPrompts(lp, &measured); !s.ok()) {
        std::cerr << "error: " << s.message() << "\n";
        return 2;
      }
      std::copy(measured.begin(), measured.end(), requests->begin());
      workload_desc += absl::StrCat(" + ", lp.fraction, " long (in=", lp.input_len,
                                    " out=", lp.output_len, ")");
    }
    LoadOptions lo;
    lo.concurrency = concurrency;
    lo.request_rate = absl::GetFlag(FLAGS_request_rate);
    lo.warmup_requests = warmup;
    // Warm-up prompts come from the end of the list and are not measured
    // again (a measured request must not hit its own warm-up in a cache).
    if (warmup > 0) {
      lo.warmup_pool.assign(requests->begin() + n, requests->end());
      requests->resize(n);
    }
    lo.duration_s = absl::GetFlag(FLAGS_duration_s);
    lo.seed = absl::GetFlag(FLAGS_seed);
    ProgressBar bar(absl::StrCat(backend_name, " c=", concurrency), n, StderrIsTerminal());
    ProgressFn progress = nullptr;
    if (absl::GetFlag(FLAGS_progress)) {
      progress = [&bar](const RequestRecord& r) { bar.Add(r.ok, r.output_tokens); };
    }
    absl::StatusOr<std::vector<RequestRecord>> records = RunLoad(backend.get(), *requests, lo, progress);
    if (absl::GetFlag(FLAGS_progress)) bar.Finish();
    if (!records.ok()) {
      std::cerr << "error: " << records.status().message() << "\n";
      return 2;
    }
    LevelResult level{concurrency, lo.request_rate, SummarizeRun(*records)};
    if (slo) level.goodput = ComputeGoodput(*records, *slo, level.summary.duration_s);
    for (const std::string& e : level.summary.first_errors) {
      std::cerr << backend_name << " c=" << concurrency << " error: " << e << "\n";
    }
    results.push_back(std::move(level));
  }
  std::cout << ResultsToTable(backend_name, results) << std::flush;
  if (const std::string path = absl::GetFlag(FLAGS_out_json); !path.empty()) {
    std::ofstream out(path);
    out << ResultsToJson(backend_name, address, workload_desc, results,
                         slo ? slo->ToString() : "");
    if (!out) {
      std::cerr << "error: cannot write " << path << "\n";
      return 1;
    }
  }
  // Any failed request makes the run fail, so scripts notice.
  for (const LevelResult& l : results) {
    if (l.summary.errors > 0) return 1;
  }
  return 0;
}

}  // namespace
}  // namespace rill::bench

int main(int argc, char** argv) {
  google::InitGoogleLogging(argv[0]);
  const char* usage = "rill-bench-serve --backend=rill|llama-server|openai --address=host:port ...";
  rill::base::HandleHelpFlag(argc, argv, {usage, {"bench/serve_bench/serve_bench_main.cc"}});
  absl::SetProgramUsageMessage(usage);
  absl::ParseCommandLine(argc, argv);
  return rill::bench::Run();
}
