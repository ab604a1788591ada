// AsyncLLMEngine::Create(EngineArgs): the in-process model. Kept apart from
// async_llm_engine.cc so engines over other executors (tests, the
// multi-process executor) do not link the model code.
#include "absl/strings/str_cat.h"
#include "engine/async_llm_engine.h"
#include "engine/local_model_executor.h"
#include "engine/model_path.h"
#include "engine/tokenizer_loader.h"

namespace rill::engine {

absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> AsyncLLMEngine::Create(const EngineArgs& args) {
  LocalExecutorOptions options;
  options.model_path = ResolveModelPath(args.model);
  options.num_blocks = args.num_kv_blocks;
  options.kv_cache_bytes = args.kv_cache_bytes;
  options.block_size = args.block_size;
  options.threads = args.threads;
  absl::StatusOr<std::unique_ptr<LocalModelExecutor>> executor =
      LocalModelExecutor::Create(options);
  if (!executor.ok()) return executor.status();
  absl::StatusOr<std::unique_ptr<tokenizer::BpeTokenizer>> tokenizer =
      LoadTokenizer((*executor)->checkpoint());
  if (!tokenizer.ok()) return tokenizer.status();
  EngineArgs resolved = args;
  resolved.model = options.model_path;
  return Create(resolved, std::move(*executor), std::move(*tokenizer));
}

}  // namespace rill::engine
