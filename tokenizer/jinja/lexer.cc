#include "tokenizer/jinja/lexer.h"

#include <cctype>
#include <cstdint>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tokenizer/unicode_data.h"

namespace rill::tokenizer::jinja {

bool IsPythonSpace(uint32_t cp) {
  // White_Space plus the four ASCII separators (U+001C..U+001F) that
  // Python's str.isspace() also counts.
  return IsSpace(cp) || (cp >= 0x1C && cp <= 0x1F);
}

namespace {

// Byte length of the Python whitespace at the start of s (decoding only as
// far as the whitespace goes: s may be the rest of the template).
size_t LeadingSpace(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const int n = Utf8SequenceLength(s.substr(i));
    if (n <= 0 || !IsPythonSpace(DecodeUtf8(s.substr(i, n))[0])) break;
    i += n;
  }
  return i;
}

// s without its trailing Python whitespace.
std::string_view RstripSpace(std::string_view s) {
  std::vector<size_t> off;
  const std::vector<uint32_t> cps = DecodeUtf8(s, &off);
  size_t e = cps.size();
  while (e > 0 && IsPythonSpace(cps[e - 1])) --e;
  return s.substr(0, off[e]);
}

// \r\n and \r become \n; one final \n goes (jinja2's defaults).
std::string NormalizeNewlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {}

  absl::StatusOr<std::vector<Token>> Run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      const size_t start = FindTagStart(pos_);
      std::string_view text(src_.data() + pos_, (start == std::string::npos ? src_.size() : start) - pos_);
      if (start == std::string::npos) {
        Emit(Token::Type::kText, std::string(text));
        break;
      }
      const char kind = src_[start + 1];  // '{', '%' or '#'.
      const char sign = start + 2 < src_.size() ? src_[start + 2] : '\0';
      if (sign == '-') {
        text = RstripSpace(text);
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: a block or comment tag alone on its line takes the
        // indentation before it with it.
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
        if ((l_pos > 0 || line_starting) && l_pos < text.size() &&
            LeadingSpace(text.substr(l_pos)) == text.size() - l_pos) {
          text = text.substr(0, l_pos);
        }
      }
      CountLines(src_.data() + pos_, start - pos_);
      if (!text.empty()) Emit(Token::Type::kText, std::string(text));
      pos_ = start + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      absl::Status s = kind == '#' ? Comment() : Tag(kind == '{');
      if (!s.ok()) return s;
      line_starting = pos_ > 0 && src_[pos_ - 1] == '\n';
    }
    Emit(Token::Type::kEnd, "");
    return std::move(tokens_);
  }

 private:
  size_t FindTagStart(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
        return i;
      }
    }
    return std::string::npos;
  }

  void CountLines(const char* p, size_t n) {
    for (size_t i = 0; i < n; ++i) line_ += p[i] == '\n';
  }

  void Emit(Token::Type t, std::string v) { tokens_.push_back({t, std::move(v), line_}); }

  absl::Status Error(std::string what) const {
    return absl::InvalidArgumentError(absl::StrCat("chat template line ", line_, ": ", what));
  }

  // After a block or comment end: `-` eats all whitespace, else trim_blocks
  // eats one newline.
  void AfterEnd(bool strip, bool block) {
    const size_t from = pos_;
    if (strip) {
      pos_ += LeadingSpace(std::string_view(src_).substr(pos_));
    } else if (block && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
    }
    CountLines(src_.data() + from, pos_ - from);
  }

  absl::Status Comment() {
    const size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) return Error("unterminated comment {# ... #}");
    const bool strip = end > pos_ && src_[end - 1] == '-';
    const bool keep = end > pos_ && src_[end - 1] == '+';
    CountLines(src_.data() + pos_, end - pos_);
    pos_ = end + 2;
    AfterEnd(strip, !keep);
    return absl::OkStatus();
  }

  absl::Status Tag(bool variable) {
    Emit(variable ? Token::Type::kVarBegin : Token::Type::kBlockBegin, "");
    const size_t first_token = tokens_.size();
    int depth = 0;  // Open brackets: `}}` inside {{ {'a': {}} }} closes a dict.
    while (true) {
      while (pos_ < src_.size() && std::isspace(static_cast<unsigned char>(src_[pos_]))) {
        line_ += src_[pos_] == '\n';
        ++pos_;
      }
      if (pos_ >= src_.size()) return Error(variable ? "unterminated {{ ... }}" : "unterminated {% ... %}");
      const std::string_view rest(src_.data() + pos_, src_.size() - pos_);
      const std::string_view close = variable ? "}}" : "%}";
      if (depth == 0) {
        const bool strip = rest.size() > 2 && rest[0] == '-' && rest.substr(1, 2) == close;
        const bool keep = !variable && rest.size() > 2 && rest[0] == '+' && rest.substr(1, 2) == close;
        if (strip || keep || rest.substr(0, 2) == close) {
          pos_ += (strip || keep) ? 3 : 2;
          if (!variable && tokens_.size() > first_token && tokens_[first_token].value == "raw") {
            return absl::UnimplementedError(absl::StrCat(
                "chat template line ", line_, ": {% raw %} is not supported by Rill's template engine"));
          }
          Emit(variable ? Token::Type::kVarEnd : Token::Type::kBlockEnd, "");
          AfterEnd(strip, !variable && !keep);
          return absl::OkStatus();
        }
      }
      const char c = rest[0];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t n = 1;
        while (n < rest.size() && (std::isalnum(static_cast<unsigned char>(rest[n])) || rest[n] == '_')) ++n;
        Emit(Token::Type::kName, std::string(rest.substr(0, n)));
        pos_ += n;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        Number(rest);
      } else if (c == '\'' || c == '"') {
        absl::Status s = String(rest);
        if (!s.ok()) return s;
      } else {
        static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
        size_t n = 1;
        for (std::string_view op : kTwo) {
          if (rest.substr(0, 2) == op) n = 2;
        }
        if (n == 1 && std::string_view("+-*/%~<>=()[]{},.:|").find(c) == std::string_view::npos) {
          return Error(absl::StrCat("unexpected character '", std::string(1, c), "' in a tag"));
        }
        if (c == '(' || c == '[' || c == '{') ++depth;
        if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
        Emit(Token::Type::kOperator, std::string(rest.substr(0, n)));
        pos_ += n;
      }
    }
  }

  void Number(std::string_view rest) {
    size_t n = 0;
    auto digits = [&] {
      while (n < rest.size() && (std::isdigit(static_cast<unsigned char>(rest[n])) || rest[n] == '_')) ++n;
    };
    digits();
    bool is_float = false;
    if (n + 1 < rest.size() && rest[n] == '.' && std::isdigit(static_cast<unsigned char>(rest[n + 1]))) {
      is_float = true;
      ++n;
      digits();
    }
    if (n < rest.size() && (rest[n] == 'e' || rest[n] == 'E')) {
      size_t m = n + 1;
      if (m < rest.size() && (rest[m] == '+' || rest[m] == '-')) ++m;
      if (m < rest.size() && std::isdigit(static_cast<unsigned char>(rest[m]))) {
        is_float = true;
        n = m;
        digits();
      }
    }
    std::string text;
    for (char ch : rest.substr(0, n)) {
      if (ch != '_') text.push_back(ch);
    }
    Emit(is_float ? Token::Type::kFloat : Token::Type::kInt, text);
    pos_ += n;
  }

  // Decodes a literal as jinja2 does (Python's unicode-escape): \n \t \\ \'
  // \xHH \uHHHH ...; unknown escapes keep their backslash.
  absl::Status String(std::string_view rest) {
    const char quote = rest[0];
    std::string out;
    size_t i = 1;
    const int start_line = line_;
    while (true) {
      if (i >= rest.size()) {
        line_ = start_line;
        return Error("unterminated string literal");
      }
      const char c = rest[i];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\' || i + 1 >= rest.size()) {
        out.push_back(c);
        ++i;
        continue;
      }
      const char e = rest[i + 1];
      i += 2;
      switch (e) {
        case 'n': out.push_back('\n'); break;
        case 't': out.push_back('\t'); break;
        case 'r': out.push_back('\r'); break;
        case 'a': out.push_back('\a'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'v': out.push_back('\v'); break;
        case '\\': out.push_back('\\'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case '\n': ++line_; break;  // Line continuation.
        case 'x':
        case 'u':
        case 'U': {
          const size_t len = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (i + len > rest.size()) return Error("truncated \\x/\\u escape in a string");
          const std::string hex(rest.substr(i, len));
          char* endp = nullptr;
          const unsigned long cp = std::strtoul(hex.c_str(), &endp, 16);
          if (endp != hex.c_str() + len || cp > 0x10FFFF) {
            return Error("bad \\x/\\u escape in a string");
          }
          if (cp >= 0xD800 && cp <= 0xDFFF) {
            // Python would hold a lone surrogate, which no UTF-8 prompt can carry.
            return absl::UnimplementedError(absl::StrCat(
                "chat template line ", line_, ": a \\u escape of a surrogate is not supported by Rill's template engine"));
          }
          AppendUtf8(static_cast<uint32_t>(cp), &out);
          i += len;
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = e - '0';
            for (int k = 0; k < 2 && i < rest.size() && rest[i] >= '0' && rest[i] <= '7'; ++k) {
              cp = cp * 8 + (rest[i++] - '0');
            }
            AppendUtf8(cp, &out);
          } else if (e == 'N') {
            return absl::UnimplementedError(absl::StrCat(
                "chat template line ", line_, ": \\N{...} escapes are not supported by Rill's template engine"));
          } else {
            out.push_back('\\');
            out.push_back(e);
          }
      }
    }
    Emit(Token::Type::kString, std::move(out));
    pos_ += i + 1;
    return absl::OkStatus();
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source) {
  return Lexer(NormalizeNewlines(source)).Run();
}

}  // namespace rill::tokenizer::jinja
