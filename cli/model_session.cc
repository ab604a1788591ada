#include "cli/model_session.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/max_model_len.h"
#include "engine/model_path.h"

namespace rill::cli {

absl::StatusOr<std::unique_ptr<ModelSession>> ModelSession::Open(
    const ModelSessionOptions& options) {
  auto session = std::unique_ptr<ModelSession>(new ModelSession());
  absl::StatusOr<std::unique_ptr<worker::loader::Checkpoint>> ckpt =
      worker::loader::LoadCheckpoint(engine::ResolveModelPath(options.model));
  if (!ckpt.ok()) return ckpt.status();
  session->checkpoint_ = std::move(*ckpt);
  session->pool_ = std::make_unique<kernels::cpu::ThreadPool>(options.threads);
  absl::StatusOr<std::unique_ptr<worker::CausalLm>> model =
      worker::CreateCausalLm(session->checkpoint_, session->pool_.get(), options.model_options);
  if (!model.ok()) return model.status();
  session->model_ = std::move(*model);
  const int64_t model_context = session->model_->config().max_position_embeddings;
  const int64_t ctx =
      engine::ResolveMaxModelLen(options.max_context, model_context).value_or(model_context);
  // Every sequence holds its blocks for the whole run: no prefix caching
  // (the benchmark's random tokens share nothing) and no freeing.
  const int blocks_per_seq = static_cast<int>((ctx + options.block_size - 1) / options.block_size);
  const int num_blocks = blocks_per_seq * options.max_sequences;
  session->blocks_ = std::make_unique<engine::BlockManager>(num_blocks, options.block_size,
                                                            /*enable_prefix_caching=*/false);
  for (int slot = 0; slot < options.max_sequences; ++slot) {
    if (!session->blocks_->Allocate(slot, ctx)) {
      return absl::InternalError("the KV cache is too small for the benchmark's sequences");
    }
  }
  absl::StatusOr<worker::PagedKvCache> cache = worker::PagedKvCache::Create(
      session->model_->CacheShape(num_blocks, options.block_size, options.kv_cache_dtype));
  if (!cache.ok()) return cache.status();
  session->cache_ = std::make_unique<worker::PagedKvCache>(std::move(*cache));
  return session;
}

}  // namespace rill::cli
