// A prompt as a client gives it (text, token ids or chat messages) turned
// into the token ids the engine runs: the chat template, tokenization and
// the checks that need the tokenizer, written once for the frontend, the
// in-process AsyncLLMEngine and `rill generate` (vLLM v1's InputProcessor).
#ifndef RILL_TOKENIZER_INPUT_PROCESSOR_H_
#define RILL_TOKENIZER_INPUT_PROCESSOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace rill::tokenizer {

struct PromptInput {
  enum class Kind { kText, kTokenIds, kChat };
  Kind kind = Kind::kText;
  std::string text;                  // kText.
  std::vector<int32_t> token_ids;    // kTokenIds.
  std::vector<ChatMessage> messages;  // kChat.
  // kText: add the tokenizer's special tokens (BOS). A chat template places
  // its own, so kChat never adds them.
  bool add_special_tokens = true;
  // kChat: add_generation_prompt, continue_final_message, chat_template_kwargs,
  // tools and documents (bos_token and eos_token are the model's).
  ChatTemplateOptions chat_options;
  // kChat: the request's own chat template; empty: the model's.
  std::string chat_template;

  static PromptInput Text(std::string text, bool add_special_tokens = true);
  static PromptInput Chat(std::vector<ChatMessage> messages, bool add_generation_prompt = true);
};

struct ProcessedPrompt {
  std::vector<int32_t> token_ids;
  std::string text;  // kChat: the rendered template (the prompt echoed to clients); else "".
};

// Thread-safe (the tokenizer is immutable); the tokenizer must outlive it.
class InputProcessor {
 public:
  explicit InputProcessor(const Tokenizer* tokenizer) : tokenizer_(tokenizer) {}

  // Errors name the field at fault: INVALID_ARGUMENT for a token id outside
  // the vocabulary, an empty chat, contradicting chat options, a request
  // chat_template that does not parse or a template that rejects the
  // messages; FAILED_PRECONDITION when the chat template is not supported.
  absl::StatusOr<ProcessedPrompt> Process(const PromptInput& input) const;

 private:
  const Tokenizer* tokenizer_;
};

}  // namespace rill::tokenizer

#endif  // RILL_TOKENIZER_INPUT_PROCESSOR_H_
