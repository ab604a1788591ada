// A ChatPrompt as a client sends it turned into the tokenizer's chat input
// the way vLLM reads a chat request: the JSON fields parsed and checked,
// content parts kept (and joined, for templates that take a string),
// assistant tool-call arguments made objects.
#ifndef RILL_FRONTEND_CHAT_PROMPT_INPUT_H_
#define RILL_FRONTEND_CHAT_PROMPT_INPUT_H_

#include "absl/status/statusor.h"
#include "rill/v1/inference.pb.h"
#include "tokenizer/input_processor.h"

namespace rill::frontend {

// INVALID_ARGUMENT naming the field ("chat.tools: must be a JSON array",
// "chat.messages[1].tool_calls: not JSON: ..."). What needs the template
// (an empty chat, continue_final_message's rules) is left to the
// InputProcessor, which every caller goes through.
absl::StatusOr<tokenizer::PromptInput> ChatPromptInput(const rill::v1::ChatPrompt& chat);

}  // namespace rill::frontend

#endif  // RILL_FRONTEND_CHAT_PROMPT_INPUT_H_
