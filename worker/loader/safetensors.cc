#include "worker/loader/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "worker/loader/str_util.h"
#include "base/json.h"

namespace rill::worker::loader {
namespace {

// The reference implementation refuses headers above 100 MB too.
constexpr uint64_t kMaxHeaderSize = 100u << 20;

absl::Status Invalid(const std::string& path, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": invalid safetensors file: ", Sv(what)));
}

bool DtypeToGgml(std::string_view dtype, kernels::cpu::GgmlType* type) {
  if (dtype == "F32")
    *type = kernels::cpu::GgmlType::kF32;
  else if (dtype == "F16")
    *type = kernels::cpu::GgmlType::kF16;
  else if (dtype == "BF16")
    *type = kernels::cpu::GgmlType::kBF16;
  // Integer buffers (BERT's position_ids) load so the file opens; no model
  // binds them as weights.
  else if (dtype == "I64")
    *type = kernels::cpu::GgmlType::kI64;
  else if (dtype == "I32")
    *type = kernels::cpu::GgmlType::kI32;
  else return false;
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  absl::StatusOr<std::unique_ptr<MappedFile>> m = MappedFile::Open(path);
  if (!m.ok()) return m.status();
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  const uint8_t* data = (*m)->data();
  size_t size = (*m)->size();
  f->mapping_ = std::move(*m);
  if (absl::Status s = f->ParseInternal(data, size); !s.ok()) return s;
  return f;
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Parse(const uint8_t* data,
                                                                        size_t size,
                                                                        std::string name) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = std::move(name);
  if (absl::Status s = f->ParseInternal(data, data == nullptr ? 0 : size); !s.ok()) return s;
  return f;
}

absl::Status SafetensorsFile::ParseInternal(const uint8_t* data, size_t size) {
  // A bad file is the caller's input (a model, an AddLora adapter):
  // INVALID_ARGUMENT, as the README promises, not DATA_LOSS.
  if (size < 8) return Invalid(path_, absl::StrCat("truncated (", size, " bytes)"));
  uint64_t header_len;
  std::memcpy(&header_len, data, 8);  // Little-endian host (checked in gguf.cc).
  if (header_len > kMaxHeaderSize) {
    return Invalid(path_, absl::StrCat("header length ", header_len, " exceeds the 100 MB limit"));
  }
  if (header_len > size - 8) {
    return Invalid(path_, absl::StrCat("truncated: header length ", header_len, " but only ",
                                       size - 8, " bytes follow"));
  }
  std::string_view header(reinterpret_cast<const char*>(data + 8), header_len);
  absl::StatusOr<base::json::JsonValue> json = base::json::ParseJson(header);
  if (!json.ok()) return Invalid(path_, absl::StrCat("header: ", json.status().message()));
  if (!json->is_object()) return Invalid(path_, "header is not a JSON object");

  const uint8_t* body = data + 8 + header_len;
  const uint64_t body_size = size - 8 - header_len;
  struct Range {
    uint64_t begin, end;
    size_t index;
  };
  std::vector<Range> ranges;
  for (const base::json::JsonValue::Member& m : json->object_members()) {
    const std::string& name = m.first;
    const base::json::JsonValue& v = m.second;
    if (name == "__metadata__") {
      if (!v.is_object()) return Invalid(path_, "__metadata__ is not an object");
      for (const base::json::JsonValue::Member& kv : v.object_members()) {
        if (!kv.second.is_string()) {
          return Invalid(path_, absl::StrCat("__metadata__ value '", kv.first, "' is not a string"));
        }
        metadata_[kv.first] = kv.second.string_value();
      }
      continue;
    }
    auto bad = [&](std::string_view what) {
      return Invalid(path_, absl::StrCat("tensor '", name, "': ", Sv(what)));
    };
    if (!v.is_object()) return bad("entry is not an object");
    const base::json::JsonValue* dtype = v.Find("dtype");
    const base::json::JsonValue* shape = v.Find("shape");
    const base::json::JsonValue* offsets = v.Find("data_offsets");
    if (dtype == nullptr || !dtype->is_string()) return bad("missing or non-string dtype");
    if (shape == nullptr || !shape->is_array()) return bad("missing or non-array shape");
    if (offsets == nullptr || !offsets->is_array() || offsets->array_items().size() != 2) {
      return bad("data_offsets must be [begin, end]");
    }
    SafetensorsTensor t;
    t.name = name;
    if (!DtypeToGgml(dtype->string_value(), &t.type)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": tensor '", name, "' has unsupported dtype ", dtype->string_value(),
                       " (supported: F32, F16, BF16, I64, I32)"));
    }
    uint64_t elements = 1;
    for (const base::json::JsonValue& d : shape->array_items()) {
      std::optional<int64_t> dim = d.AsInt64();
      if (!dim.has_value() || *dim < 0) return bad("shape entries must be non-negative integers");
      uint64_t u = static_cast<uint64_t>(*dim);
      if (u != 0 && elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / u) {
        return bad("shape overflows");
      }
      elements *= u;
      t.shape.push_back(*dim);
    }
    size_t elem_size = kernels::cpu::GgmlTypeTraitsOf(t.type).bytes_per_block;
    if (elements > std::numeric_limits<uint64_t>::max() / elem_size) return bad("size overflows");
    std::optional<uint64_t> begin = offsets->array_items()[0].AsUint64();
    std::optional<uint64_t> end = offsets->array_items()[1].AsUint64();
    if (!begin.has_value() || !end.has_value() || *begin > *end) {
      return bad("data_offsets must be non-negative integers with begin <= end");
    }
    if (*end > body_size) {
      return bad(absl::StrCat("data_offsets [", *begin, ", ", *end,
                              ") extend past the data section (", body_size, " bytes)"));
    }
    if (*end - *begin != elements * elem_size) {
      return bad(absl::StrCat("data_offsets span ", *end - *begin, " bytes but shape and dtype need ",
                              elements * elem_size));
    }
    t.data = body + *begin;
    t.nbytes = static_cast<size_t>(*end - *begin);
    if (!index_.emplace(name, tensors_.size()).second) {
      return Invalid(path_, absl::StrCat("duplicate tensor name '", name, "'"));
    }
    ranges.push_back({*begin, *end, tensors_.size()});
    tensors_.push_back(std::move(t));
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].begin < ranges[i - 1].end) {
      return Invalid(path_, absl::StrCat("tensors '", tensors_[ranges[i - 1].index].name, "' and '",
                                         tensors_[ranges[i].index].name, "' overlap"));
    }
  }
  // Reorder into file order and rebuild the index.
  std::vector<SafetensorsTensor> ordered;
  ordered.reserve(tensors_.size());
  index_.clear();
  for (const Range& r : ranges) {
    index_.emplace(tensors_[r.index].name, ordered.size());
    ordered.push_back(std::move(tensors_[r.index]));
  }
  tensors_ = std::move(ordered);
  return absl::OkStatus();
}

const SafetensorsTensor* SafetensorsFile::Find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

// ---- SafetensorsShards ----

namespace {

absl::StatusOr<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read error"));
  return ss.str();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SafetensorsShards>> SafetensorsShards::Open(const std::string& dir) {
  namespace fs = std::filesystem;
  std::unique_ptr<SafetensorsShards> shards(new SafetensorsShards());
  const std::string index_path = (fs::path(dir) / "model.safetensors.index.json").string();
  std::error_code ec;
  if (fs::exists(index_path, ec)) {
    absl::StatusOr<std::string> text = ReadSmallFile(index_path);
    if (!text.ok()) return text.status();
    absl::StatusOr<base::json::JsonValue> json = base::json::ParseJson(*text);
    if (!json.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(index_path, ": ", json.status().message()));
    }
    const base::json::JsonValue* map = json->Find("weight_map");
    if (map == nullptr || !map->is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(index_path, ": missing weight_map object"));
    }
    std::map<std::string, size_t> file_index;
    for (const base::json::JsonValue::Member& m : map->object_members()) {
      const std::string& file = m.second.string_value();
      if (!m.second.is_string() || file.empty() || absl::StrContains(file, "/") || file == "." ||
          file == "..") {
        return absl::InvalidArgumentError(absl::StrCat(
            index_path, ": weight_map entry '", m.first, "' must name a file in the same directory"));
      }
      auto it = file_index.find(file);
      if (it == file_index.end()) {
        absl::StatusOr<std::unique_ptr<SafetensorsFile>> f =
            SafetensorsFile::Open((fs::path(dir) / file).string());
        if (!f.ok()) return f.status();
        it = file_index.emplace(file, shards->files_.size()).first;
        shards->files_.push_back(std::move(*f));
      }
      const SafetensorsFile& f = *shards->files_[it->second];
      const SafetensorsTensor* t = f.Find(m.first);
      if (t == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(index_path, ": tensor '", m.first,
                                                       "' is not in ", f.path()));
      }
      shards->tensors_[m.first] = t;
    }
    return shards;
  }
  std::vector<std::string> paths;
  const std::string single = (fs::path(dir) / "model.safetensors").string();
  if (fs::exists(single, ec)) {
    paths.push_back(single);
  } else {
    for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
      if (e.path().extension() == ".safetensors") paths.push_back(e.path().string());
    }
    std::sort(paths.begin(), paths.end());
  }
  if (paths.empty()) {
    return absl::NotFoundError(absl::StrCat(dir, ": no *.safetensors files"));
  }
  for (const std::string& p : paths) {
    absl::StatusOr<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::Open(p);
    if (!f.ok()) return f.status();
    for (const SafetensorsTensor& t : (*f)->tensors()) {
      if (!shards->tensors_.emplace(t.name, &t).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(p, ": tensor '", t.name, "' also appears in another shard"));
      }
    }
    shards->files_.push_back(std::move(*f));
  }
  return shards;
}

const SafetensorsTensor* SafetensorsShards::Find(std::string_view name) const {
  auto it = tensors_.find(std::string(name));
  return it == tensors_.end() ? nullptr : it->second;
}

}  // namespace rill::worker::loader
