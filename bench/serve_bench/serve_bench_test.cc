// Tests of the serving benchmark client: statistics, workloads, the SSE
// reader, the load runner's concurrency and rate control, and every backend
// against small in-process servers (an HTTP/SSE one for llama-server and the
// OpenAI API, a gRPC Inference one for Rill).
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "bench/serve_bench/goodput.h"
#include "bench/serve_bench/http_sse_reader.h"
#include "bench/serve_bench/llama_server_backend.h"
#include "bench/serve_bench/load_runner.h"
#include "bench/serve_bench/openai_backend.h"
#include "bench/serve_bench/progress_bar.h"
#include "bench/serve_bench/results_json.h"
#include "bench/serve_bench/rill_backend.h"
#include "bench/serve_bench/run_summary.h"
#include "bench/serve_bench/workload.h"
#include "rill/v1/inference.grpc.pb.h"

namespace rill::bench {
namespace {

TEST(RunSummaryTest, PercentilesInterpolate) {
  EXPECT_DOUBLE_EQ(Percentile({}, 50), 0);
  EXPECT_DOUBLE_EQ(Percentile({3, 1, 2}, 50), 2);
  EXPECT_DOUBLE_EQ(Percentile({1, 2, 3, 4}, 50), 2.5);
  EXPECT_DOUBLE_EQ(Percentile({1, 2, 3, 4}, 100), 4);
  EXPECT_DOUBLE_EQ(Percentile({1, 2, 3, 4}, 0), 1);
  std::vector<double> v(101);
  for (int i = 0; i <= 100; ++i) v[i] = i;
  std::shuffle(v.begin(), v.end(), std::mt19937(7));
  EXPECT_DOUBLE_EQ(Percentile(v, 99), 99);
}

TEST(RunSummaryTest, LatenciesAndThroughput) {
  RequestRecord a;  // 3 tokens: first at 0.5 s, then one chunk of 2 at 1.5 s.
  a.start_s = 0;
  a.chunk_times_s = {0.5, 1.5};
  a.chunk_tokens = {1, 2};
  a.output_tokens = 3;
  a.prompt_tokens = 10;
  a.end_s = 1.5;
  a.ok = true;
  RequestRecord b;
  b.start_s = 1;
  b.end_s = 2;
  b.error = "boom";
  const RunSummary s = SummarizeRun({a, b});
  EXPECT_EQ(s.completed, 1);
  EXPECT_EQ(s.errors, 1);
  ASSERT_EQ(s.first_errors.size(), 1u);
  EXPECT_DOUBLE_EQ(s.duration_s, 2);
  EXPECT_DOUBLE_EQ(s.output_tokens_per_s, 1.5);
  EXPECT_DOUBLE_EQ(s.input_tokens_per_s, 5);
  EXPECT_DOUBLE_EQ(s.ttft.p50, 500);
  EXPECT_DOUBLE_EQ(s.tpot.mean, 500);  // (1.5 - 0.5) / 2.
  EXPECT_EQ(s.itl.count, 2);           // The 1 s gap spread over 2 tokens.
  EXPECT_DOUBLE_EQ(s.itl.mean, 500);
  EXPECT_DOUBLE_EQ(s.e2e.max, 1500);
}

// A successful request sent at `start` whose chunks (one token each)
// arrived at `times`.
RequestRecord Streamed(double start, std::vector<double> times) {
  RequestRecord r;
  r.start_s = start;
  r.chunk_times_s = times;
  r.chunk_tokens.assign(times.size(), 1);
  r.output_tokens = static_cast<int64_t>(times.size());
  r.end_s = times.empty() ? start : times.back();
  r.ok = true;
  return r;
}

TEST(GoodputTest, ParsesSpecsAndRejectsBadOnes) {
  absl::StatusOr<SloSpec> s = ParseSloSpec("ttft_ms:2000,itl_ms:150");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s->ttft_ms, 2000);
  EXPECT_EQ(*s->itl_ms, 150);
  EXPECT_FALSE(s->tpot_ms.has_value());
  EXPECT_EQ(s->ToString(), "ttft_ms:2000 itl_ms:150");
  s = ParseSloSpec("ttft_ms:500 tpot_ms:20.5  e2e_ms:9000");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s->tpot_ms, 20.5);
  EXPECT_EQ(*s->e2e_ms, 9000);
  for (const char* bad : {"", "ttft:2000", "ttft_ms", "ttft_ms:-1", "ttft_ms:0", "itl_ms:x",
                          "ttft_ms:1,ttft_ms:2", "ttft_ms:1:2"}) {
    absl::StatusOr<SloSpec> b = ParseSloSpec(bad);
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(b.status().message().find("--goodput"), std::string::npos) << b.status();
  }
}

TEST(GoodputTest, CountsRequestsMeetingEverySlo) {
  const SloSpec slo = *ParseSloSpec("ttft_ms:1000,itl_ms:100");
  std::vector<RequestRecord> records;
  // Meets both: TTFT 0.5 s, gaps 50 ms.
  records.push_back(Streamed(0.0, {0.5, 0.55, 0.60, 0.65}));
  // TTFT 1.5 s: misses.
  records.push_back(Streamed(0.0, {1.5, 1.55, 1.60}));
  // Gaps fine but one 2 s stall in 11 gaps: its p90 gap is over 100 ms.
  std::vector<double> stalled = {0.2};
  for (int i = 0; i < 9; ++i) stalled.push_back(stalled.back() + 0.05);
  stalled.push_back(stalled.back() + 2.0);
  stalled.push_back(stalled.back() + 2.0);
  records.push_back(Streamed(0.0, stalled));
  // One 2 s stall in 30 gaps: p90 stays at 50 ms, it meets the SLO.
  std::vector<double> rare = {0.2};
  for (int i = 0; i < 29; ++i) rare.push_back(rare.back() + 0.05);
  rare.push_back(rare.back() + 2.0);
  records.push_back(Streamed(0.0, rare));
  // Failed: never counts.
  RequestRecord failed = Streamed(0.0, {0.1, 0.12});
  failed.ok = false;
  records.push_back(failed);
  // Several tokens in one chunk: the gap is spread over them (3 x 40 ms).
  RequestRecord chunked = Streamed(0.0, {0.3, 0.42});
  chunked.chunk_tokens = {1, 3};
  chunked.output_tokens = 4;
  records.push_back(chunked);

  EXPECT_TRUE(MeetsSlo(records[0], slo));
  EXPECT_FALSE(MeetsSlo(records[1], slo));
  EXPECT_FALSE(MeetsSlo(records[2], slo));
  EXPECT_TRUE(MeetsSlo(records[3], slo));
  EXPECT_FALSE(MeetsSlo(records[4], slo));
  EXPECT_TRUE(MeetsSlo(records[5], slo));
  EXPECT_NEAR(RequestItlP90Seconds(records[5]), 0.04, 1e-9);
  const GoodputSummary g = ComputeGoodput(records, slo, 4.0);
  EXPECT_EQ(g.met, 3);
  EXPECT_DOUBLE_EQ(g.goodput, 3 / 4.0);
  EXPECT_DOUBLE_EQ(g.attainment, 3 / 6.0);
  // Only a TTFT SLO: the stalled request now meets it.
  EXPECT_EQ(ComputeGoodput(records, *ParseSloSpec("ttft_ms:1000"), 4.0).met, 4);
  // tpot and e2e.
  EXPECT_TRUE(MeetsSlo(records[0], *ParseSloSpec("tpot_ms:51,e2e_ms:700")));
  EXPECT_FALSE(MeetsSlo(records[0], *ParseSloSpec("tpot_ms:49")));
  EXPECT_FALSE(MeetsSlo(records[0], *ParseSloSpec("e2e_ms:600")));
  // A request with no token meets no TTFT SLO.
  EXPECT_FALSE(MeetsSlo(Streamed(0.0, {}), slo));
  EXPECT_EQ(ComputeGoodput({}, slo, 0).goodput, 0);
}

TEST(WorkloadTest, MixInLongPromptsReplacesAFixedShare) {
  SyntheticOptions so;
  so.num_requests = 40;
  so.input_len = 32;
  so.output_len = 16;
  std::vector<BenchRequest> a = *SyntheticWorkload(so);
  std::vector<BenchRequest> b = a;
  LongPromptOptions lp;
  lp.fraction = 0.1;
  lp.input_len = 3000;
  lp.output_len = 8;
  lp.seed = 5;
  ASSERT_TRUE(MixInLongPrompts(lp, &a).ok());
  ASSERT_TRUE(MixInLongPrompts(lp, &b).ok());
  int num_long = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].token_ids, b[i].token_ids) << "deterministic for a seed";
    if (a[i].token_ids.size() == 3000) {
      ++num_long;
      EXPECT_EQ(a[i].max_tokens, 8);
    } else {
      EXPECT_EQ(a[i].token_ids.size(), 32u);
    }
  }
  EXPECT_EQ(num_long, 4);
  lp.fraction = 1.5;
  EXPECT_FALSE(MixInLongPrompts(lp, &a).ok());
  lp.fraction = 0.5;
  lp.input_len = 0;
  EXPECT_FALSE(MixInLongPrompts(lp, &a).ok());
}

TEST(WorkloadTest, InputGroundedDatasetLoads) {
  absl::StatusOr<std::vector<BenchRequest>> d =
      LoadDataset("bench/serve_bench/data/input_grounded.jsonl", 1, 64);
  ASSERT_TRUE(d.ok()) << d.status();
  std::ifstream in("bench/serve_bench/data/input_grounded.jsonl");
  int lines = 0;
  for (std::string line; std::getline(in, line);) lines += line.empty() ? 0 : 1;
  EXPECT_GE(lines, 24);
}

TEST(WorkloadTest, SyntheticIsDeterministicWithSharedPrefix) {
  SyntheticOptions o;
  o.num_requests = 20;
  o.input_len = 64;
  o.input_len_range = 0.5;
  o.output_len = 16;
  o.shared_prefix_len = 24;
  o.seed = 3;
  auto a = SyntheticWorkload(o);
  auto b = SyntheticWorkload(o);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->size(), 20u);
  bool lengths_vary = false;
  for (size_t i = 0; i < a->size(); ++i) {
    const BenchRequest& r = (*a)[i];
    EXPECT_EQ(r.token_ids, (*b)[i].token_ids);
    EXPECT_GE(r.token_ids.size(), 32u);
    EXPECT_LE(r.token_ids.size(), 96u);
    EXPECT_TRUE(std::equal(r.token_ids.begin(), r.token_ids.begin() + 24,
                           (*a)[0].token_ids.begin()));
    for (int32_t t : r.token_ids) EXPECT_TRUE(t >= o.id_lo && t < o.id_hi);
    lengths_vary |= r.token_ids.size() != (*a)[0].token_ids.size();
  }
  EXPECT_TRUE(lengths_vary);
  o.seed = 4;
  EXPECT_NE(SyntheticWorkload(o)->front().token_ids, a->front().token_ids);
}

TEST(WorkloadTest, SyntheticRejectsBadOptions) {
  SyntheticOptions o;
  o.shared_prefix_len = o.input_len;
  EXPECT_FALSE(SyntheticWorkload(o).ok());
  o = SyntheticOptions();
  o.output_len = 0;
  EXPECT_FALSE(SyntheticWorkload(o).ok());
  o = SyntheticOptions();
  o.input_len_range = 1.5;
  EXPECT_FALSE(SyntheticWorkload(o).ok());
}

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/", name);
  std::ofstream(path) << text;
  return path;
}

TEST(WorkloadTest, DatasetParsesAndCycles) {
  const std::string path = WriteTemp(
      "ok.jsonl", "{\"prompt\": \"Hello \\u00e9\", \"output_len\": 7}\n\n{\"prompt_token_ids\": [5, 6]}\n");
  auto r = LoadDataset(path, 5, 32);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 5u);
  EXPECT_EQ((*r)[0].text, "Hello \xc3\xa9");
  EXPECT_EQ((*r)[0].max_tokens, 7);
  EXPECT_EQ((*r)[1].token_ids, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ((*r)[1].max_tokens, 32);
  EXPECT_EQ((*r)[4].text, (*r)[0].text);
}

TEST(WorkloadTest, DatasetErrorsNameFileAndLine) {
  const std::string path = WriteTemp("bad.jsonl", "{\"prompt\": \"a\"}\n{\"prompt\": 3}\n");
  auto r = LoadDataset(path, 2, 8);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("bad.jsonl:2"), std::string::npos) << r.status();
  EXPECT_FALSE(LoadDataset(WriteTemp("both.jsonl", "{\"prompt\":\"a\",\"prompt_token_ids\":[1]}\n"), 1, 8).ok());
  EXPECT_FALSE(LoadDataset(WriteTemp("trunc.jsonl", "{\"prompt\": \"a\"\n"), 1, 8).ok());
  EXPECT_EQ(LoadDataset("/nonexistent/x.jsonl", 1, 8).status().code(), absl::StatusCode::kNotFound);
}

TEST(HttpSseReaderTest, ChunkedEventsSplitAnywhere) {
  const std::string body = "data: {\"a\":1}\n\ndata: {\"b\":2}\r\n\r\n: comment\n\ndata: x\ndata: y\n\n";
  std::string http = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
  // Three chunks with boundaries inside events.
  const size_t cuts[] = {0, 5, 20, body.size()};
  for (int i = 0; i < 3; ++i) {
    const std::string part = body.substr(cuts[i], cuts[i + 1] - cuts[i]);
    char size[16];
    std::snprintf(size, sizeof(size), "%zx", part.size());
    http += absl::StrCat(size, "\r\n", part, "\r\n");
  }
  http += "0\r\n\r\n";
  for (size_t step : {1u, 3u, 7u, 1000u}) {
    HttpSseReader reader;
    std::vector<std::string> events;
    for (size_t off = 0; off < http.size(); off += step) {
      ASSERT_TRUE(reader.Feed(http.substr(off, step), &events).ok());
    }
    EXPECT_EQ(reader.status_code(), 200);
    EXPECT_EQ(events, (std::vector<std::string>{"{\"a\":1}", "{\"b\":2}", "x\ny"})) << step;
  }
}

TEST(HttpSseReaderTest, ErrorsAreReported) {
  HttpSseReader bad_status;
  std::vector<std::string> events;
  EXPECT_FALSE(bad_status.Feed("HTCPCP/1.0 418\r\n\r\n", &events).ok());
  HttpSseReader bad_chunk;
  EXPECT_FALSE(bad_chunk.Feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", &events).ok());
  HttpSseReader not_found;
  ASSERT_TRUE(not_found.Feed("HTTP/1.1 404 Not Found\r\n\r\nno such page", &events).ok());
  EXPECT_EQ(not_found.status_code(), 404);
  EXPECT_EQ(not_found.error_body(), "no such page");
  EXPECT_TRUE(events.empty());
}

// Counts concurrent Sends; each takes `hold`.
class CountingBackend : public Backend {
 public:
  explicit CountingBackend(std::chrono::milliseconds hold) : Backend(BenchClock::now()), hold_(hold) {}
  std::string name() const override { return "counting"; }
  void Send(const BenchRequest& request, RequestRecord* record) override {
    record->start_s = Now();
    const int now = ++in_flight_;
    int seen = max_in_flight_.load();
    while (now > seen && !max_in_flight_.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(hold_);
    record->chunk_times_s.push_back(Now());
    record->chunk_tokens.push_back(request.max_tokens);
    record->output_tokens = request.max_tokens;
    --in_flight_;
    ++sends_;
    record->end_s = Now();
    record->ok = true;
  }
  std::atomic<int> in_flight_{0}, max_in_flight_{0}, sends_{0};

 private:
  std::chrono::milliseconds hold_;
};

std::vector<BenchRequest> Requests(int n) {
  SyntheticOptions o;
  o.num_requests = n;
  o.input_len = 4;
  o.output_len = 3;
  return *SyntheticWorkload(o);
}

TEST(LoadRunnerTest, ConcurrencyIsHeldExactly) {
  CountingBackend backend(std::chrono::milliseconds(30));
  LoadOptions o;
  o.concurrency = 4;
  o.warmup_requests = 3;
  std::atomic<int> progressed{0};
  auto records = RunLoad(&backend, Requests(16), o, [&](const RequestRecord&) { ++progressed; });
  ASSERT_TRUE(records.ok());
  EXPECT_EQ(records->size(), 16u);
  EXPECT_EQ(backend.sends_.load(), 19);  // Warm-up included, not recorded.
  EXPECT_EQ(progressed.load(), 16);
  EXPECT_EQ(backend.max_in_flight_.load(), 4);
  EXPECT_EQ(SummarizeRun(*records).output_tokens, 48);
}

TEST(LoadRunnerTest, PoissonArrivalsFollowTheRate) {
  const std::vector<double> a = PoissonArrivals(20000, 50, 1);
  EXPECT_DOUBLE_EQ(a[0], 0);
  EXPECT_NEAR(a.back() / a.size(), 1.0 / 50, 0.001);
  for (size_t i = 1; i < a.size(); ++i) ASSERT_GE(a[i], a[i - 1]);
  CountingBackend backend(std::chrono::milliseconds(1));
  LoadOptions o;
  o.concurrency = 8;
  o.request_rate = 40;
  o.seed = 2;
  const auto start = std::chrono::steady_clock::now();
  auto records = RunLoad(&backend, Requests(20), o);
  ASSERT_TRUE(records.ok());
  // The last arrival time is a lower bound on the run's length.
  const double expected = PoissonArrivals(20, 40, 2).back();
  EXPECT_GE(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
            expected - 0.01);
}

TEST(LoadRunnerTest, DurationStopsSendingAndBadOptionsFail) {
  CountingBackend backend(std::chrono::milliseconds(20));
  LoadOptions o;
  o.concurrency = 2;
  o.duration_s = 0.1;
  auto records = RunLoad(&backend, Requests(1000), o);
  ASSERT_TRUE(records.ok());
  EXPECT_LT(records->size(), 100u);
  EXPECT_GT(records->size(), 0u);
  o.concurrency = 0;
  EXPECT_FALSE(RunLoad(&backend, Requests(2), o).ok());
  o.concurrency = 1;
  EXPECT_FALSE(RunLoad(&backend, {}, o).ok());
}

TEST(ResultsTest, JsonAndTableHaveTheFigures) {
  RequestRecord a;
  a.chunk_times_s = {0.25};
  a.chunk_tokens = {1};
  a.output_tokens = 1;
  a.end_s = 0.5;
  a.ok = true;
  std::vector<LevelResult> levels = {{4, 0, SummarizeRun({a})}};
  const std::string json = ResultsToJson("rill", "127.0.0.1:1", "synthetic \"x\"", levels);
  EXPECT_NE(json.find("\"concurrency\":4"), std::string::npos) << json;
  EXPECT_NE(json.find("\"p50_ms\":250.0000"), std::string::npos) << json;
  EXPECT_NE(json.find("synthetic \\\"x\\\""), std::string::npos) << json;
  EXPECT_NE(ResultsToTable("rill", levels).find("rill"), std::string::npos);
  EXPECT_EQ(json.find("goodput"), std::string::npos) << json;
  levels[0].goodput = GoodputSummary{1, 2.0, 1.0};
  const std::string with_goodput =
      ResultsToJson("rill", "127.0.0.1:1", "w", levels, "ttft_ms:2000 itl_ms:150");
  EXPECT_NE(with_goodput.find("\"slo\":\"ttft_ms:2000 itl_ms:150\""), std::string::npos)
      << with_goodput;
  EXPECT_NE(with_goodput.find("\"goodput\":{\"slo_met\":1,\"goodput\":2.0000,\"attainment\":1.0000}"),
            std::string::npos)
      << with_goodput;
  EXPECT_NE(ResultsToTable("rill", levels).find("goodput"), std::string::npos);
  ProgressBar bar("x", 4, false);
  bar.Add(true, 10);
  EXPECT_NE(bar.Render().find("1/4 req"), std::string::npos) << bar.Render();
}

// A one-request-at-a-time HTTP server that answers any POST with a chunked
// SSE stream of the given event payloads (or a 503 when status != 200).
class FakeSseServer {
 public:
  explicit FakeSseServer(std::vector<std::string> events, int status = 200)
      : events_(std::move(events)), status_(status) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    listen(fd_, 8);
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeSseServer() {
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  std::string last_request;

 private:
  void Serve() {
    int c = accept(fd_, nullptr, nullptr);
    if (c < 0) return;
    char buf[65536];
    std::string req;
    while (req.find("\r\n\r\n") == std::string::npos || req.find('}') == std::string::npos) {
      ssize_t n = recv(c, buf, sizeof(buf), 0);
      if (n <= 0) break;
      req.append(buf, n);
    }
    last_request = req;
    auto send_str = [c](const std::string& s) { send(c, s.data(), s.size(), MSG_NOSIGNAL); };
    if (status_ != 200) {
      send_str("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 7\r\n\r\nloading");
    } else {
      send_str("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n");
      for (const std::string& data : events_) {
        const std::string ev = absl::StrCat("data: ", data, "\n\n");
        char size[16];
        std::snprintf(size, sizeof(size), "%zx", ev.size());
        send_str(absl::StrCat(size, "\r\n", ev, "\r\n"));
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      send_str("0\r\n\r\n");
    }
    close(c);
  }
  std::vector<std::string> events_;
  int status_;
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

// Three one-token events and the final one, in llama-server's format.
std::vector<std::string> LlamaEvents() {
  std::vector<std::string> events;
  for (int i = 0; i < 3; ++i) {
    events.push_back(absl::StrCat("{\"content\":\"t", i, "\",\"tokens\":[", i, "],\"stop\":false}"));
  }
  events.push_back("{\"content\":\"\",\"stop\":true,\"tokens_predicted\":3,\"tokens_evaluated\":5}");
  return events;
}

TEST(LlamaServerBackendTest, StreamsAndCounts) {
  FakeSseServer server(LlamaEvents());
  LlamaServerBackend backend(BenchClock::now(), server.address());
  BenchRequest req;
  req.token_ids = {1, 2, 3, 4, 5};
  req.max_tokens = 3;
  RequestRecord r;
  backend.Send(req, &r);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.output_tokens, 3);
  EXPECT_EQ(r.prompt_tokens, 5);
  EXPECT_EQ(r.chunk_times_s.size(), 3u);
  EXPECT_GT(r.ttft_s(), 0);
  EXPECT_NE(server.last_request.find("\"prompt\":[1,2,3,4,5]"), std::string::npos);
  EXPECT_NE(server.last_request.find("\"n_predict\":3"), std::string::npos);
  EXPECT_NE(server.last_request.find("\"ignore_eos\":true"), std::string::npos);
}

TEST(LlamaServerBackendTest, HttpErrorAndRefusedConnection) {
  {
    FakeSseServer server({}, 503);
    LlamaServerBackend backend(BenchClock::now(), server.address());
    RequestRecord r;
    backend.Send(BenchRequest{"hi", {}, 2}, &r);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.error.find("503"), std::string::npos) << r.error;
  }
  LlamaServerBackend nobody(BenchClock::now(), "127.0.0.1:1");
  RequestRecord r;
  nobody.Send(BenchRequest{"hi", {}, 2}, &r);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("connect"), std::string::npos) << r.error;
  EXPECT_NE(LlamaCompletionBody(BenchRequest{"a\"b\n", {}, 2}).find("\"a\\\"b\\n\""), std::string::npos);
}

TEST(OpenAiBackendTest, StreamsCountsFromUsageAndStopsAtDone) {
  FakeSseServer server({
      R"({"id":"c","object":"text_completion","choices":[{"index":0,"text":"He","finish_reason":null}]})",
      R"({"id":"c","choices":[{"index":0,"text":"","finish_reason":null}]})",
      R"({"id":"c","choices":[{"index":0,"text":"llo","finish_reason":null}]})",
      R"({"id":"c","choices":[{"index":0,"text":"!","finish_reason":"length"}],"usage":null})",
      R"({"id":"c","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":4,"total_tokens":11}})",
      "[DONE]"});
  OpenAiBackend backend(BenchClock::now(), server.address(), "smol");
  BenchRequest req;
  req.text = "Say \"hi\"";
  req.max_tokens = 4;
  RequestRecord r;
  backend.Send(req, &r);
  ASSERT_TRUE(r.ok) << r.error;
  // Three events carried text; usage says four tokens (one event held two).
  EXPECT_EQ(r.chunk_times_s.size(), 3u);
  EXPECT_EQ(r.output_tokens, 4);
  EXPECT_EQ(r.prompt_tokens, 7);
  EXPECT_GT(r.ttft_s(), 0);
  const std::string& sent = server.last_request;
  EXPECT_NE(sent.find("POST /v1/completions "), std::string::npos) << sent;
  EXPECT_NE(sent.find(R"("model":"smol")"), std::string::npos) << sent;
  EXPECT_NE(sent.find(R"("prompt":"Say \"hi\"")"), std::string::npos) << sent;
  EXPECT_NE(sent.find(R"("max_tokens":4,"min_tokens":4)"), std::string::npos) << sent;
  EXPECT_NE(sent.find(R"("stream_options":{"include_usage":true})"), std::string::npos) << sent;
  EXPECT_NE(sent.find(R"("ignore_eos":true)"), std::string::npos) << sent;
  EXPECT_NE(OpenAiCompletionBody("m", BenchRequest{"", {5, 6}, 2}).find(R"("prompt":[5,6])"),
            std::string::npos);
}

TEST(OpenAiBackendTest, ErrorEventsAndTruncatedStreamsFail) {
  {
    FakeSseServer server({R"({"error":{"message":"model not found","code":404}})"});
    OpenAiBackend backend(BenchClock::now(), server.address(), "m");
    RequestRecord r;
    backend.Send(BenchRequest{"hi", {}, 2}, &r);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error, "model not found");
  }
  {
    // No [DONE]: the server closed mid-stream.
    FakeSseServer server({R"({"choices":[{"index":0,"text":"a"}]})"});
    OpenAiBackend backend(BenchClock::now(), server.address(), "m");
    RequestRecord r;
    backend.Send(BenchRequest{"hi", {}, 2}, &r);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.error.find("closed before the final event"), std::string::npos) << r.error;
  }
  {
    FakeSseServer server({}, 503);
    OpenAiBackend backend(BenchClock::now(), server.address(), "m");
    RequestRecord r;
    backend.Send(BenchRequest{"hi", {}, 2}, &r);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.error.find("HTTP 503"), std::string::npos) << r.error;
  }
}

// Streams max_tokens single-token deltas; fails requests whose prompt is empty.
class FakeInference : public v1::Inference::Service {
 public:
  grpc::Status Generate(grpc::ServerContext*,
                        grpc::ServerReaderWriter<v1::GenerateResponse, v1::GenerateRequest>* stream) override {
    v1::GenerateRequest req;
    while (stream->Read(&req)) {
      const v1::StartRequest& s = req.start();
      last_ignore_eos = s.sampling().ignore_eos();
      v1::GenerateResponse first;
      first.set_request_id("r");
      if (s.token_ids().ids_size() == 0) {
        first.set_finished(true);
        first.mutable_status()->set_code(3);
        first.mutable_status()->set_message("empty prompt");
        stream->Write(first);
        continue;
      }
      first.mutable_prompt_token_ids()->CopyFrom(s.token_ids().ids());
      stream->Write(first);
      for (int i = 0; i < s.sampling().max_tokens(); ++i) {
        v1::GenerateResponse r;
        r.set_request_id("r");
        r.add_outputs()->add_token_ids(i);
        r.set_finished(i + 1 == s.sampling().max_tokens());
        stream->Write(r);
      }
    }
    return grpc::Status::OK;
  }
  std::atomic<bool> last_ignore_eos{false};
};

TEST(RillBackendTest, StreamsCountsAndReportsErrors) {
  FakeInference service;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_GT(port, 0);
  RillBackend backend(BenchClock::now(), absl::StrCat("127.0.0.1:", port), 2);
  BenchRequest req;
  req.token_ids = {7, 8, 9};
  req.max_tokens = 4;
  RequestRecord r;
  backend.Send(req, &r);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.output_tokens, 4);
  EXPECT_EQ(r.prompt_tokens, 3);
  EXPECT_EQ(r.chunk_times_s.size(), 4u);
  EXPECT_TRUE(service.last_ignore_eos.load());
  RequestRecord bad;
  backend.Send(BenchRequest{"", {}, 2}, &bad);
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.error.find("empty prompt"), std::string::npos) << bad.error;
  server->Shutdown();
}

}  // namespace
}  // namespace rill::bench
