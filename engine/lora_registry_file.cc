#include "engine/lora_registry_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/json.h"

namespace rill::engine {
namespace {

// A JSON string literal (RFC 8259 escapes; other bytes as they are).
std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

absl::Status Invalid(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("LoRA registry file ", path, ": ", what));
}

}  // namespace

absl::StatusOr<std::vector<LoraRequest>> ReadLoraRegistryFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return std::vector<LoraRequest>();
    return Invalid(path, std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  absl::StatusOr<json::JsonValue> doc = json::ParseJson(text.str());
  if (!doc.ok()) return Invalid(path, std::string(doc.status().message()));
  const json::JsonValue* list = doc->Find("adapters");
  if (list == nullptr || !list->is_array()) return Invalid(path, "no \"adapters\" list");
  std::vector<LoraRequest> out;
  for (const json::JsonValue& a : list->array_items()) {
    const json::JsonValue* name = a.Find("name");
    const json::JsonValue* id = a.Find("id");
    const json::JsonValue* p = a.Find("path");
    if (name == nullptr || !name->is_string() || p == nullptr || !p->is_string() ||
        id == nullptr || !id->AsInt64().has_value()) {
      return Invalid(path, "an adapter without a string name and path and an integer id");
    }
    out.push_back(LoraRequest{name->string_value(), *id->AsInt64(), p->string_value()});
  }
  return out;
}

absl::Status WriteLoraRegistryFile(const std::string& path,
                                   const std::vector<LoraRequest>& adapters) {
  std::string text = "{\"adapters\": [";
  for (size_t i = 0; i < adapters.size(); ++i) {
    absl::StrAppend(&text, i ? ",\n  " : "\n  ", "{\"name\": ", Quote(adapters[i].name),
                    ", \"id\": ", adapters[i].id, ", \"path\": ", Quote(adapters[i].path), "}");
  }
  absl::StrAppend(&text, adapters.empty() ? "" : "\n", "]}\n");
  const std::string tmp = absl::StrCat(path, ".tmp");
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("cannot write ", tmp, ": ", std::strerror(errno)));
  }
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  const bool ok = done == text.size() && fsync(fd) == 0;
  const int err = errno;
  close(fd);
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(ok ? errno : err);
    unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("cannot write ", path, ": ", why));
  }
  return absl::OkStatus();
}

}  // namespace rill::engine
