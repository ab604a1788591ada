// Converts a Hugging Face tokenizer.json (+ optional tokenizer_config.json)
// into a TokenizerSpec. Only the pipelines the C++ tokenizer reproduces
// exactly are accepted; anything else is UnimplementedError.
#ifndef RILL_TOKENIZER_TOKENIZER_JSON_H_
#define RILL_TOKENIZER_TOKENIZER_JSON_H_

#include <string>

#include "absl/status/statusor.h"
#include "base/json.h"
#include "tokenizer/tokenizer_spec.h"

namespace rill::tokenizer {

// config_path may be empty. If it is non-empty it must exist; it supplies
// chat_template, bos/eos/pad/unk tokens and add_bos_token/add_eos_token.
absl::StatusOr<TokenizerSpec> LoadTokenizerJson(
    const std::string& path, const std::string& config_path = "");

// The same from already parsed documents (config may be null).
absl::StatusOr<TokenizerSpec> TokenizerSpecFromJson(const base::json::JsonValue& tok,
                                                    const base::json::JsonValue* config);

}  // namespace rill::tokenizer

#endif  // RILL_TOKENIZER_TOKENIZER_JSON_H_
