#ifndef RILL_BASE_UTF8_H_
#define RILL_BASE_UTF8_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace rill {

// Appends the UTF-8 encoding of code point cp (callers pass cp <= 0x10FFFF;
// JSON's \u escapes and the tokenizers' byte maps both do).
void AppendUtf8(uint32_t cp, std::string* out);

// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or code
// points past U+10FFFF), as protobuf requires of string fields.
bool IsValidUtf8(std::string_view s);

}  // namespace rill

#endif  // RILL_BASE_UTF8_H_
