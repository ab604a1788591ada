// Splits a Jinja template into tokens the way jinja2's lexer does under the
// settings transformers renders chat templates with: trim_blocks and
// lstrip_blocks on, `{%- -%}` whitespace control, newlines normalised to \n
// and one trailing newline dropped (keep_trailing_newline off).
#ifndef RILL_TOKENIZER_JINJA_LEXER_H_
#define RILL_TOKENIZER_JINJA_LEXER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace rill::tokenizer::jinja {

struct Token {
  enum class Type {
    kText,        // template data between tags, whitespace control applied
    kVarBegin,    // {{
    kVarEnd,      // }}
    kBlockBegin,  // {%
    kBlockEnd,    // %}
    kName,
    kString,      // value: the decoded literal
    kInt,
    kFloat,
    kOperator,    // + - * / // % ** ~ == != < > <= >= = ( ) [ ] { } , . : |
    kEnd,
  };
  Type type;
  std::string value;
  int line;
};

// UNIMPLEMENTED for {% raw %}; INVALID_ARGUMENT for malformed templates
// (unterminated tags or strings, stray characters), naming the line.
absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source);

// Python's str.isspace() for one code point (what strip() and \s remove).
bool IsPythonSpace(uint32_t cp);

}  // namespace rill::tokenizer::jinja

#endif  // RILL_TOKENIZER_JINJA_LEXER_H_
