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
  EngineArgs resolved = args;
  resolved.model = options.model_path;
  if ((*executor)->is_encoder()) {
    // Encoders (BERT) come with a WordPiece tokenizer.json, used by Encode;
    // there is no BPE tokenizer and nothing to generate.
    const std::string& json = (*executor)->checkpoint().tokenizer().tokenizer_json;
    std::unique_ptr<tokenizer::WordPieceTokenizer> wordpiece;
    if (!json.empty()) {
      absl::StatusOr<std::unique_ptr<tokenizer::WordPieceTokenizer>> t =
          tokenizer::WordPieceTokenizer::FromTokenizerJson(json);
      if (!t.ok()) return t.status();
      wordpiece = std::move(*t);
    }
    absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> engine =
        Create(resolved, std::move(*executor), nullptr);
    if (engine.ok()) (*engine)->SetEncoderTokenizer(std::move(wordpiece));
    return engine;
  }
  absl::StatusOr<std::unique_ptr<tokenizer::BpeTokenizer>> tokenizer =
      LoadTokenizer((*executor)->checkpoint());
  if (!tokenizer.ok()) return tokenizer.status();
  return Create(resolved, std::move(*executor), std::move(*tokenizer));
}

}  // namespace rill::engine
