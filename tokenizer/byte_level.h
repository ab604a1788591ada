// GPT-2's reversible byte <-> printable-code-point alphabet.
#ifndef RILL_TOKENIZER_BYTE_LEVEL_H_
#define RILL_TOKENIZER_BYTE_LEVEL_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace rill::tokenizer {

// Code point that represents byte b in byte-level BPE vocabularies.
uint32_t ByteToCodePoint(uint8_t b);

// Inverse of ByteToCodePoint; -1 when cp is not in the alphabet.
int CodePointToByte(uint32_t cp);

// Maps each byte of `bytes` to its code point, UTF-8 encoded.
std::string BytesToByteLevel(std::string_view bytes);

// Maps a byte-level token back to raw bytes. Returns false (leaving *out
// untouched) if some code point is outside the alphabet.
bool ByteLevelToBytes(std::string_view token, std::string* out);

}  // namespace rill::tokenizer

#endif  // RILL_TOKENIZER_BYTE_LEVEL_H_
