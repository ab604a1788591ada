// Streaming overhead of the service: one greedy stream through
// rill-frontend + rill-engine (separate processes, gRPC on 127.0.0.1)
// against the same request on the in-process AsyncLLMEngine, same machine,
// same run. Prints decode tokens/s and time to first token for both and the
// ratios (targets: tokens/s >= 0.95x, TTFT added < 2 ms at idle).
//
//   bazel build -c opt //bench/service_overhead:service_overhead_bench
//       //engine/service:rill-engine //frontend:rill-frontend   (one command line)
//   bazel-bin/bench/service_overhead/service_overhead_bench --threads=2
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <glog/logging.h>
#include <grpcpp/grpcpp.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cli/server_launcher.h"
#include "engine/async_llm_engine.h"
#include "engine/engine_factory.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "rill/v1/inference.grpc.pb.h"

ABSL_FLAG(int, threads, 2, "Engine threads (both sides).");
ABSL_FLAG(int, gen_tokens, 128, "Tokens per decode-rate stream.");
ABSL_FLAG(int, rate_reps, 3, "Decode-rate streams per side.");
ABSL_FLAG(int, ttft_reps, 20, "Short requests per side for TTFT (median reported).");
ABSL_FLAG(int, ttft_tokens, 2, "max_tokens of the TTFT requests.");
ABSL_FLAG(std::string, prompt, "The history of the river is", "Prompt text.");
ABSL_FLAG(std::string, engine_binary, "", "Default: bazel-bin layout.");
ABSL_FLAG(std::string, frontend_binary, "", "Default: bazel-bin layout.");

namespace {

struct Sample {
  double ttft_ms = 0;      // Request sent -> first token seen.
  double decode_tps = 0;   // Tokens after the first / time after the first.
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

Sample InProcess(rill::engine::AsyncLLMEngine* eng, int tokens, int rep) {
  rill::engine::SamplingParams sp;
  sp.temperature = 0.0f;
  sp.max_tokens = tokens;
  sp.ignore_eos = true;
  sp.output_kind = rill::engine::OutputKind::kDelta;
  const absl::Time t0 = absl::Now();
  auto stream = eng->Generate(absl::GetFlag(FLAGS_prompt), sp, absl::StrCat("inproc-", rep));
  CHECK(stream.ok()) << stream.status();
  absl::Time first = absl::InfinitePast();
  int seen = 0;
  while (true) {
    absl::StatusOr<rill::engine::RequestOutput> o = (*stream)->Next(absl::Seconds(300));
    if (!o.ok()) break;
    for (const auto& c : o->outputs) seen += static_cast<int>(c.token_ids.size());
    if (seen > 0 && first == absl::InfinitePast()) first = absl::Now();
    if (o->finished) break;
  }
  const absl::Time end = absl::Now();
  Sample s;
  s.ttft_ms = absl::ToDoubleMilliseconds(first - t0);
  s.decode_tps = (seen - 1) / absl::ToDoubleSeconds(end - first);
  return s;
}

Sample OverGrpc(rill::v1::Inference::Stub* stub, int tokens, int rep) {
  grpc::ClientContext ctx;
  auto stream = stub->Generate(&ctx);
  rill::v1::GenerateRequest req;
  auto* start = req.mutable_start();
  start->set_request_id(absl::StrCat("grpc-", rep, "-", tokens));
  start->set_text(absl::GetFlag(FLAGS_prompt));
  start->mutable_sampling()->set_temperature(0.0f);
  start->mutable_sampling()->set_max_tokens(tokens);
  start->mutable_sampling()->set_ignore_eos(true);
  start->set_output_mode(rill::v1::OUTPUT_MODE_DELTA);
  const absl::Time t0 = absl::Now();
  CHECK(stream->Write(req));
  stream->WritesDone();
  absl::Time first = absl::InfinitePast();
  int seen = 0;
  rill::v1::GenerateResponse resp;
  while (stream->Read(&resp)) {
    CHECK_EQ(resp.status().code(), 0) << resp.status().message();
    for (const auto& c : resp.outputs()) seen += c.token_ids_size();
    if (seen > 0 && first == absl::InfinitePast()) first = absl::Now();
  }
  const absl::Time end = absl::Now();
  CHECK(stream->Finish().ok());
  Sample s;
  s.ttft_ms = absl::ToDoubleMilliseconds(first - t0);
  s.decode_tps = (seen - 1) / absl::ToDoubleSeconds(end - first);
  return s;
}

template <typename Fn>
void Measure(Fn run, std::vector<double>* tps, std::vector<double>* ttft) {
  run(4, -1);  // Warm-up.
  for (int r = 0; r < absl::GetFlag(FLAGS_rate_reps); ++r) {
    tps->push_back(run(absl::GetFlag(FLAGS_gen_tokens), r).decode_tps);
  }
  for (int r = 0; r < absl::GetFlag(FLAGS_ttft_reps); ++r) ttft->push_back(run(absl::GetFlag(FLAGS_ttft_tokens), 1000 + r).ttft_ms);
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = 1;
  const int threads = absl::GetFlag(FLAGS_threads);

  std::vector<double> local_tps, local_ttft, svc_tps, svc_ttft;
  {
    rill::engine::EngineArgs args;
    args.threads = threads;
    auto eng = rill::engine::CreateAsyncLLMEngine(args);
    CHECK(eng.ok()) << eng.status();
    Measure([&](int n, int r) { return InProcess(eng->get(), n, r); }, &local_tps, &local_ttft);
  }

  rill::cli::LaunchOptions lo;
  lo.port = 0;
  lo.engine_binary = absl::GetFlag(FLAGS_engine_binary);
  if (lo.engine_binary.empty()) lo.engine_binary = rill::cli::FindRillBinary("rill-engine", "engine/service");
  lo.frontend_binary = absl::GetFlag(FLAGS_frontend_binary);
  if (lo.frontend_binary.empty()) lo.frontend_binary = rill::cli::FindRillBinary("rill-frontend", "frontend");
  lo.engine_flags = {"--model=default", absl::StrCat("--threads=", threads)};
  char tmpl[] = "/tmp/rill-overhead.XXXXXX";
  lo.run_dir = mkdtemp(tmpl);
  lo.log_to_files = true;
  rill::cli::ServerLauncher launcher(lo);
  absl::Status s = launcher.Start();
  CHECK(s.ok()) << s;
  auto channel = grpc::CreateChannel(launcher.address(), grpc::InsecureChannelCredentials());
  auto health = grpc::health::v1::Health::NewStub(channel);
  for (int i = 0; i < 600; ++i) {
    grpc::ClientContext ctx;
    grpc::health::v1::HealthCheckResponse resp;
    if (health->Check(&ctx, {}, &resp).ok() &&
        resp.status() == grpc::health::v1::HealthCheckResponse::SERVING) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  auto stub = rill::v1::Inference::NewStub(channel);
  Measure([&](int n, int r) { return OverGrpc(stub.get(), n, r); }, &svc_tps, &svc_ttft);
  launcher.Stop();

  const double lt = Median(local_tps), st = Median(svc_tps);
  const double lf = Median(local_ttft), sf = Median(svc_ttft);
  std::printf("\n| measure (median) | in-process engine | service (frontend+engine) | ratio / added |\n");
  std::printf("| --- | --- | --- | --- |\n");
  std::printf("| decode tokens/s, one stream of %d | %.1f | %.1f | %.3fx |\n",
              absl::GetFlag(FLAGS_gen_tokens), lt, st, st / lt);
  std::printf("| time to first token, ms | %.2f | %.2f | +%.2f ms |\n", lf, sf, sf - lf);
  std::printf("\nthreads=%d rate_reps=%d ttft_reps=%d\n", threads, absl::GetFlag(FLAGS_rate_reps),
              absl::GetFlag(FLAGS_ttft_reps));
  return 0;
}
