// What a request's output must match (structured outputs), with vLLM's
// StructuredOutputsParams meaning: a JSON schema, any JSON object, a regex, an
// EBNF/GBNF grammar, one of a list of strings, or an xgrammar structural tag.
// Plain data: compiled off the engine loop by GrammarCompilerPool.
#ifndef RILL_ENGINE_STRUCTURED_OUTPUT_CONSTRAINT_H_
#define RILL_ENGINE_STRUCTURED_OUTPUT_CONSTRAINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace rill::engine::structured_output {

enum class ConstraintKind { kNone, kJsonSchema, kJsonObject, kRegex, kGrammar, kChoice, kStructuralTag };

// "json_schema", "json_object", ... (the proto field names); "none".
const char* ConstraintKindName(ConstraintKind kind);

struct Constraint {
  ConstraintKind kind = ConstraintKind::kNone;
  // The schema / regex / grammar / structural tag JSON; empty for json_object and choice.
  std::string text;
  std::vector<std::string> choices;  // kChoice only.

  bool active() const { return kind != ConstraintKind::kNone; }
  // Identifies the compiled grammar: kind plus its text (or choices).
  std::string CacheKey() const;
};

// Admission limits (engine options structured_output_*), checked before any
// compile so an oversized constraint never reaches a compiler thread.
struct ConstraintLimits {
  int64_t max_bytes = 64 << 10;  // text, or all choices together.
  int max_json_depth = 32;       // Nesting of {} / [] in a schema or structural tag.
};

// InvalidArgument naming the constraint and what is wrong: an empty choice
// list or choice, empty text, a limit exceeded (naming the limit). Syntax is
// the compiler's to check.
absl::Status ValidateConstraint(const Constraint& constraint, const ConstraintLimits& limits);

// Deepest nesting of JSON objects/arrays in `json`, ignoring brackets inside
// strings (no full parse: malformed JSON is the compiler's to report).
int JsonNestingDepth(const std::string& json);

// An EBNF grammar whose language is exactly `choices` (each a literal).
std::string ChoiceGrammar(const std::vector<std::string>& choices);

}  // namespace rill::engine::structured_output

#endif  // RILL_ENGINE_STRUCTURED_OUTPUT_CONSTRAINT_H_
