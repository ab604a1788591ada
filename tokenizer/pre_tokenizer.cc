#include "tokenizer/pre_tokenizer.h"

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tokenizer/unicode_data.h"

namespace rill::tokenizer {
namespace {

// Code points of one segment; scanners return piece end indices.
struct Cps {
  const uint32_t* c;
  size_t n;
  uint8_t Cat(size_t i) const { return CodePointCategory(c[i]); }
  bool L(size_t i) const { return i < n && (Cat(i) & kCategoryLetter); }
  bool N(size_t i) const { return i < n && (Cat(i) & kCategoryNumber); }
  bool M(size_t i) const { return i < n && (Cat(i) & kCategoryMark); }
  // [\p{L}\p{M}]
  bool LM(size_t i) const {
    return i < n && (Cat(i) & (kCategoryLetter | kCategoryMark));
  }
  bool S(size_t i) const { return i < n && (Cat(i) & kCategorySpace); }
  // [^\s\p{L}\p{N}]
  bool Other(size_t i) const {
    return i < n &&
           !(Cat(i) & (kCategorySpace | kCategoryLetter | kCategoryNumber));
  }
  // [^\s\p{L}\p{M}\p{N}]
  bool OtherNoMark(size_t i) const { return Other(i) && !M(i); }
  bool Newline(size_t i) const { return i < n && (c[i] == '\r' || c[i] == '\n'); }
};

// Lower-cases for the (?i:...) contraction group. U+017F (long s) folds to
// 's' in Unicode simple case folding, which Oniguruma applies.
uint32_t FoldAscii(uint32_t cp, bool ignore_case) {
  if (!ignore_case) return cp;
  if (cp >= 'A' && cp <= 'Z') return cp + 32;
  if (cp == 0x17F) return 's';
  return cp;
}

// 's|'t|'re|'ve|'m|'ll|'d at i; returns the match length or 0.
size_t MatchContraction(const Cps& s, size_t i, bool ignore_case) {
  if (s.c[i] != '\'' || i + 1 >= s.n) return 0;
  const uint32_t a = FoldAscii(s.c[i + 1], ignore_case);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 >= s.n) return 0;
  const uint32_t b = FoldAscii(s.c[i + 2], ignore_case);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') ||
      (a == 'l' && b == 'l')) {
    return 3;
  }
  return 0;
}

// \s+(?!\S)|\s+ at i (s.S(i) holds): a whitespace run minus its last char
// when a non-space follows and the run is longer than one.
size_t MatchTrailingSpace(const Cps& s, size_t i) {
  size_t k = i;
  while (s.S(k)) ++k;
  if (k == s.n || k - i == 1) return k;
  return k - 1;
}

// \s*[\r\n]+|\s+(?!\S)|\s+ at i (s.S(i) holds): backtracking leaves the
// first alternative's match just past the last newline of the whitespace run.
size_t MatchSpaceRun(const Cps& s, size_t i) {
  size_t k = i, last_newline = s.n;
  while (s.S(k)) {
    if (s.Newline(k)) last_newline = k;
    ++k;
  }
  if (last_newline != s.n) return last_newline + 1;
  return MatchTrailingSpace(s, i);
}

size_t NextGpt2(const Cps& s, size_t i) {
  if (size_t m = MatchContraction(s, i, /*ignore_case=*/false)) return i + m;
  const size_t j = s.c[i] == ' ' ? i + 1 : i;
  if (s.L(j)) {
    size_t k = j;
    while (s.L(k)) ++k;
    return k;
  }
  if (s.N(j)) {
    size_t k = j;
    while (s.N(k)) ++k;
    return k;
  }
  if (s.Other(j)) {
    size_t k = j;
    while (s.Other(k)) ++k;
    return k;
  }
  if (s.S(i)) return MatchTrailingSpace(s, i);
  return i + 1;  // Unreachable: every code point is in some class.
}

// kLlama3 (max_digits 3), kQwen2 (1) and kQwen35 (1, with_marks: words are
// [\p{L}\p{M}]+ and marks leave the punctuation class).
size_t NextLlama3(const Cps& s, size_t i, size_t max_digits, bool with_marks) {
  auto word = [&](size_t k) { return with_marks ? s.LM(k) : s.L(k); };
  auto punct = [&](size_t k) { return with_marks ? s.OtherNoMark(k) : s.Other(k); };
  if (size_t m = MatchContraction(s, i, /*ignore_case=*/true)) return i + m;
  // [^\r\n\p{L}\p{N}]?\p{L}+ (a lone mark is a word by itself with marks)
  size_t j = i;
  if (!s.L(j) && !s.N(j) && !s.Newline(j) && word(j + 1)) ++j;
  if (word(j)) {
    while (word(j)) ++j;
    return j;
  }
  if (s.N(i)) {
    size_t k = i;
    while (s.N(k) && k - i < max_digits) ++k;
    return k;
  }
  // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
  j = s.c[i] == ' ' ? i + 1 : i;
  if (punct(j)) {
    while (punct(j)) ++j;
    while (s.Newline(j)) ++j;
    return j;
  }
  if (s.S(i)) return MatchSpaceRun(s, i);
  return i + 1;
}

void SplitSegment(PreTokenizerType type, const Cps& s,
                  std::vector<size_t>* ends) {
  size_t i = 0;
  while (i < s.n) {
    size_t e;
    switch (type) {
      case PreTokenizerType::kLlama3:
        e = NextLlama3(s, i, 3, /*with_marks=*/false);
        break;
      case PreTokenizerType::kQwen2:
        e = NextLlama3(s, i, 1, /*with_marks=*/false);
        break;
      case PreTokenizerType::kQwen35:
        e = NextLlama3(s, i, 1, /*with_marks=*/true);
        break;
      default:
        e = NextGpt2(s, i);
        break;
    }
    ends->push_back(e);
    i = e;
  }
}

// GGUF tokenizer.ggml.pre names (llama.cpp's, which the HF loader also
// writes) of the regexes above. Each family here is checked against
// llama.cpp's golden tokenizations by engine:tokenizer_vocab_parity_test.
struct PreTokenizerName {
  std::string_view name;
  PreTokenizerType type;
};
constexpr PreTokenizerName kPreTokenizerNames[] = {
    {"default", PreTokenizerType::kGpt2},
    {"gpt2", PreTokenizerType::kGpt2},
    {"gpt-2", PreTokenizerType::kGpt2},
    {"mpt", PreTokenizerType::kGpt2},
    {"smollm", PreTokenizerType::kSmolLm},
    {"starcoder", PreTokenizerType::kSmolLm},
    {"refact", PreTokenizerType::kSmolLm},
    {"command-r", PreTokenizerType::kSmolLm},
    {"llama-bpe", PreTokenizerType::kLlama3},
    {"llama3", PreTokenizerType::kLlama3},
    {"llama-v3", PreTokenizerType::kLlama3},
    {"qwen2", PreTokenizerType::kQwen2},
    {"qwen35", PreTokenizerType::kQwen35},
    {"none", PreTokenizerType::kNone},
};

}  // namespace

absl::StatusOr<PreTokenizerType> PreTokenizerFromName(std::string_view name) {
  if (name.empty()) return PreTokenizerType::kGpt2;
  for (const PreTokenizerName& n : kPreTokenizerNames) {
    if (n.name == name) return n.type;
  }
  return absl::UnimplementedError(
      absl::StrCat("pre-tokenizer '", std::string(name),
                   "' (tokenizer.ggml.pre) is not supported; supported: ",
                   SupportedPreTokenizerNames()));
}

std::string SupportedPreTokenizerNames() {
  std::string names;
  for (const PreTokenizerName& n : kPreTokenizerNames) {
    absl::StrAppend(&names, names.empty() ? "" : ", ", std::string(n.name));
  }
  return names;
}

bool PreTokenizerIgnoresMerges(PreTokenizerType type) {
  return type == PreTokenizerType::kLlama3;
}

std::string_view PreTokenizerSplitRegex(PreTokenizerType type) {
  switch (type) {
    case PreTokenizerType::kLlama3:
      return "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
             "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    case PreTokenizerType::kQwen2:
      return "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
             "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    case PreTokenizerType::kQwen35:
      return "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| "
             "?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    default:
      return "";
  }
}

std::vector<std::string_view> PreTokenize(PreTokenizerType type,
                                          std::string_view text) {
  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;
  if (type == PreTokenizerType::kNone) {
    pieces.push_back(text);
    return pieces;
  }
  std::vector<size_t> offsets;
  const std::vector<uint32_t> cps = DecodeUtf8(text, &offsets);
  std::vector<size_t> ends;  // Code point indices.
  if (type == PreTokenizerType::kSmolLm) {
    // Digits(individual_digits) first: each \p{N} is its own segment.
    size_t start = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      const bool digit = i < cps.size() && IsNumber(cps[i]);
      if (i == cps.size() || digit) {
        Cps seg{cps.data() + start, i - start};
        std::vector<size_t> local;
        SplitSegment(PreTokenizerType::kGpt2, seg, &local);
        for (size_t e : local) ends.push_back(start + e);
        if (digit) ends.push_back(i + 1);
        start = i + 1;
      }
    }
  } else {
    SplitSegment(type, Cps{cps.data(), cps.size()}, &ends);
  }
  size_t begin = 0;
  for (size_t e : ends) {
    pieces.push_back(text.substr(begin, offsets[e] - begin));
    begin = offsets[e];
  }
  return pieces;
}

}  // namespace rill::tokenizer
