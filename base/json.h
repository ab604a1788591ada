#ifndef RILL_BASE_JSON_H_
#define RILL_BASE_JSON_H_

// A small, bounds-checked JSON (RFC 8259) DOM parser, self-contained apart
// from absl: the one JSON reader of every process (checkpoint configs and
// safetensors headers in the worker, tokenizer.json and chat templates in the
// frontend, LoRA adapter configs, benchmark workloads).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace rill::base::json {

class JsonValue {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  using Member = std::pair<std::string, JsonValue>;

  JsonValue() = default;
  static JsonValue Bool(bool b);
  // `literal` is the number's source text (validated by the parser).
  static JsonValue Number(double d, std::string literal);
  static JsonValue String(std::string s);
  static JsonValue Array(std::vector<JsonValue> items);
  static JsonValue Object(std::vector<Member> members);

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_number() const { return type_ == Type::kNumber; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }

  // Accessors return a default (false, 0, empty) on a type mismatch.
  bool bool_value() const { return type_ == Type::kBool && bool_; }
  double number_value() const { return type_ == Type::kNumber ? number_ : 0.0; }
  // Source text of a number, e.g. "1e5"; empty for other types.
  const std::string& number_literal() const;
  // A number written without fraction or exponent (what Python's json.loads
  // makes an int of, however large); false for other types.
  bool is_integer_literal() const {
    return type_ == Type::kNumber && number_literal().find_first_of(".eE") == std::string::npos;
  }
  const std::string& string_value() const;
  const std::vector<JsonValue>& array_items() const;
  // Object members in document order; duplicates are kept.
  const std::vector<Member>& object_members() const;

  // Exact integer value of a number that is integral and fits (literals like
  // 12, -3, 1e3, 2.0), std::nullopt otherwise. Integer literals are
  // converted exactly, not through double.
  std::optional<int64_t> AsInt64() const;
  std::optional<uint64_t> AsUint64() const;

  // Object lookup (linear). With duplicate keys the last one wins, as in most
  // JSON implementations. nullptr when absent or not an object.
  const JsonValue* Find(std::string_view key) const;

 private:
  Type type_ = Type::kNull;
  bool bool_ = false;
  double number_ = 0.0;
  std::string text_;  // String value, or the number's literal.
  std::vector<JsonValue> items_;
  std::vector<Member> members_;
};

struct JsonParseOptions {
  // Nesting deeper than this (arrays + objects) is rejected; bounds recursion.
  int max_depth = 256;
};

// Parses a complete JSON document (surrounding whitespace allowed). Errors are
// InvalidArgument with the byte offset of the problem. Strings must be valid
// UTF-8; \u escapes (incl. surrogate pairs) are decoded to UTF-8, and lone
// surrogates are rejected.
absl::StatusOr<JsonValue> ParseJson(std::string_view text,
                                    const JsonParseOptions& options = {});

// `s` as a JSON string literal, quotes included: `"` and `\` escaped, control
// characters as \n, \r, \t or \u00XX, every other byte as it is (UTF-8
// passes through).
std::string QuoteJsonString(std::string_view s);

// Reads and parses a file; errors name the path.
absl::StatusOr<JsonValue> ParseJsonFile(const std::string& path,
                                        const JsonParseOptions& options = {});

}  // namespace rill::base::json

#endif  // RILL_BASE_JSON_H_
