// Parses a Jinja template into a Program (tokenizer/jinja/ast.h), with
// jinja2's grammar and operator precedence.
#ifndef RILL_TOKENIZER_JINJA_PARSER_H_
#define RILL_TOKENIZER_JINJA_PARSER_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "tokenizer/jinja/ast.h"

namespace rill::tokenizer::jinja {

// INVALID_ARGUMENT for a syntax error (with its line); UNIMPLEMENTED naming
// the construct for valid jinja2 this engine does not render ({% call %},
// {% include %}, {% for ... recursive %}, ...).
absl::StatusOr<Program> Parse(std::string_view source);

}  // namespace rill::tokenizer::jinja

#endif  // RILL_TOKENIZER_JINJA_PARSER_H_
