#include "engine/structured_output/constraint.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace rill::engine::structured_output {

const char* ConstraintKindName(ConstraintKind kind) {
  switch (kind) {
    case ConstraintKind::kNone: return "none";
    case ConstraintKind::kJsonSchema: return "json_schema";
    case ConstraintKind::kJsonObject: return "json_object";
    case ConstraintKind::kRegex: return "regex";
    case ConstraintKind::kGrammar: return "grammar";
    case ConstraintKind::kChoice: return "choice";
    case ConstraintKind::kStructuralTag: return "structural_tag";
  }
  return "?";
}

std::string Constraint::CacheKey() const {
  std::string key = absl::StrCat(ConstraintKindName(kind), ":", text);
  // Length-prefixed, so no choice list collides with another.
  for (const std::string& c : choices) absl::StrAppend(&key, "\n", c.size(), ":", c);
  return key;
}

int JsonNestingDepth(const std::string& json) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char ch : json) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (ch == '\\') {
        escaped = true;
      } else if (ch == '"') {
        in_string = false;
      }
      continue;
    }
    if (ch == '"') {
      in_string = true;
    } else if (ch == '{' || ch == '[') {
      deepest = std::max(deepest, ++depth);
    } else if (ch == '}' || ch == ']') {
      depth = std::max(0, depth - 1);
    }
  }
  return deepest;
}

absl::Status ValidateConstraint(const Constraint& c, const ConstraintLimits& limits) {
  const char* name = ConstraintKindName(c.kind);
  auto bad = [name](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", parts...));
  };
  int64_t bytes = static_cast<int64_t>(c.text.size());
  switch (c.kind) {
    case ConstraintKind::kNone:
    case ConstraintKind::kJsonObject:
      return absl::OkStatus();
    case ConstraintKind::kChoice:
      if (c.choices.empty()) return bad("the choice list is empty");
      for (size_t i = 0; i < c.choices.size(); ++i) {
        if (c.choices[i].empty()) return bad("choice ", i, " is empty");
        bytes += static_cast<int64_t>(c.choices[i].size());
      }
      break;
    default:
      if (c.text.empty()) return bad("is empty");
  }
  if (bytes > limits.max_bytes) {
    return bad(bytes, " bytes exceed structured_output_max_bytes=", limits.max_bytes);
  }
  if (c.kind == ConstraintKind::kJsonSchema || c.kind == ConstraintKind::kStructuralTag) {
    const int depth = JsonNestingDepth(c.text);
    if (depth > limits.max_json_depth) {
      return bad("nesting depth ", depth, " exceeds structured_output_max_json_depth=",
                 limits.max_json_depth);
    }
  }
  return absl::OkStatus();
}

std::string ChoiceGrammar(const std::vector<std::string>& choices) {
  std::string g = "root ::= ";
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) g += " | ";
    g += '"';
    for (unsigned char ch : choices[i]) {
      if (ch == '"' || ch == '\\') {
        g += '\\';
        g += static_cast<char>(ch);
      } else if (ch < 0x20 || ch == 0x7f) {
        g += absl::StrFormat("\\x%02x", ch);
      } else {
        g += static_cast<char>(ch);  // UTF-8 passes through as is.
      }
    }
    g += '"';
  }
  return g;
}

}  // namespace rill::engine::structured_output
