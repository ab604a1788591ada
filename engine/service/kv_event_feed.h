// The engine's prefix-cache events (block_manager.h) as the gateway
// protocol's KvEventBatch stream (VllmEngine/SubscribeKvEvents): one batch per
// cache change, numbered by a sequence that never goes back, a bounded
// history for subscribers that resume from a sequence number, and load
// records (EngineLoad) on every batch and as heartbeats while the cache is
// quiet. Block hashes are the engine's chain hashes (a block's hash names its
// whole prefix, parent_block_hash links a block to the one before it); the
// gateway indexes the blocks' token ids under its own content hashes and
// uses these to match removals.
#ifndef RILL_ENGINE_SERVICE_KV_EVENT_FEED_H_
#define RILL_ENGINE_SERVICE_KV_EVENT_FEED_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/sync_stream.h>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common.pb.h"
#include "engine/async_engine.h"

namespace rill::engine::service {

class KvEventFeed {
 public:
  // The load record attached to batches (any thread).
  using LoadSource = std::function<::smg::grpc::common::EngineLoad()>;

  // Starts listening to `engine`'s block manager; `engine` must outlive the
  // feed's Attach call only (the listener keeps the feed's state alive).
  static absl::StatusOr<std::unique_ptr<KvEventFeed>> Attach(engine::AsyncEngine* engine,
                                                             LoadSource load);
  ~KvEventFeed();

  // Streams batches after `start_sequence` (0: from now on) until the call
  // is cancelled or the feed closes. Runs on the gRPC handler thread.
  grpc::Status Serve(grpc::ServerContext* context, uint64_t start_sequence,
                     grpc::ServerWriter<::smg::grpc::common::KvEventBatch>* writer);

  // Ends every Serve (server shutdown).
  void Close();

  struct State;  // Shared with the engine's listener.

 private:
  KvEventFeed(std::shared_ptr<State> state, LoadSource load)
      : state_(std::move(state)), load_(std::move(load)) {}

  std::shared_ptr<State> state_;
  LoadSource load_;
};

}  // namespace rill::engine::service

#endif  // RILL_ENGINE_SERVICE_KV_EVENT_FEED_H_
