#ifndef RILL_BASE_MESSAGE_TEXT_H_
#define RILL_BASE_MESSAGE_TEXT_H_

// Client- or file-supplied text quoted in an error message: kept short, so
// a 10 KB key or id never turns an error into a huge (or metadata-limit
// breaking) status.

#include <cstddef>
#include <string>
#include <string_view>

namespace rill {

// `s` itself when at most `max_bytes` long, else its first max_bytes bytes
// (cut on a UTF-8 character boundary) followed by "...(N bytes)".
inline std::string ShortForMessage(std::string_view s, size_t max_bytes = 64) {
  if (s.size() <= max_bytes) return std::string(s);
  size_t cut = max_bytes;
  // Back up over UTF-8 continuation bytes (10xxxxxx) so no character is split.
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return std::string(s.substr(0, cut)) + "...(" + std::to_string(s.size()) + " bytes)";
}

}  // namespace rill

#endif  // RILL_BASE_MESSAGE_TEXT_H_
