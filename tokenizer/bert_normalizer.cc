#include "tokenizer/bert_normalizer.h"

#include <algorithm>

#include "tokenizer/unicode_data.h"

namespace rill::tokenizer {
namespace {

using internal::CodePointMapping;

bool IsBertWhitespace(uint32_t cp) {
  return cp == '\t' || cp == '\n' || cp == '\r' || IsSpace(cp);
}

// Tabs and newlines are whitespace, not controls; every other \p{C} is.
bool IsBertControl(uint32_t cp) {
  if (cp == '\t' || cp == '\n' || cp == '\r') return false;
  return CodePointCategory(cp) & kCategoryOther;
}

// The CJK Unified Ideographs blocks BERT isolates (not Hiragana, Katakana or
// Hangul, which are written with spaces or are handled by WordPiece).
bool IsChineseChar(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

bool IsNonspacingMark(uint32_t cp) {
  const auto* begin = internal::kNonspacingMarks;
  const auto* end = begin + internal::kNonspacingMarksSize;
  const auto* it = std::upper_bound(begin, end, cp, [](uint32_t c, const internal::CodePointRange& r) {
    return c < r.first;
  });
  return it != begin && cp <= (it - 1)->last;
}

// Appends the mapping of cp from a generated table, or cp itself.
void AppendMapped(uint32_t cp, const CodePointMapping* table, int size, const uint32_t* pool,
                  std::vector<uint32_t>* out) {
  const CodePointMapping* end = table + size;
  const CodePointMapping* it = std::lower_bound(
      table, end, cp, [](const CodePointMapping& m, uint32_t c) { return m.cp < c; });
  if (it != end && it->cp == cp) {
    out->insert(out->end(), pool + it->offset, pool + it->offset + it->length);
  } else {
    out->push_back(cp);
  }
}

// Canonical decomposition of one code point (Hangul by the Unicode formula).
void AppendNfd(uint32_t cp, std::vector<uint32_t>* out) {
  constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
  constexpr uint32_t kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = 11172;
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out->push_back(kLBase + s / kNCount);
    out->push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out->push_back(kTBase + s % kTCount);
    return;
  }
  AppendMapped(cp, internal::kNfd, internal::kNfdSize, internal::kNfdPool, out);
}

bool IsBertPunctuation(uint32_t cp) {
  if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
      (cp >= 123 && cp <= 126)) {
    return true;
  }
  return CodePointCategory(cp) & kCategoryPunct;
}

}  // namespace

std::vector<uint32_t> BertNormalize(std::string_view text, const BertNormalizerOptions& options) {
  std::vector<uint32_t> cps = DecodeUtf8(text);
  std::vector<uint32_t> cur;
  cur.reserve(cps.size());
  for (uint32_t cp : cps) {
    if (options.clean_text) {
      if (cp == 0 || cp == 0xFFFD || IsBertControl(cp)) continue;
      if (IsBertWhitespace(cp)) cp = ' ';
    }
    if (options.handle_chinese_chars && IsChineseChar(cp)) {
      cur.push_back(' ');
      cur.push_back(cp);
      cur.push_back(' ');
    } else {
      cur.push_back(cp);
    }
  }
  if (options.strip_accents) {
    std::vector<uint32_t> nfd;
    nfd.reserve(cur.size());
    for (uint32_t cp : cur) AppendNfd(cp, &nfd);
    cur.clear();
    for (uint32_t cp : nfd) {
      if (!IsNonspacingMark(cp)) cur.push_back(cp);
    }
  }
  if (options.lowercase) {
    std::vector<uint32_t> lower;
    lower.reserve(cur.size());
    for (uint32_t cp : cur) {
      AppendMapped(cp, internal::kLower, internal::kLowerSize, internal::kLowerPool, &lower);
    }
    cur = std::move(lower);
  }
  return cur;
}

std::vector<std::string> BertPreTokenize(const std::vector<uint32_t>& cps) {
  std::vector<std::string> words;
  std::string word;
  auto flush = [&] {
    if (!word.empty()) words.push_back(std::move(word));
    word.clear();
  };
  for (uint32_t cp : cps) {
    if (IsBertWhitespace(cp)) {
      flush();
    } else if (IsBertPunctuation(cp)) {
      flush();
      AppendUtf8(cp, &word);
      flush();
    } else {
      AppendUtf8(cp, &word);
    }
  }
  flush();
  return words;
}

}  // namespace rill::tokenizer
