// AsyncEngine::Encode: embeddings from pooled final hidden states.
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "engine/async_engine.h"

namespace rill::engine {
namespace {

// kDefault is the model's own pooling when its files name one (a GGUF's
// pooling_type, sentence-transformers' Pooling module: CLS for BGE, MEAN for
// MiniLM), else MEAN for encoders and LAST for decoders.
worker::PoolingType ToWorker(PoolingType type, bool encoder,
                             worker::loader::ModelConfig::Pooling model) {
  switch (type) {
    case PoolingType::kMean: return worker::PoolingType::kMean;
    case PoolingType::kCls: return worker::PoolingType::kCls;
    case PoolingType::kLast: return worker::PoolingType::kLast;
    case PoolingType::kDefault: break;
  }
  switch (model) {
    case worker::loader::ModelConfig::Pooling::kMean: return worker::PoolingType::kMean;
    case worker::loader::ModelConfig::Pooling::kCls: return worker::PoolingType::kCls;
    case worker::loader::ModelConfig::Pooling::kLast: return worker::PoolingType::kLast;
    case worker::loader::ModelConfig::Pooling::kUnset: break;
  }
  return encoder ? worker::PoolingType::kMean : worker::PoolingType::kLast;
}

}  // namespace

absl::Status AsyncEngine::EncodeAsync(std::vector<int32_t> ids, const PoolingParams& params,
                                      const std::string& request_id,
                                      EmbeddingCallback callback) {
  if (absl::Status dead = DeadError(); !dead.ok()) return dead;
  if (!running_) return absl::UnavailableError("the engine is not running");
  if (!callback) return absl::InvalidArgumentError("callback is empty");
  if (request_id.empty()) return absl::InvalidArgumentError("request_id is empty");
  if (!executor_->can_pool()) {
    return absl::UnimplementedError("this model does not support pooling (embeddings)");
  }
  const worker::loader::ModelConfig& cfg = executor_->model_config();
  if (ids.empty()) return absl::InvalidArgumentError("the prompt is empty");
  const int64_t max_len = config_.model.max_model_len;
  if (static_cast<int64_t>(ids.size()) > max_len) {
    return absl::InvalidArgumentError(absl::StrCat("the prompt has ", ids.size(),
                                                   " tokens, more than max_model_len ", max_len));
  }
  for (int32_t id : ids) {
    if (id < 0 || id >= cfg.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", id, " is outside the vocabulary of ", cfg.vocab_size));
    }
  }
  if (params.dimensions < 0 || params.dimensions > cfg.hidden_size) {
    return absl::InvalidArgumentError(absl::StrCat("dimensions ", params.dimensions,
                                                   " is outside [0, ", cfg.hidden_size,
                                                   "] (the model's hidden size)"));
  }
  PendingEncode p;
  p.request_id = request_id;
  p.ids = std::move(ids);
  p.spec.type = ToWorker(params.type, executor_->is_encoder(), cfg.pooling);
  p.spec.normalize = params.normalize;
  p.spec.dimensions = params.dimensions;
  p.callback = std::move(callback);
  auto shared = std::make_shared<PendingEncode>(std::move(p));
  Post([this, shared] { pending_encodes_.push_back(std::move(*shared)); });
  return absl::OkStatus();
}

absl::StatusOr<EmbeddingOutput> AsyncEngine::Encode(std::vector<int32_t> ids,
                                                    const PoolingParams& params,
                                                    const std::string& request_id) {
  auto done = std::make_shared<absl::Notification>();
  auto result = std::make_shared<absl::StatusOr<EmbeddingOutput>>();
  absl::Status s = EncodeAsync(std::move(ids), params, request_id,
                               [done, result](absl::StatusOr<EmbeddingOutput> r) {
                                 *result = std::move(r);
                                 done->Notify();
                               });
  if (!s.ok()) return s;
  done->WaitForNotification();
  return *result;
}

void AsyncEngine::FailEncodes(const absl::Status& status) {
  std::vector<PendingEncode> pending;
  pending.swap(pending_encodes_);
  for (PendingEncode& p : pending) p.callback(status);
}

void AsyncEngine::RunEncodes() {
  BlockManager& blocks = core_->block_manager();
  const bool encoder = executor_->is_encoder();
  while (!pending_encodes_.empty()) {
    // A decoder needs KV blocks for the prompt while it runs; they are lent
    // by the block manager under sequence ids no request uses (negative) and
    // returned right after, never entering the prefix cache.
    worker::ForwardBatch batch;
    std::vector<int64_t> seq_ids;
    size_t taken = 0;
    for (; taken < pending_encodes_.size() &&
           static_cast<int>(taken) < std::max(1, args_.max_num_seqs);
         ++taken) {
      const PendingEncode& p = pending_encodes_[taken];
      worker::SequenceChunk chunk;
      chunk.tokens = p.ids;
      chunk.return_hidden = true;
      if (!encoder) {
        const int64_t seq_id = -1 - next_encode_seq_++;
        if (!blocks.Allocate(seq_id, static_cast<int64_t>(p.ids.size()))) break;
        chunk.block_table = blocks.BlockTable(seq_id);
        seq_ids.push_back(seq_id);
      }
      batch.sequences.push_back(std::move(chunk));
    }
    if (taken == 0) {
      // Not even the first fits now: it would need more blocks than are free.
      PendingEncode p = std::move(pending_encodes_.front());
      pending_encodes_.erase(pending_encodes_.begin());
      p.callback(absl::ResourceExhaustedError(absl::StrCat(
          "not enough free KV cache blocks to embed a ", p.ids.size(), "-token prompt now")));
      continue;
    }
    worker::ForwardOutput out;
    absl::Status s = executor_->Execute(batch, &out);
    for (int64_t id : seq_ids) blocks.Free(id);
    std::vector<PendingEncode> done(std::make_move_iterator(pending_encodes_.begin()),
                                    std::make_move_iterator(pending_encodes_.begin() + taken));
    pending_encodes_.erase(pending_encodes_.begin(), pending_encodes_.begin() + taken);
    const int64_t width = executor_->model_config().hidden_size;
    for (size_t i = 0; i < done.size(); ++i) {
      PendingEncode& p = done[i];
      if (!s.ok()) {
        p.callback(s);
        continue;
      }
      if (i >= out.hidden.size() ||
          out.hidden[i].size() != p.ids.size() * static_cast<size_t>(width)) {
        p.callback(absl::InternalError("the executor returned no hidden states"));
        continue;
      }
      absl::StatusOr<std::vector<float>> e =
          worker::Pool(out.hidden[i].data(), p.ids.size(), width, p.spec);
      if (!e.ok()) {
        p.callback(e.status());
        continue;
      }
      EmbeddingOutput o;
      o.request_id = p.request_id;
      o.embedding = std::move(*e);
      o.num_prompt_tokens = static_cast<int64_t>(p.ids.size());
      p.callback(std::move(o));
    }
  }
}

}  // namespace rill::engine
