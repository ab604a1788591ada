// The in-process text API (vLLM's AsyncLLM shape): prompts as text or token
// ids, outputs with text. It wraps the token-only AsyncEngine with the input
// side (tokenization) and the output side (tokenizer::CompletionText per
// sample: incremental detokenization and stop strings, the same code the
// frontend uses). rill-engine serves AsyncEngine; tests, benchmarks and
// `rill generate` use this. Every method is thread-safe.
#ifndef RILL_ENGINE_ASYNC_LLM_ENGINE_H_
#define RILL_ENGINE_ASYNC_LLM_ENGINE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/async_engine.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/wordpiece_tokenizer.h"

namespace rill::engine {

// A prompt as text (tokenized with the model's tokenizer, special tokens
// added) or as token ids.
struct Prompt {
  Prompt(std::string text) : text(std::move(text)) {}  // NOLINT: implicit by design.
  Prompt(const char* text) : text(text) {}            // NOLINT
  Prompt(std::vector<int32_t> ids) : token_ids(std::move(ids)), is_tokens(true) {}  // NOLINT
  std::string text;
  std::vector<int32_t> token_ids;
  bool is_tokens = false;
};

class AsyncLLMEngine : public AsyncEngine {
 public:
  // With a given executor (tests, other executors; engine_factory.h builds
  // one from EngineArgs). `tokenizer` may be null: text prompts are then
  // rejected and outputs carry no text. It may be shared with the caller
  // (rill generate's chat template and this engine use one).
  static absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> Create(
      const EngineArgs& args, std::unique_ptr<ModelExecutor> executor,
      std::shared_ptr<const tokenizer::BpeTokenizer> tokenizer);

  ~AsyncLLMEngine() override;

  // The token-id forms stay available beside the Prompt forms.
  using AsyncEngine::Encode;
  using AsyncEngine::EncodeAsync;
  using AsyncEngine::Generate;
  using AsyncEngine::GenerateWithCallback;

  // See AsyncEngine::Generate; a text prompt is tokenized here (on the
  // caller's thread) and echoed in the outputs.
  absl::StatusOr<std::shared_ptr<RequestOutputStream>> Generate(
      const Prompt& prompt, const SamplingParams& params, const std::string& request_id,
      int priority = 0, absl::Time arrival_time = absl::InfinitePast(),
      const std::string& lora_name = "");
  absl::Status GenerateWithCallback(const Prompt& prompt, const SamplingParams& params,
                                    const std::string& request_id, OutputCallback callback,
                                    int priority = 0,
                                    absl::Time arrival_time = absl::InfinitePast(),
                                    const std::string& lora_name = "");
  // See AsyncEngine::EncodeAsync; text is tokenized with the encoder's
  // WordPiece tokenizer when there is one, else the BPE tokenizer.
  absl::Status EncodeAsync(const Prompt& prompt, const PoolingParams& params,
                           const std::string& request_id, EmbeddingCallback callback);
  absl::StatusOr<EmbeddingOutput> Encode(const Prompt& prompt, const PoolingParams& params,
                                         const std::string& request_id);

  const tokenizer::BpeTokenizer* GetTokenizer() const { return tokenizer_.get(); }
  // The WordPiece tokenizer of an encoder model (BERT) for text prompts of
  // Encode; engine_factory sets it. Call before the engine is shared.
  void SetEncoderTokenizer(std::unique_ptr<tokenizer::WordPieceTokenizer> t) {
    encoder_tokenizer_ = std::move(t);
  }
  const tokenizer::WordPieceTokenizer* GetEncoderTokenizer() const {
    return encoder_tokenizer_.get();
  }

 private:
  AsyncLLMEngine(const EngineArgs& args, std::unique_ptr<ModelExecutor> executor,
                 std::shared_ptr<const tokenizer::BpeTokenizer> tokenizer);
  // Generate's body: tokenizes, then AsyncEngine::Submit.
  absl::StatusOr<std::shared_ptr<RequestOutputStream>> SubmitPrompt(
      const Prompt& prompt, const SamplingParams& params, const std::string& request_id,
      int priority, absl::Time arrival_time, const std::string& lora_name,
      OutputCallback callback);
  // The prompt's token ids (text tokenized with special tokens added).
  absl::StatusOr<std::vector<int32_t>> TokenIds(const Prompt& prompt, bool for_encode) const;

  // Outlives the loop: the destructor stops it before members go.
  std::shared_ptr<const tokenizer::BpeTokenizer> tokenizer_;
  // Over tokenizer_: what the InputProcessor that tokenizes text prompts reads.
  std::unique_ptr<const tokenizer::Tokenizer> prompt_tokenizer_;
  std::unique_ptr<tokenizer::WordPieceTokenizer> encoder_tokenizer_;
};

}  // namespace rill::engine

#endif  // RILL_ENGINE_ASYNC_LLM_ENGINE_H_
