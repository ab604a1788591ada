// Client input quoted in error messages is cut short: an error echoing a
// 10 KB method name, request id or path would otherwise overflow gRPC's
// metadata limit and reach the client as RESOURCE_EXHAUSTED instead of the
// intended code.
#ifndef RILL_BASE_MESSAGE_TEXT_H_
#define RILL_BASE_MESSAGE_TEXT_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace rill {

// `s` itself when at most `max_bytes` long; else its first `max_bytes` bytes
// (cut on a UTF-8 character boundary) followed by "...(N bytes)".
inline std::string ShortForMessage(std::string_view s, size_t max_bytes = 64) {
  if (s.size() <= max_bytes) return std::string(s);
  size_t cut = max_bytes;
  // Back up over continuation bytes (10xxxxxx) to a character start.
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return std::string(s.substr(0, cut)) + "...(" + std::to_string(s.size()) + " bytes)";
}

}  // namespace rill

#endif  // RILL_BASE_MESSAGE_TEXT_H_
