#include "engine/service/tokenizer_zip.h"

#include <openssl/sha.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "base/json.h"

namespace rill::engine::service {
namespace {

uint32_t Crc32(const std::string& bytes) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char b : bytes) crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

void Put16(std::string* out, uint16_t v) {
  out->push_back(static_cast<char>(v & 0xFF));
  out->push_back(static_cast<char>(v >> 8));
}
void Put32(std::string* out, uint32_t v) {
  Put16(out, static_cast<uint16_t>(v & 0xFFFF));
  Put16(out, static_cast<uint16_t>(v >> 16));
}

}  // namespace

std::string ZipStored(const std::vector<ZipEntry>& entries) {
  std::string out;
  std::string central;
  for (const ZipEntry& e : entries) {
    const uint32_t offset = static_cast<uint32_t>(out.size());
    const uint32_t crc = Crc32(e.data);
    const uint32_t size = static_cast<uint32_t>(e.data.size());
    // Local file header: version 2.0, no flags, method 0 (stored), DOS time 0.
    Put32(&out, 0x04034b50);
    Put16(&out, 20);
    Put16(&out, 0);
    Put16(&out, 0);
    Put16(&out, 0);
    Put16(&out, 0x21);  // 1980-01-01.
    Put32(&out, crc);
    Put32(&out, size);
    Put32(&out, size);
    Put16(&out, static_cast<uint16_t>(e.name.size()));
    Put16(&out, 0);
    out += e.name;
    out += e.data;
    // Its central directory record.
    Put32(&central, 0x02014b50);
    Put16(&central, 20);
    Put16(&central, 20);
    Put16(&central, 0);
    Put16(&central, 0);
    Put16(&central, 0);
    Put16(&central, 0x21);
    Put32(&central, crc);
    Put32(&central, size);
    Put32(&central, size);
    Put16(&central, static_cast<uint16_t>(e.name.size()));
    Put16(&central, 0);  // Extra.
    Put16(&central, 0);  // Comment.
    Put16(&central, 0);  // Disk.
    Put16(&central, 0);  // Internal attributes.
    Put32(&central, 0);  // External attributes.
    Put32(&central, offset);
    central += e.name;
  }
  const uint32_t central_offset = static_cast<uint32_t>(out.size());
  out += central;
  Put32(&out, 0x06054b50);
  Put16(&out, 0);
  Put16(&out, 0);
  Put16(&out, static_cast<uint16_t>(entries.size()));
  Put16(&out, static_cast<uint16_t>(entries.size()));
  Put32(&out, static_cast<uint32_t>(central.size()));
  Put32(&out, central_offset);
  Put16(&out, 0);
  return out;
}

std::string Sha256Hex(const std::string& bytes) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char b : digest) {
    hex.push_back(kHex[b >> 4]);
    hex.push_back(kHex[b & 0xF]);
  }
  return hex;
}

namespace {

namespace json = ::rill::base::json;

void WriteJson(const json::JsonValue& v, std::string* out) {
  switch (v.type()) {
    case json::JsonValue::Type::kNull:
      out->append("null");
      return;
    case json::JsonValue::Type::kBool:
      out->append(v.bool_value() ? "true" : "false");
      return;
    case json::JsonValue::Type::kNumber:
      out->append(v.number_literal());
      return;
    case json::JsonValue::Type::kString:
      out->append(json::QuoteJsonString(v.string_value()));
      return;
    case json::JsonValue::Type::kArray:
      out->push_back('[');
      for (size_t i = 0; i < v.array_items().size(); ++i) {
        if (i > 0) out->push_back(',');
        WriteJson(v.array_items()[i], out);
      }
      out->push_back(']');
      return;
    case json::JsonValue::Type::kObject:
      out->push_back('{');
      for (size_t i = 0; i < v.object_members().size(); ++i) {
        if (i > 0) out->push_back(',');
        out->append(json::QuoteJsonString(v.object_members()[i].first));
        out->push_back(':');
        WriteJson(v.object_members()[i].second, out);
      }
      out->push_back('}');
      return;
  }
}

// A tokenizer.json without its padding and truncation settings. The gateway
// tokenizes one text per request and sends its ids: sentence-transformers'
// files pad every text to 128 [PAD] tokens (and cut it there), which the
// engine would then embed, unlike Rill's own tokenizer (the native Encode).
// A file that does not parse as a JSON object is left as it is.
std::string WithoutPaddingOrTruncation(const std::string& text) {
  absl::StatusOr<json::JsonValue> doc = json::ParseJson(text);
  if (!doc.ok() || !doc->is_object()) return text;
  const json::JsonValue* padding = doc->Find("padding");
  const json::JsonValue* truncation = doc->Find("truncation");
  if ((padding == nullptr || padding->is_null()) && (truncation == nullptr || truncation->is_null())) {
    return text;
  }
  std::vector<json::JsonValue::Member> members;
  for (const json::JsonValue::Member& m : doc->object_members()) {
    const bool drop = m.first == "padding" || m.first == "truncation";
    members.push_back({m.first, drop ? json::JsonValue() : m.second});
  }
  std::string out;
  WriteJson(json::JsonValue::Object(std::move(members)), &out);
  return out;
}

}  // namespace

absl::StatusOr<std::vector<ZipEntry>> TokenizerArtifacts(const std::string& model_path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(model_path, ec)) {
    return absl::FailedPreconditionError(
        "GetTokenizer: the model is a single file without a tokenizer the engine can "
        "describe; give the gateway the tokenizer itself (smg --tokenizer-path)");
  }
  std::vector<ZipEntry> entries;
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "config.json",
                           "generation_config.json", "special_tokens_map.json"}) {
    const fs::path path = fs::path(model_path) / name;
    if (!fs::is_regular_file(path, ec)) {
      if (std::string(name) == "tokenizer.json" || std::string(name) == "tokenizer_config.json") {
        return absl::FailedPreconditionError(
            absl::StrCat("GetTokenizer: the model directory has no ", name));
      }
      continue;
    }
    std::ifstream in(path, std::ios::binary);
    std::ostringstream data;
    data << in.rdbuf();
    if (!in.good() && !in.eof()) {
      return absl::UnavailableError(absl::StrCat("GetTokenizer: cannot read ", path.string()));
    }
    entries.push_back({name, std::string(name) == "tokenizer.json"
                                 ? WithoutPaddingOrTruncation(data.str())
                                 : data.str()});
  }
  return entries;
}

}  // namespace rill::engine::service
