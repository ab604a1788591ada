#include "base/json.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/utf8.h"

namespace rill::base::json {
namespace {

// The system absl has its own string_view, which StrCat does not take a
// std::string_view for.
absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

const std::string& EmptyString() {
  static const std::string* kEmpty = new std::string();
  return *kEmpty;
}

class Parser {
 public:
  Parser(std::string_view text, const JsonParseOptions& options)
      : text_(text), options_(options) {}

  absl::StatusOr<JsonValue> ParseDocument() {
    SkipWhitespace();
    JsonValue value;
    if (absl::Status s = ParseValue(0, &value); !s.ok()) return s;
    SkipWhitespace();
    if (pos_ != text_.size()) return Error("trailing characters after JSON value");
    return value;
  }

 private:
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("JSON parse error at offset ", pos_, ": ", Sv(what)));
  }

  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return text_[pos_]; }

  void SkipWhitespace() {
    while (!AtEnd()) {
      char c = Peek();
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
      ++pos_;
    }
  }

  bool ConsumeLiteral(std::string_view lit) {
    if (text_.substr(pos_, lit.size()) != lit) return false;
    pos_ += lit.size();
    return true;
  }

  absl::Status ParseValue(int depth, JsonValue* out) {
    if (AtEnd()) return Error("unexpected end of input");
    switch (Peek()) {
      case '{':
        return ParseObject(depth + 1, out);
      case '[':
        return ParseArray(depth + 1, out);
      case '"': {
        std::string s;
        if (absl::Status st = ParseString(&s); !st.ok()) return st;
        *out = JsonValue::String(std::move(s));
        return absl::OkStatus();
      }
      case 't':
        if (!ConsumeLiteral("true")) return Error("invalid literal");
        *out = JsonValue::Bool(true);
        return absl::OkStatus();
      case 'f':
        if (!ConsumeLiteral("false")) return Error("invalid literal");
        *out = JsonValue::Bool(false);
        return absl::OkStatus();
      case 'n':
        if (!ConsumeLiteral("null")) return Error("invalid literal");
        *out = JsonValue();
        return absl::OkStatus();
      default:
        return ParseNumber(out);
    }
  }

  absl::Status ParseObject(int depth, JsonValue* out) {
    if (depth > options_.max_depth) return Error("nesting too deep");
    ++pos_;  // '{'
    std::vector<JsonValue::Member> members;
    SkipWhitespace();
    if (!AtEnd() && Peek() == '}') {
      ++pos_;
      *out = JsonValue::Object(std::move(members));
      return absl::OkStatus();
    }
    while (true) {
      SkipWhitespace();
      if (AtEnd() || Peek() != '"') return Error("expected object key string");
      JsonValue::Member m;
      if (absl::Status s = ParseString(&m.first); !s.ok()) return s;
      SkipWhitespace();
      if (AtEnd() || Peek() != ':') return Error("expected ':' after object key");
      ++pos_;
      SkipWhitespace();
      if (absl::Status s = ParseValue(depth, &m.second); !s.ok()) return s;
      members.push_back(std::move(m));
      SkipWhitespace();
      if (AtEnd()) return Error("unterminated object");
      char c = Peek();
      ++pos_;
      if (c == '}') break;
      if (c != ',') return Error("expected ',' or '}' in object");
    }
    *out = JsonValue::Object(std::move(members));
    return absl::OkStatus();
  }

  absl::Status ParseArray(int depth, JsonValue* out) {
    if (depth > options_.max_depth) return Error("nesting too deep");
    ++pos_;  // '['
    std::vector<JsonValue> items;
    SkipWhitespace();
    if (!AtEnd() && Peek() == ']') {
      ++pos_;
      *out = JsonValue::Array(std::move(items));
      return absl::OkStatus();
    }
    while (true) {
      SkipWhitespace();
      JsonValue v;
      if (absl::Status s = ParseValue(depth, &v); !s.ok()) return s;
      items.push_back(std::move(v));
      SkipWhitespace();
      if (AtEnd()) return Error("unterminated array");
      char c = Peek();
      ++pos_;
      if (c == ']') break;
      if (c != ',') return Error("expected ',' or ']' in array");
    }
    *out = JsonValue::Array(std::move(items));
    return absl::OkStatus();
  }

  // Reads 4 hex digits after "\u".
  bool ParseHex4(uint32_t* out) {
    if (text_.size() - pos_ < 4) return false;
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text_[pos_ + i];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= c - '0';
      else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
      else return false;
    }
    pos_ += 4;
    *out = v;
    return true;
  }

  // Validates one UTF-8 sequence starting at pos_ (a non-ASCII lead byte) and
  // appends it. Rejects overlongs, surrogates and code points > U+10FFFF.
  bool CopyUtf8Sequence(std::string* out) {
    auto byte = [&](size_t i) { return static_cast<uint8_t>(text_[pos_ + i]); };
    uint8_t b0 = byte(0);
    size_t len;
    uint32_t cp;
    if (b0 >= 0xC2 && b0 <= 0xDF) { len = 2; cp = b0 & 0x1F; }
    else if (b0 >= 0xE0 && b0 <= 0xEF) { len = 3; cp = b0 & 0x0F; }
    else if (b0 >= 0xF0 && b0 <= 0xF4) { len = 4; cp = b0 & 0x07; }
    else return false;
    if (text_.size() - pos_ < len) return false;
    for (size_t i = 1; i < len; ++i) {
      uint8_t b = byte(i);
      if ((b & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (b & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    out->append(text_.data() + pos_, len);
    pos_ += len;
    return true;
  }

  absl::Status ParseString(std::string* out) {
    ++pos_;  // opening quote
    out->clear();
    while (true) {
      if (AtEnd()) return Error("unterminated string");
      uint8_t c = static_cast<uint8_t>(Peek());
      if (c == '"') {
        ++pos_;
        return absl::OkStatus();
      }
      if (c < 0x20) return Error("unescaped control character in string");
      if (c >= 0x80) {
        if (!CopyUtf8Sequence(out)) return Error("invalid UTF-8 in string");
        continue;
      }
      if (c != '\\') {
        out->push_back(static_cast<char>(c));
        ++pos_;
        continue;
      }
      ++pos_;
      if (AtEnd()) return Error("unterminated escape");
      char e = Peek();
      ++pos_;
      switch (e) {
        case '"': out->push_back('"'); break;
        case '\\': out->push_back('\\'); break;
        case '/': out->push_back('/'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case 'u': {
          uint32_t cp;
          if (!ParseHex4(&cp)) return Error("invalid \\u escape");
          if (cp >= 0xDC00 && cp <= 0xDFFF) return Error("lone low surrogate in \\u escape");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t lo;
            if (text_.substr(pos_, 2) != "\\u") return Error("lone high surrogate in \\u escape");
            pos_ += 2;
            if (!ParseHex4(&lo)) return Error("invalid \\u escape");
            if (lo < 0xDC00 || lo > 0xDFFF) return Error("invalid low surrogate in \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          AppendUtf8(cp, out);
          break;
        }
        default:
          return Error("invalid escape character");
      }
    }
  }

  absl::Status ParseNumber(JsonValue* out) {
    size_t start = pos_;
    auto digit = [&]() { return !AtEnd() && Peek() >= '0' && Peek() <= '9'; };
    if (!AtEnd() && Peek() == '-') ++pos_;
    if (!digit()) return Error("invalid value");
    if (Peek() == '0') {
      ++pos_;
    } else {
      while (digit()) ++pos_;
    }
    if (!AtEnd() && Peek() == '.') {
      ++pos_;
      if (!digit()) return Error("expected digit after '.'");
      while (digit()) ++pos_;
    }
    if (!AtEnd() && (Peek() == 'e' || Peek() == 'E')) {
      ++pos_;
      if (!AtEnd() && (Peek() == '+' || Peek() == '-')) ++pos_;
      if (!digit()) return Error("expected digit in exponent");
      while (digit()) ++pos_;
    }
    std::string literal(text_.substr(start, pos_ - start));
    // strtod needs a NUL-terminated buffer; `literal` is one. Overflow gives
    // +-HUGE_VAL, which we keep (as most parsers do).
    double d = std::strtod(literal.c_str(), nullptr);
    *out = JsonValue::Number(d, std::move(literal));
    return absl::OkStatus();
  }

  std::string_view text_;
  const JsonParseOptions& options_;
  size_t pos_ = 0;
};

// Parses an all-digit literal (optionally '-'), exactly. False on overflow or
// when the literal has a fraction or exponent.
bool ParseIntegerLiteral(const std::string& s, bool* negative, uint64_t* magnitude) {
  size_t i = 0;
  *negative = false;
  if (i < s.size() && s[i] == '-') {
    *negative = true;
    ++i;
  }
  if (i == s.size()) return false;
  uint64_t v = 0;
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (c < '0' || c > '9') return false;
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (std::numeric_limits<uint64_t>::max() - d) / 10) return false;
    v = v * 10 + d;
  }
  *magnitude = v;
  return true;
}

}  // namespace

JsonValue JsonValue::Bool(bool b) {
  JsonValue v;
  v.type_ = Type::kBool;
  v.bool_ = b;
  return v;
}

JsonValue JsonValue::Number(double d, std::string literal) {
  JsonValue v;
  v.type_ = Type::kNumber;
  v.number_ = d;
  v.text_ = std::move(literal);
  return v;
}

JsonValue JsonValue::String(std::string s) {
  JsonValue v;
  v.type_ = Type::kString;
  v.text_ = std::move(s);
  return v;
}

JsonValue JsonValue::Array(std::vector<JsonValue> items) {
  JsonValue v;
  v.type_ = Type::kArray;
  v.items_ = std::move(items);
  return v;
}

JsonValue JsonValue::Object(std::vector<Member> members) {
  JsonValue v;
  v.type_ = Type::kObject;
  v.members_ = std::move(members);
  return v;
}

const std::string& JsonValue::number_literal() const {
  return type_ == Type::kNumber ? text_ : EmptyString();
}

const std::string& JsonValue::string_value() const {
  return type_ == Type::kString ? text_ : EmptyString();
}

const std::vector<JsonValue>& JsonValue::array_items() const {
  static const std::vector<JsonValue>* kEmpty = new std::vector<JsonValue>();
  return type_ == Type::kArray ? items_ : *kEmpty;
}

const std::vector<JsonValue::Member>& JsonValue::object_members() const {
  static const std::vector<Member>* kEmpty = new std::vector<Member>();
  return type_ == Type::kObject ? members_ : *kEmpty;
}

std::optional<int64_t> JsonValue::AsInt64() const {
  if (type_ != Type::kNumber) return std::nullopt;
  bool negative;
  uint64_t magnitude;
  if (ParseIntegerLiteral(text_, &negative, &magnitude)) {
    if (!negative) {
      if (magnitude > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
      return static_cast<int64_t>(magnitude);
    }
    if (magnitude > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) + 1) return std::nullopt;
    return static_cast<int64_t>(0 - magnitude);
  }
  // Non-integer literal: accept only exactly integral doubles well inside range.
  if (!std::isfinite(number_) || std::trunc(number_) != number_ ||
      std::fabs(number_) >= 9.2e18) {
    return std::nullopt;
  }
  return static_cast<int64_t>(number_);
}

std::optional<uint64_t> JsonValue::AsUint64() const {
  if (type_ != Type::kNumber) return std::nullopt;
  bool negative;
  uint64_t magnitude;
  if (ParseIntegerLiteral(text_, &negative, &magnitude)) {
    if (negative && magnitude != 0) return std::nullopt;
    return negative ? 0 : magnitude;
  }
  if (!std::isfinite(number_) || std::trunc(number_) != number_ || number_ < 0 ||
      number_ >= 1.8e19) {
    return std::nullopt;
  }
  return static_cast<uint64_t>(number_);
}

const JsonValue* JsonValue::Find(std::string_view key) const {
  if (type_ != Type::kObject) return nullptr;
  for (auto it = members_.rbegin(); it != members_.rend(); ++it) {
    if (it->first == key) return &it->second;
  }
  return nullptr;
}

absl::StatusOr<JsonValue> ParseJson(std::string_view text, const JsonParseOptions& options) {
  return Parser(text, options).ParseDocument();
}

absl::StatusOr<JsonValue> ParseJsonFile(const std::string& path, const JsonParseOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  absl::StatusOr<JsonValue> v = ParseJson(ss.str(), options);
  if (!v.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", v.status().message()));
  return v;
}

std::string QuoteJsonString(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          static const char kHex[] = "0123456789abcdef";
          const unsigned char u = static_cast<unsigned char>(c);
          out += "\\u00";
          out += kHex[u >> 4];
          out += kHex[u & 15];
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

}  // namespace rill::base::json
