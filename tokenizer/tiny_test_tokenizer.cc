#include "tokenizer/tiny_test_tokenizer.h"

#include <string>

#include <glog/logging.h>

namespace rill::tokenizer {

std::unique_ptr<BpeTokenizer> TinyTestTokenizer() {
  tokenizer::TokenizerSpec spec;
  spec.model = "gpt2";
  spec.pre = "gpt2";
  spec.tokens.push_back("<eos>");
  spec.token_types.push_back(static_cast<int32_t>(tokenizer::TokenType::kControl));
  std::string chars;
  for (char c = 'a'; c <= 'z'; ++c) chars += c;
  for (char c = 'A'; c <= 'Z'; ++c) chars += c;
  for (char c = '0'; c <= '9'; ++c) chars += c;
  for (char c : chars) {
    spec.tokens.push_back(std::string(1, c));
    spec.token_types.push_back(static_cast<int32_t>(tokenizer::TokenType::kNormal));
  }
  spec.tokens.push_back("\xc4\xa0");  // 'Ġ'
  spec.token_types.push_back(static_cast<int32_t>(tokenizer::TokenType::kNormal));
  spec.eos_id = 0;
  auto tok = tokenizer::BpeTokenizer::Create(spec);
  CHECK(tok.ok()) << tok.status();
  return std::move(*tok);
}

}  // namespace rill::tokenizer
