// Two rill-frontend replicas on one port in front of one rill-engine, 200
// concurrent client streams: every request completes exactly once and its
// greedy output equals the in-process engine's.
#include <atomic>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "engine/async_llm_engine.h"
#include "engine/engine_factory.h"
#include "tests/integration/service_stack.h"

namespace rill::tests::integration {
namespace {

constexpr int kTokens = 8;
constexpr int kStreams = 200;
constexpr int kChannels = 20;

std::vector<std::string> Prompts() {
  std::vector<std::string> p;
  for (int i = 0; i < 10; ++i) {
    p.push_back(absl::StrCat("Item ", i, ": a short note about the number ", i * 7 + 3, "."));
  }
  return p;
}

TEST(MultiFrontendTest, TwoHundredStreamsOverTwoFrontendsCompleteOnceWithEngineOutputs) {
  const std::vector<std::string> prompts = Prompts();
  std::map<std::string, std::vector<int32_t>> reference;
  {
    engine::EngineArgs args;
    args.threads = 2;
    auto eng = engine::CreateAsyncLLMEngine(args);
    ASSERT_TRUE(eng.ok()) << eng.status();
    std::vector<std::shared_ptr<engine::RequestOutputStream>> streams;
    for (const std::string& p : prompts) {
      engine::SamplingParams sp;
      sp.temperature = 0.0f;
      sp.max_tokens = kTokens;
      sp.ignore_eos = true;
      auto s = (*eng)->Generate(p, sp, p);
      ASSERT_TRUE(s.ok()) << s.status();
      streams.push_back(*s);
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
      engine::RequestOutput last;
      while (true) {
        absl::StatusOr<engine::RequestOutput> o = streams[i]->Next(absl::Seconds(120));
        if (!o.ok()) break;
        last = *o;
      }
      ASSERT_TRUE(last.finished);
      reference[prompts[i]] = last.outputs.at(0).token_ids;
    }
  }

  ServiceStack stack;
  StackOptions opts;
  opts.frontends = 2;
  opts.engine_flags = {"--max_num_seqs=64"};
  absl::Status started = stack.Start(opts);
  ASSERT_TRUE(started.ok()) << started;

  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::set<std::string> frontends_seen;
  for (int c = 0; c < kChannels; ++c) {
    channels.push_back(stack.NewChannel(c));
    auto stub = v1::Inference::NewStub(channels.back());
    grpc::ClientContext ctx;
    v1::Load load;
    ASSERT_TRUE(stub->GetLoad(&ctx, {}, &load).ok());
    frontends_seen.insert(load.frontend_id());
  }
  EXPECT_EQ(frontends_seen.size(), 2u) << "connections should reach both frontends";

  absl::Mutex mu;
  std::vector<std::string> failures;
  std::atomic<int> completed{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back([&, i] {
      auto stub = v1::Inference::NewStub(channels[i % kChannels]);
      const std::string& prompt = prompts[i % prompts.size()];
      const std::string id = absl::StrCat("mf-", i);
      absl::StatusOr<Collected> c = GenerateOnce(stub.get(), GreedyText(prompt, kTokens, id));
      std::string why;
      if (!c.ok()) {
        why = c.status().ToString();
      } else if (c->status.code() != 0) {
        why = c->status.message();
      } else if (c->request_id != id || c->num_finished != 1) {
        why = absl::StrCat("id ", c->request_id, ", finished ", c->num_finished, " times");
      } else if (c->token_ids != reference[prompt]) {
        why = "tokens differ from the in-process engine";
      }
      if (why.empty()) {
        completed.fetch_add(1);
      } else {
        absl::MutexLock l(&mu);
        failures.push_back(absl::StrCat(id, ": ", why));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(completed.load(), kStreams);
  for (size_t i = 0; i < failures.size() && i < 10; ++i) ADD_FAILURE() << failures[i];

  auto stub = v1::Inference::NewStub(channels[0]);
  grpc::ClientContext ctx;
  v1::Load load;
  ASSERT_TRUE(stub->GetLoad(&ctx, {}, &load).ok());
  EXPECT_EQ(load.num_unfinished_requests(), 0);
}

}  // namespace
}  // namespace rill::tests::integration
