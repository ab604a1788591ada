// Unicode helpers for the tokenizers: general-category classes (from a
// generated range table) and UTF-8 encoding/decoding.
#ifndef RILL_TOKENIZER_UNICODE_DATA_H_
#define RILL_TOKENIZER_UNICODE_DATA_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/utf8.h"

namespace rill::tokenizer {

// Category bits; a code point has exactly one major-category bit plus
// kCategorySpace when it has the Unicode White_Space property.
inline constexpr uint8_t kCategoryLetter = 1;     // \p{L}
inline constexpr uint8_t kCategoryNumber = 2;     // \p{N}
inline constexpr uint8_t kCategoryPunct = 4;      // \p{P}
inline constexpr uint8_t kCategorySymbol = 8;     // \p{S}
inline constexpr uint8_t kCategoryMark = 16;      // \p{M}
inline constexpr uint8_t kCategorySeparator = 32; // \p{Z}
inline constexpr uint8_t kCategoryOther = 64;     // \p{C} (incl. unassigned)
inline constexpr uint8_t kCategorySpace = 128;    // \s (White_Space)

// Category bits of a code point (values > 0x10FFFF are kCategoryOther).
uint8_t CodePointCategory(uint32_t cp);

inline bool IsLetter(uint32_t cp) {
  return CodePointCategory(cp) & kCategoryLetter;
}
inline bool IsNumber(uint32_t cp) {
  return CodePointCategory(cp) & kCategoryNumber;
}
inline bool IsSpace(uint32_t cp) {
  return CodePointCategory(cp) & kCategorySpace;
}

// Appends the UTF-8 encoding of cp (one definition, in base/utf8).
using ::rill::AppendUtf8;

// Decodes text into code points. Invalid bytes decode to U+FFFD one byte at
// a time, so the result is total; `offsets` (optional) receives the byte
// offset of each code point plus a final entry == text.size().
std::vector<uint32_t> DecodeUtf8(std::string_view text,
                                 std::vector<size_t>* offsets = nullptr);

// Length of the well-formed UTF-8 sequence starting at text[0]:
//   > 0: a complete valid sequence of that many bytes;
//   0:   text is a valid but truncated prefix of a sequence (need more bytes);
//   < 0: invalid; -n means the maximal invalid subpart is n bytes (n >= 1).
int Utf8SequenceLength(std::string_view text);

// Converts bytes to valid UTF-8, replacing each maximal invalid subpart with
// U+FFFD (the policy of Rust's String::from_utf8_lossy, which HF uses).
// With `final` false, a truncated sequence at the end is left unconsumed and
// *consumed (if given) tells how many input bytes were converted.
std::string Utf8Lossy(std::string_view bytes, bool final = true,
                      size_t* consumed = nullptr);

bool IsValidUtf8(std::string_view text);

}  // namespace rill::tokenizer

namespace rill::tokenizer::internal {
struct UnicodeRange {
  uint32_t first;
  uint32_t last;
  uint8_t flags;
};
extern const UnicodeRange kUnicodeRanges[];
extern const int kNumUnicodeRanges;
}  // namespace rill::tokenizer::internal

#endif  // RILL_TOKENIZER_UNICODE_DATA_H_
