#include "tokenizer/jinja/py_str.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "tokenizer/jinja/lexer.h"
#include "tokenizer/jinja/value.h"
#include "tokenizer/unicode_data.h"

namespace rill::tokenizer::jinja {
namespace {

// Code points of s, each with its bytes (invalid bytes stand alone).
struct CodePoints {
  explicit CodePoints(std::string_view s) : text(s), cps(DecodeUtf8(s, &off)) {}
  size_t size() const { return cps.size(); }
  std::string_view At(size_t i) const { return text.substr(off[i], off[i + 1] - off[i]); }
  std::string_view Range(size_t b, size_t e) const { return text.substr(off[b], off[e] - off[b]); }
  std::string_view text;
  std::vector<size_t> off;
  std::vector<uint32_t> cps;
};

// Whether Python's case mapping might change cp (letters of cased scripts
// outside ASCII): approximated by the blocks that hold them.
bool MaybeCased(uint32_t cp) {
  static constexpr uint32_t kRanges[][2] = {
      {0xB5, 0x590},     {0x10A0, 0x1100},  {0x13A0, 0x1400},  {0x1C80, 0x1CC0},
      {0x1D00, 0x2000},  {0x2100, 0x2190},  {0x24B6, 0x24EA},  {0x2C00, 0x2D30},
      {0xA640, 0xA800},  {0xAB30, 0xABC0},  {0xFB00, 0xFB18},  {0xFF21, 0xFF5B},
      {0x10400, 0x10500}, {0x10C80, 0x10D00}, {0x118A0, 0x11900}, {0x16E40, 0x16EA0},
      {0x1E900, 0x1E960}};
  for (const auto& r : kRanges) {
    if (cp >= r[0] && cp < r[1]) return true;
  }
  return false;
}

void CheckAsciiCase(std::string_view s, const char* method) {
  for (uint32_t cp : DecodeUtf8(s)) {
    if (cp >= 0x80 && MaybeCased(cp)) {
      Unsupported(absl::StrCat(method, "() of non-ASCII letters"));
    }
  }
}

bool IsUpper(char c) { return c >= 'A' && c <= 'Z'; }
bool IsLower(char c) { return c >= 'a' && c <= 'z'; }
char ToUpper(char c) { return IsLower(c) ? c - 32 : c; }
char ToLower(char c) { return IsUpper(c) ? c + 32 : c; }

bool IsLineBreak(uint32_t cp) {
  return cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || cp == 0x1C || cp == 0x1D ||
         cp == 0x1E || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

}  // namespace

std::vector<size_t> CodePointOffsets(std::string_view s) {
  std::vector<size_t> off;
  DecodeUtf8(s, &off);
  return off;
}

int64_t CodePointCount(std::string_view s) {
  return static_cast<int64_t>(DecodeUtf8(s).size());
}

std::string PyStrip(std::string_view s, const std::optional<std::string>& chars, bool left,
                    bool right) {
  const CodePoints cp(s);
  std::vector<uint32_t> set;
  if (chars) set = DecodeUtf8(*chars);
  auto strip = [&](uint32_t c) {
    return chars ? std::find(set.begin(), set.end(), c) != set.end() : IsPythonSpace(c);
  };
  size_t b = 0, e = cp.size();
  while (left && b < e && strip(cp.cps[b])) ++b;
  while (right && e > b && strip(cp.cps[e - 1])) --e;
  return std::string(cp.Range(b, e));
}

std::vector<std::string> PySplit(std::string_view s, const std::optional<std::string>& sep,
                                 int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) Fail("ValueError: empty separator");
    size_t from = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      const size_t at = s.find(*sep, from);
      if (at == std::string_view::npos) break;
      out.emplace_back(s.substr(from, at - from));
      from = at + sep->size();
    }
    out.emplace_back(s.substr(from));
    return out;
  }
  const CodePoints cp(s);
  size_t i = 0;
  while (true) {
    while (i < cp.size() && IsPythonSpace(cp.cps[i])) ++i;
    if (i == cp.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      out.emplace_back(cp.Range(i, cp.size()));  // Python keeps its trailing space.
      break;
    }
    size_t j = i;
    while (j < cp.size() && !IsPythonSpace(cp.cps[j])) ++j;
    out.emplace_back(cp.Range(i, j));
    i = j;
  }
  return out;
}

std::vector<std::string> PyRSplit(std::string_view s, const std::optional<std::string>& sep,
                                  int64_t maxsplit) {
  if (maxsplit < 0) return PySplit(s, sep, maxsplit);
  if (!sep) Unsupported("str.rsplit() without a separator and with maxsplit");
  if (sep->empty()) Fail("ValueError: empty separator");
  std::vector<std::string> out;
  size_t end = s.size();
  while (static_cast<int64_t>(out.size()) < maxsplit) {
    if (end < sep->size()) break;
    const size_t at = s.rfind(*sep, end - sep->size());
    if (at == std::string_view::npos) break;
    out.emplace_back(s.substr(at + sep->size(), end - at - sep->size()));
    end = at;
  }
  out.emplace_back(s.substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> PySplitLines(std::string_view s) {
  const CodePoints cp(s);
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < cp.size(); ++i) {
    if (!IsLineBreak(cp.cps[i])) continue;
    out.emplace_back(cp.Range(start, i));
    if (cp.cps[i] == '\r' && i + 1 < cp.size() && cp.cps[i + 1] == '\n') ++i;
    start = i + 1;
  }
  if (start < cp.size()) out.emplace_back(cp.Range(start, cp.size()));
  return out;
}

std::string PyReplace(std::string_view s, std::string_view old, std::string_view repl,
                      int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts repl before each code point and at the end.
    const CodePoints cp(s);
    int64_t done = 0;
    for (size_t i = 0; i < cp.size(); ++i) {
      if (count < 0 || done < count) {
        out.append(repl);
        ++done;
      }
      out.append(cp.At(i));
    }
    if (count < 0 || done < count) out.append(repl);
    return out;
  }
  size_t from = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t at = s.find(old, from);
    if (at == std::string_view::npos) break;
    out.append(s.substr(from, at - from));
    out.append(repl);
    from = at + old.size();
    ++done;
  }
  out.append(s.substr(from));
  return out;
}

int64_t PyFind(std::string_view s, std::string_view sub, bool reverse) {
  const size_t at = reverse ? s.rfind(sub) : s.find(sub);
  if (at == std::string_view::npos) return -1;
  return CodePointCount(s.substr(0, at));
}

std::string PyUpper(std::string_view s) {
  CheckAsciiCase(s, "upper");
  std::string out(s);
  for (char& c : out) c = ToUpper(c);
  return out;
}

std::string PyLower(std::string_view s) {
  CheckAsciiCase(s, "lower");
  std::string out(s);
  for (char& c : out) c = ToLower(c);
  return out;
}

std::string PyTitle(std::string_view s) {
  CheckAsciiCase(s, "title");
  std::string out(s);
  bool prev_cased = false;
  for (char& c : out) {
    const bool cased = IsUpper(c) || IsLower(c);
    c = cased ? (prev_cased ? ToLower(c) : ToUpper(c)) : c;
    prev_cased = cased;
  }
  return out;
}

std::string PyCapitalize(std::string_view s) {
  CheckAsciiCase(s, "capitalize");
  std::string out(s);
  for (size_t i = 0; i < out.size(); ++i) out[i] = i == 0 ? ToUpper(out[i]) : ToLower(out[i]);
  return out;
}

}  // namespace rill::tokenizer::jinja
