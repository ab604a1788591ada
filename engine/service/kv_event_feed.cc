#include "engine/service/kv_event_feed.h"

#include <vector>

#include "absl/time/clock.h"

namespace rill::engine::service {
namespace {

namespace common = ::smg::grpc::common;

// Batches kept for subscribers that resume from a sequence number.
constexpr size_t kHistoryBatches = 4096;
// A quiet cache still sends the load this often.
constexpr absl::Duration kHeartbeat = absl::Seconds(1);

double UnixSeconds() { return absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()); }

common::KvCacheEvent ToProto(const engine::KvCacheEvent& e, uint64_t event_id, int block_size) {
  common::KvCacheEvent out;
  out.set_event_id(event_id);
  switch (e.kind) {
    case engine::KvCacheEvent::Kind::kStored: {
      common::KvBlocksStored* stored = out.mutable_stored();
      common::KvBlock* block = stored->add_blocks();
      block->set_block_hash(static_cast<int64_t>(e.block_hash));
      for (int32_t t : e.token_ids) block->add_token_ids(static_cast<uint32_t>(t));
      block->set_block_size(block_size);
      if (e.parent_hash.has_value()) stored->set_parent_block_hash(static_cast<int64_t>(*e.parent_hash));
      stored->set_tier(common::KV_CACHE_TIER_DEVICE);
      stored->set_locality(common::KV_CACHE_LOCALITY_LOCAL);
      break;
    }
    case engine::KvCacheEvent::Kind::kRemoved:
      out.mutable_removed()->add_block_hashes(static_cast<int64_t>(e.block_hash));
      out.mutable_removed()->set_tier(common::KV_CACHE_TIER_DEVICE);
      break;
    case engine::KvCacheEvent::Kind::kCleared:
      out.mutable_cleared();
      break;
  }
  return out;
}

}  // namespace

struct KvEventFeed::State {
  int block_size = 0;
  absl::Mutex mu;
  uint64_t last_sequence ABSL_GUARDED_BY(mu) = 0;
  std::deque<common::KvEventBatch> history ABSL_GUARDED_BY(mu);  // Ascending sequences.
  bool closed ABSL_GUARDED_BY(mu) = false;

  void Publish(const engine::KvCacheEvent& e) {
    absl::MutexLock lock(&mu);
    common::KvEventBatch batch;
    batch.set_sequence_number(++last_sequence);
    batch.set_timestamp(UnixSeconds());
    batch.set_dp_rank(0);
    *batch.add_events() = ToProto(e, last_sequence, block_size);
    history.push_back(std::move(batch));
    if (history.size() > kHistoryBatches) history.pop_front();
  }
};

absl::StatusOr<std::unique_ptr<KvEventFeed>> KvEventFeed::Attach(engine::AsyncEngine* engine,
                                                                 LoadSource load) {
  auto state = std::make_shared<State>();
  state->block_size = engine->GetEngineConfig().cache.block_size;
  absl::Status s = engine->SetKvEventListener(
      [state](const engine::KvCacheEvent& e) { state->Publish(e); });
  if (!s.ok()) return s;
  return std::unique_ptr<KvEventFeed>(new KvEventFeed(std::move(state), std::move(load)));
}

KvEventFeed::~KvEventFeed() { Close(); }

void KvEventFeed::Close() {
  absl::MutexLock lock(&state_->mu);
  state_->closed = true;
}

grpc::Status KvEventFeed::Serve(grpc::ServerContext* context, uint64_t start_sequence,
                                grpc::ServerWriter<common::KvEventBatch>* writer) {
  uint64_t sent;  // The last sequence this subscriber got.
  {
    absl::MutexLock lock(&state_->mu);
    if (start_sequence == 0 || start_sequence > state_->last_sequence + 1) {
      sent = state_->last_sequence;
    } else {
      sent = start_sequence - 1;
    }
  }
  uint64_t sample = 0;
  absl::Time last_write = absl::InfinitePast();
  while (!context->IsCancelled()) {
    std::vector<common::KvEventBatch> batches;
    {
      absl::MutexLock lock(&state_->mu);
      auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
        return state_->closed || state_->last_sequence > sent;
      };
      state_->mu.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(100));
      if (state_->closed) break;
      for (const common::KvEventBatch& b : state_->history) {
        if (b.sequence_number() > sent) batches.push_back(b);
      }
    }
    if (batches.empty() && absl::Now() - last_write < kHeartbeat) continue;
    common::EngineLoad load = load_();
    if (batches.empty()) {
      // Heartbeat: repeats the last sequence sent, carries only the load.
      common::KvEventBatch beat;
      beat.set_sequence_number(sent);
      beat.set_timestamp(UnixSeconds());
      beat.set_dp_rank(0);
      batches.push_back(std::move(beat));
      load.set_load_only(true);
    }
    for (common::KvEventBatch& b : batches) {
      *b.mutable_load() = load;
      b.mutable_load()->set_sample(++sample);
      if (!writer->Write(b)) return grpc::Status(grpc::StatusCode::CANCELLED, "subscriber gone");
      sent = std::max(sent, b.sequence_number());
    }
    last_write = absl::Now();
  }
  return grpc::Status::OK;
}

}  // namespace rill::engine::service
