#include "tokenizer/byte_level.h"

#include <array>
#include <vector>

#include "tokenizer/unicode_data.h"

namespace rill::tokenizer {
namespace {

struct Tables {
  std::array<uint32_t, 256> byte_to_cp;
  std::array<int16_t, 512> cp_to_byte;  // All alphabet code points are < 512.
  std::array<std::string, 256> byte_to_utf8;
};

const Tables& GetTables() {
  static const Tables* tables = [] {
    auto* t = new Tables;
    t->cp_to_byte.fill(-1);
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
             (b >= 0xAE && b <= 0xFF);
    };
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cp = printable(b) ? b : next++;
      t->byte_to_cp[b] = cp;
      t->cp_to_byte[cp] = static_cast<int16_t>(b);
      AppendUtf8(cp, &t->byte_to_utf8[b]);
    }
    return t;
  }();
  return *tables;
}

}  // namespace

uint32_t ByteToCodePoint(uint8_t b) { return GetTables().byte_to_cp[b]; }

int CodePointToByte(uint32_t cp) {
  return cp < 512 ? GetTables().cp_to_byte[cp] : -1;
}

std::string BytesToByteLevel(std::string_view bytes) {
  const Tables& t = GetTables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += t.byte_to_utf8[static_cast<uint8_t>(c)];
  return out;
}

bool ByteLevelToBytes(std::string_view token, std::string* out) {
  const std::vector<uint32_t> cps = DecodeUtf8(token);
  std::string bytes;
  bytes.reserve(cps.size());
  for (uint32_t cp : cps) {
    const int b = CodePointToByte(cp);
    if (b < 0) return false;
    bytes.push_back(static_cast<char>(b));
  }
  *out += bytes;
  return true;
}

}  // namespace rill::tokenizer
