#include "tokenizer/unicode_data.h"

#include <algorithm>

namespace rill::tokenizer {

uint8_t CodePointCategory(uint32_t cp) {
  if (cp < 0x80) {
    // Fast path: ASCII table built once from the generated ranges.
    static const auto* ascii = [] {
      auto* t = new uint8_t[128];
      int r = 0;
      for (uint32_t c = 0; c < 128; ++c) {
        while (internal::kUnicodeRanges[r].last < c) ++r;
        t[c] = internal::kUnicodeRanges[r].flags;
      }
      return t;
    }();
    return ascii[cp];
  }
  if (cp > 0x10FFFF) return kCategoryOther;
  const internal::UnicodeRange* begin = internal::kUnicodeRanges;
  const internal::UnicodeRange* end = begin + internal::kNumUnicodeRanges;
  const auto* it = std::partition_point(
      begin, end, [cp](const internal::UnicodeRange& r) { return r.last < cp; });
  return it == end ? kCategoryOther : it->flags;
}

int Utf8SequenceLength(std::string_view s) {
  if (s.empty()) return 0;
  const uint8_t b0 = static_cast<uint8_t>(s[0]);
  if (b0 < 0x80) return 1;
  int need;
  uint8_t lo = 0x80, hi = 0xBF;  // Allowed range of the second byte.
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // No surrogates.
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return -1;
  }
  for (int i = 1; i < need; ++i) {
    if (i >= static_cast<int>(s.size())) return 0;
    const uint8_t b = static_cast<uint8_t>(s[i]);
    const uint8_t l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
    if (b < l || b > h) return -i;
  }
  return need;
}

std::vector<uint32_t> DecodeUtf8(std::string_view text,
                                 std::vector<size_t>* offsets) {
  std::vector<uint32_t> cps;
  cps.reserve(text.size());
  if (offsets) offsets->clear();
  size_t i = 0;
  while (i < text.size()) {
    if (offsets) offsets->push_back(i);
    const int n = Utf8SequenceLength(text.substr(i));
    if (n <= 0) {
      cps.push_back(0xFFFD);
      ++i;
      continue;
    }
    const uint8_t b0 = static_cast<uint8_t>(text[i]);
    uint32_t cp = n == 1 ? b0 : n == 2 ? (b0 & 0x1F) : n == 3 ? (b0 & 0x0F)
                                                              : (b0 & 0x07);
    for (int k = 1; k < n; ++k) {
      cp = (cp << 6) | (static_cast<uint8_t>(text[i + k]) & 0x3F);
    }
    cps.push_back(cp);
    i += n;
  }
  if (offsets) offsets->push_back(text.size());
  return cps;
}

std::string Utf8Lossy(std::string_view bytes, bool final, size_t* consumed) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    const int n = Utf8SequenceLength(bytes.substr(i));
    if (n > 0) {
      out.append(bytes.data() + i, n);
      i += n;
    } else if (n == 0) {
      if (!final) break;
      out.append("\xEF\xBF\xBD");
      i = bytes.size();
    } else {
      out.append("\xEF\xBF\xBD");
      i += -n;
    }
  }
  if (consumed) *consumed = i;
  return out;
}

bool IsValidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const int n = Utf8SequenceLength(text.substr(i));
    if (n <= 0) return false;
    i += n;
  }
  return true;
}

}  // namespace rill::tokenizer
