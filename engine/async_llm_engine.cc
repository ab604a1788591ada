#include "engine/async_llm_engine.h"

#include <utility>

#include "tokenizer/completion_text.h"
#include "tokenizer/input_processor.h"

namespace rill::engine {
namespace {

// A sample's text through the tokenizer layer's CompletionText.
class TokenizerSampleText : public SampleText {
 public:
  TokenizerSampleText(const tokenizer::BpeTokenizer* tokenizer, const SamplingParams& params)
      : text_(tokenizer, params.skip_special_tokens,
              tokenizer::StopStringOptions{params.stop, params.include_stop_str_in_output,
                                           params.min_tokens}) {}
  bool Push(int32_t token_id) override { return text_.Push(token_id); }
  void Finish() override { text_.Finish(); }
  const std::string& text() const override { return text_.text(); }
  const std::optional<std::string>& stop_string() const override { return text_.stop_string(); }

 private:
  tokenizer::CompletionText text_;
};

SampleTextFactory TextFactory(const tokenizer::BpeTokenizer* tokenizer) {
  if (tokenizer == nullptr) return nullptr;
  return [tokenizer](const SamplingParams& params) {
    return std::make_unique<TokenizerSampleText>(tokenizer, params);
  };
}

}  // namespace

absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> AsyncLLMEngine::Create(
    const EngineArgs& args, std::unique_ptr<ModelExecutor> executor,
    std::shared_ptr<const tokenizer::BpeTokenizer> tokenizer) {
  return CreateWith<AsyncLLMEngine>(
      args, std::move(executor),
      [&tokenizer](const EngineArgs& resolved, std::unique_ptr<ModelExecutor> executor) {
        return std::unique_ptr<AsyncLLMEngine>(
            new AsyncLLMEngine(resolved, std::move(executor), std::move(tokenizer)));
      });
}

AsyncLLMEngine::AsyncLLMEngine(const EngineArgs& args, std::unique_ptr<ModelExecutor> executor,
                               std::shared_ptr<const tokenizer::BpeTokenizer> tokenizer)
    : AsyncEngine(args, std::move(executor), TextFactory(tokenizer.get())),
      tokenizer_(std::move(tokenizer)),
      prompt_tokenizer_(tokenizer_ == nullptr ? nullptr : tokenizer::Tokenizer::FromBpe(tokenizer_)) {}

AsyncLLMEngine::~AsyncLLMEngine() { Stop(); }

absl::StatusOr<std::vector<int32_t>> AsyncLLMEngine::TokenIds(const Prompt& prompt,
                                                              bool for_encode) const {
  if (prompt.is_tokens) return prompt.token_ids;
  if (for_encode && encoder_tokenizer_ != nullptr) {
    return encoder_tokenizer_->Encode(prompt.text, /*add_special_tokens=*/true);
  }
  if (tokenizer_ == nullptr) {
    return absl::InvalidArgumentError("text prompts need a tokenizer; send token ids");
  }
  absl::StatusOr<tokenizer::ProcessedPrompt> processed =
      tokenizer::InputProcessor(prompt_tokenizer_.get())
          .Process(tokenizer::PromptInput::Text(prompt.text));
  if (!processed.ok()) return processed.status();
  return std::move(processed->token_ids);
}

absl::StatusOr<std::shared_ptr<RequestOutputStream>> AsyncLLMEngine::SubmitPrompt(
    const Prompt& prompt, const SamplingParams& params, const std::string& request_id,
    int priority, absl::Time arrival_time, const std::string& lora_name,
    OutputCallback callback) {
  if (absl::Status s = CheckGenerateAllowed(request_id); !s.ok()) return s;
  absl::StatusOr<std::vector<int32_t>> ids = TokenIds(prompt, /*for_encode=*/false);
  if (!ids.ok()) return ids.status();
  return Submit(std::move(*ids), prompt.is_tokens ? "" : prompt.text, params, request_id,
                priority, arrival_time, lora_name, std::move(callback));
}

absl::StatusOr<std::shared_ptr<RequestOutputStream>> AsyncLLMEngine::Generate(
    const Prompt& prompt, const SamplingParams& params, const std::string& request_id,
    int priority, absl::Time arrival_time, const std::string& lora_name) {
  return SubmitPrompt(prompt, params, request_id, priority, arrival_time, lora_name, nullptr);
}

absl::Status AsyncLLMEngine::GenerateWithCallback(const Prompt& prompt,
                                                  const SamplingParams& params,
                                                  const std::string& request_id,
                                                  OutputCallback callback, int priority,
                                                  absl::Time arrival_time,
                                                  const std::string& lora_name) {
  if (!callback) return absl::InvalidArgumentError("callback is empty");
  return SubmitPrompt(prompt, params, request_id, priority, arrival_time, lora_name,
                      std::move(callback))
      .status();
}

absl::Status AsyncLLMEngine::EncodeAsync(const Prompt& prompt, const PoolingParams& params,
                                         const std::string& request_id,
                                         EmbeddingCallback callback) {
  absl::StatusOr<std::vector<int32_t>> ids = TokenIds(prompt, /*for_encode=*/true);
  if (!ids.ok()) return ids.status();
  return AsyncEngine::EncodeAsync(std::move(*ids), params, request_id, std::move(callback));
}

absl::StatusOr<EmbeddingOutput> AsyncLLMEngine::Encode(const Prompt& prompt,
                                                       const PoolingParams& params,
                                                       const std::string& request_id) {
  absl::StatusOr<std::vector<int32_t>> ids = TokenIds(prompt, /*for_encode=*/true);
  if (!ids.ok()) return ids.status();
  return AsyncEngine::Encode(std::move(*ids), params, request_id);
}

}  // namespace rill::engine
