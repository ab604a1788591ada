#include "cli/model_session.h"

#include <algorithm>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/max_model_len.h"
#include "engine/model_path.h"
#include "engine/tokenizer_loader.h"

namespace rill::cli {

absl::StatusOr<std::unique_ptr<ModelSession>> ModelSession::Open(
    const ModelSessionOptions& options) {
  auto session = std::unique_ptr<ModelSession>(new ModelSession());
  session->options_ = options;
  const std::string path = engine::ResolveModelPath(options.model);
  absl::StatusOr<std::unique_ptr<loader::Checkpoint>> ckpt = loader::LoadCheckpoint(path);
  if (!ckpt.ok()) return ckpt.status();
  session->checkpoint_ = std::move(*ckpt);
  absl::StatusOr<std::unique_ptr<tokenizer::BpeTokenizer>> tok =
      engine::LoadTokenizer(*session->checkpoint_);
  if (!tok.ok()) return tok.status();
  session->tokenizer_ = std::move(*tok);
  session->pool_ = std::make_unique<cpu::ThreadPool>(options.threads);
  absl::StatusOr<std::unique_ptr<worker::CausalLm>> model =
      worker::CreateCausalLm(session->checkpoint_, session->pool_.get(), options.model_options);
  if (!model.ok()) return model.status();
  session->model_ = std::move(*model);
  const int64_t model_context = session->model_->config().max_position_embeddings;
  const int ctx = static_cast<int>(
      engine::ResolveMaxModelLen(options.max_context, model_context).value_or(model_context));
  session->options_.max_context = ctx;
  const int blocks_per_seq = (ctx + options.block_size - 1) / options.block_size;
  absl::StatusOr<worker::PagedKvCache> cache = worker::PagedKvCache::Create(
      session->model_->CacheShape(blocks_per_seq * options.max_sequences, options.block_size,
                                  options.kv_cache_dtype));
  if (!cache.ok()) return cache.status();
  session->cache_ = std::make_unique<worker::PagedKvCache>(std::move(*cache));
  return session;
}

std::vector<int32_t> ModelSession::BlockTable(int slot) const {
  const int per_seq = (options_.max_context + options_.block_size - 1) / options_.block_size;
  std::vector<int32_t> table(per_seq);
  for (int i = 0; i < per_seq; ++i) table[i] = slot * per_seq + i;
  return table;
}

}  // namespace rill::cli
