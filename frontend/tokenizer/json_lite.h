// A minimal JSON reader (RFC 8259) for tokenizer.json / tokenizer_config.json.
// Kept inside the tokenizer package so the frontend does not depend on the
// worker's loader.
#ifndef RILL_FRONTEND_TOKENIZER_JSON_LITE_H_
#define RILL_FRONTEND_TOKENIZER_JSON_LITE_H_

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace rill::tokenizer::json {

class Value {
 public:
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };

  Value() = default;
  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::kNull; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_number() const { return kind_ == Kind::kNumber; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_object() const { return kind_ == Kind::kObject; }

  // Accessors return a default (false / 0 / "" / empty) on kind mismatch.
  bool AsBool() const { return kind_ == Kind::kBool && bool_; }
  double AsNumber() const { return kind_ == Kind::kNumber ? number_ : 0; }
  const std::string& AsString() const;
  const std::vector<Value>& AsArray() const;
  // Members in document order (duplicates kept; Find returns the last).
  const std::vector<std::pair<std::string, Value>>& AsObject() const;

  // Member lookup; nullptr when absent or not an object.
  const Value* Find(std::string_view key) const;

  static Value Null() { return Value(); }
  static Value Bool(bool b);
  static Value Number(double d);
  static Value String(std::string s);
  static Value Array(std::vector<Value> a);
  static Value Object(std::vector<std::pair<std::string, Value>> o);

 private:
  Kind kind_ = Kind::kNull;
  bool bool_ = false;
  double number_ = 0;
  std::string string_;
  std::vector<Value> array_;
  std::vector<std::pair<std::string, Value>> object_;
};

// Parses a complete JSON document (surrounding whitespace allowed).
absl::StatusOr<Value> Parse(std::string_view text);

// Reads and parses a file.
absl::StatusOr<Value> ParseFile(const std::string& path);

}  // namespace rill::tokenizer::json

#endif  // RILL_FRONTEND_TOKENIZER_JSON_LITE_H_
