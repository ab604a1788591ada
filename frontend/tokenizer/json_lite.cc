#include "frontend/tokenizer/json_lite.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "frontend/tokenizer/unicode_data.h"

namespace rill::tokenizer::json {
namespace {

constexpr int kMaxDepth = 512;

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  absl::StatusOr<Value> ParseDocument() {
    Value v;
    absl::Status st = ParseValue(0, &v);
    if (!st.ok()) return st;
    SkipSpace();
    if (pos_ != s_.size()) return Error("trailing characters");
    return v;
  }

 private:
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("JSON parse error at offset ", pos_, ": ", std::string(what)));
  }

  void SkipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' ||
                                s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool Consume(std::string_view lit) {
    if (s_.substr(pos_, lit.size()) != lit) return false;
    pos_ += lit.size();
    return true;
  }

  absl::Status ParseValue(int depth, Value* out) {
    if (depth > kMaxDepth) return Error("nesting too deep");
    SkipSpace();
    if (pos_ >= s_.size()) return Error("unexpected end");
    const char c = s_[pos_];
    if (c == '{') return ParseObject(depth, out);
    if (c == '[') return ParseArray(depth, out);
    if (c == '"') {
      std::string str;
      absl::Status st = ParseString(&str);
      if (st.ok()) *out = Value::String(std::move(str));
      return st;
    }
    if (Consume("true")) {
      *out = Value::Bool(true);
      return absl::OkStatus();
    }
    if (Consume("false")) {
      *out = Value::Bool(false);
      return absl::OkStatus();
    }
    if (Consume("null")) {
      *out = Value::Null();
      return absl::OkStatus();
    }
    return ParseNumber(out);
  }

  absl::Status ParseNumber(Value* out) {
    const size_t start = pos_;
    if (pos_ < s_.size() && s_[pos_] == '-') ++pos_;
    auto digits = [&] {
      const size_t b = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      return pos_ - b;
    };
    if (digits() == 0) return Error("invalid value");
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      if (digits() == 0) return Error("invalid number");
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (digits() == 0) return Error("invalid exponent");
    }
    const std::string num(s_.substr(start, pos_ - start));
    *out = Value::Number(std::strtod(num.c_str(), nullptr));
    return absl::OkStatus();
  }

  absl::Status ParseHex4(uint32_t* cp) {
    if (pos_ + 4 > s_.size()) return Error("short \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = s_[pos_++];
      v <<= 4;
      if (h >= '0' && h <= '9') {
        v |= h - '0';
      } else if (h >= 'a' && h <= 'f') {
        v |= h - 'a' + 10;
      } else if (h >= 'A' && h <= 'F') {
        v |= h - 'A' + 10;
      } else {
        return Error("bad \\u escape");
      }
    }
    *cp = v;
    return absl::OkStatus();
  }

  absl::Status ParseString(std::string* out) {
    ++pos_;  // Opening quote.
    while (true) {
      // Copy the unescaped run in one go; this dominates on large vocabs.
      const size_t b = pos_;
      while (pos_ < s_.size() && s_[pos_] != '"' && s_[pos_] != '\\' &&
             static_cast<uint8_t>(s_[pos_]) >= 0x20) {
        ++pos_;
      }
      out->append(s_.data() + b, pos_ - b);
      if (pos_ >= s_.size()) return Error("unterminated string");
      const char c = s_[pos_++];
      if (c == '"') return absl::OkStatus();
      if (c != '\\') return Error("control character in string");
      if (pos_ >= s_.size()) return Error("unterminated escape");
      const char e = s_[pos_++];
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
          uint32_t cp = 0;
          absl::Status st = ParseHex4(&cp);
          if (!st.ok()) return st;
          if (cp >= 0xD800 && cp < 0xDC00 && s_.substr(pos_, 2) == "\\u") {
            const size_t save = pos_;
            pos_ += 2;
            uint32_t lo = 0;
            st = ParseHex4(&lo);
            if (!st.ok()) return st;
            if (lo >= 0xDC00 && lo < 0xE000) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else {
              pos_ = save;  // Lone high surrogate; the next escape stands.
            }
          }
          // Lone surrogates cannot be UTF-8; use U+FFFD like most readers.
          if (cp >= 0xD800 && cp < 0xE000) cp = 0xFFFD;
          AppendUtf8(cp, out);
          break;
        }
        default:
          return Error("bad escape");
      }
    }
  }

  absl::Status ParseArray(int depth, Value* out) {
    ++pos_;
    std::vector<Value> items;
    SkipSpace();
    if (Consume("]")) {
      *out = Value::Array(std::move(items));
      return absl::OkStatus();
    }
    while (true) {
      items.emplace_back();
      absl::Status st = ParseValue(depth + 1, &items.back());
      if (!st.ok()) return st;
      SkipSpace();
      if (Consume("]")) break;
      if (!Consume(",")) return Error("expected ',' or ']'");
    }
    *out = Value::Array(std::move(items));
    return absl::OkStatus();
  }

  absl::Status ParseObject(int depth, Value* out) {
    ++pos_;
    std::vector<std::pair<std::string, Value>> members;
    SkipSpace();
    if (Consume("}")) {
      *out = Value::Object(std::move(members));
      return absl::OkStatus();
    }
    while (true) {
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] != '"') return Error("expected key");
      std::string key;
      absl::Status st = ParseString(&key);
      if (!st.ok()) return st;
      SkipSpace();
      if (!Consume(":")) return Error("expected ':'");
      members.emplace_back(std::move(key), Value());
      st = ParseValue(depth + 1, &members.back().second);
      if (!st.ok()) return st;
      SkipSpace();
      if (Consume("}")) break;
      if (!Consume(",")) return Error("expected ',' or '}'");
    }
    *out = Value::Object(std::move(members));
    return absl::OkStatus();
  }

  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

const std::string& Value::AsString() const {
  static const std::string* empty = new std::string;
  return kind_ == Kind::kString ? string_ : *empty;
}

const std::vector<Value>& Value::AsArray() const {
  static const auto* empty = new std::vector<Value>;
  return kind_ == Kind::kArray ? array_ : *empty;
}

const std::vector<std::pair<std::string, Value>>& Value::AsObject() const {
  static const auto* empty = new std::vector<std::pair<std::string, Value>>;
  return kind_ == Kind::kObject ? object_ : *empty;
}

const Value* Value::Find(std::string_view key) const {
  if (kind_ != Kind::kObject) return nullptr;
  for (auto it = object_.rbegin(); it != object_.rend(); ++it) {
    if (it->first == key) return &it->second;
  }
  return nullptr;
}

Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.bool_ = b;
  return v;
}
Value Value::Number(double d) {
  Value v;
  v.kind_ = Kind::kNumber;
  v.number_ = d;
  return v;
}
Value Value::String(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.string_ = std::move(s);
  return v;
}
Value Value::Array(std::vector<Value> a) {
  Value v;
  v.kind_ = Kind::kArray;
  v.array_ = std::move(a);
  return v;
}
Value Value::Object(std::vector<std::pair<std::string, Value>> o) {
  Value v;
  v.kind_ = Kind::kObject;
  v.object_ = std::move(o);
  return v;
}

absl::StatusOr<Value> Parse(std::string_view text) {
  return Parser(text).ParseDocument();
}

absl::StatusOr<Value> ParseFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  absl::StatusOr<Value> v = Parse(ss.str());
  if (!v.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", v.status().message()));
  }
  return v;
}

}  // namespace rill::tokenizer::json
