#ifndef RILL_BASE_UTF8_H_
#define RILL_BASE_UTF8_H_

#include <cstdint>
#include <string>

namespace rill {

// Appends the UTF-8 encoding of code point cp (callers pass cp <= 0x10FFFF;
// JSON's \u escapes and the tokenizers' byte maps both do).
void AppendUtf8(uint32_t cp, std::string* out);

}  // namespace rill

#endif  // RILL_BASE_UTF8_H_
