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
#include "base/secret_file.h"

namespace rill::engine {
namespace {

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
  absl::StatusOr<base::json::JsonValue> doc = base::json::ParseJson(text.str());
  if (!doc.ok()) return Invalid(path, std::string(doc.status().message()));
  const base::json::JsonValue* list = doc->Find("adapters");
  if (list == nullptr || !list->is_array()) return Invalid(path, "no \"adapters\" list");
  std::vector<LoraRequest> out;
  for (const base::json::JsonValue& a : list->array_items()) {
    const base::json::JsonValue* name = a.Find("name");
    const base::json::JsonValue* id = a.Find("id");
    const base::json::JsonValue* p = a.Find("path");
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
    absl::StrAppend(&text, i ? ",\n  " : "\n  ",
                    "{\"name\": ", base::json::QuoteJsonString(adapters[i].name),
                    ", \"id\": ", adapters[i].id,
                    ", \"path\": ", base::json::QuoteJsonString(adapters[i].path), "}");
  }
  absl::StrAppend(&text, adapters.empty() ? "" : "\n", "]}\n");
  return base::WritePrivateFileAtomically(path, text);
}

}  // namespace rill::engine
