#include "worker/loader/gguf.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "worker/loader/str_util.h"

namespace rill::worker::loader {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the GGUF reader decodes little-endian data in place");

namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as little-endian u32.
constexpr int kMaxDims = 4;
// Nested arrays are legal but unused in practice; bound the recursion.
constexpr int kMaxArrayNesting = 16;

size_t ScalarSize(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
      return 8;
    case GgufValueType::kString:
    case GgufValueType::kArray:
      return 0;
  }
  return 0;
}

bool IsKnownValueType(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::kFloat64); }

}  // namespace

std::string_view GgufValueTypeName(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8: return "uint8";
    case GgufValueType::kInt8: return "int8";
    case GgufValueType::kUint16: return "uint16";
    case GgufValueType::kInt16: return "int16";
    case GgufValueType::kUint32: return "uint32";
    case GgufValueType::kInt32: return "int32";
    case GgufValueType::kFloat32: return "float32";
    case GgufValueType::kBool: return "bool";
    case GgufValueType::kString: return "string";
    case GgufValueType::kArray: return "array";
    case GgufValueType::kUint64: return "uint64";
    case GgufValueType::kInt64: return "int64";
    case GgufValueType::kFloat64: return "float64";
  }
  return "unknown";
}

// ---- GgufValue accessors ----

std::optional<int64_t> GgufValue::AsInt64() const {
  switch (type_) {
    case GgufValueType::kUint8: return static_cast<int64_t>(static_cast<uint8_t>(bits_));
    case GgufValueType::kInt8: return static_cast<int64_t>(static_cast<int8_t>(bits_));
    case GgufValueType::kUint16: return static_cast<int64_t>(static_cast<uint16_t>(bits_));
    case GgufValueType::kInt16: return static_cast<int64_t>(static_cast<int16_t>(bits_));
    case GgufValueType::kUint32: return static_cast<int64_t>(static_cast<uint32_t>(bits_));
    case GgufValueType::kInt32: return static_cast<int64_t>(static_cast<int32_t>(bits_));
    case GgufValueType::kInt64: return static_cast<int64_t>(bits_);
    case GgufValueType::kUint64:
      if (bits_ > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
      return static_cast<int64_t>(bits_);
    default:
      return std::nullopt;
  }
}

std::optional<uint64_t> GgufValue::AsUint64() const {
  if (type_ == GgufValueType::kUint64) return bits_;
  std::optional<int64_t> v = AsInt64();
  if (!v.has_value() || *v < 0) return std::nullopt;
  return static_cast<uint64_t>(*v);
}

std::optional<double> GgufValue::AsDouble() const {
  if (type_ == GgufValueType::kFloat32) {
    float f;
    uint32_t b = static_cast<uint32_t>(bits_);
    std::memcpy(&f, &b, 4);
    return f;
  }
  if (type_ == GgufValueType::kFloat64) {
    double d;
    std::memcpy(&d, &bits_, 8);
    return d;
  }
  if (type_ == GgufValueType::kUint64) return static_cast<double>(bits_);
  std::optional<int64_t> v = AsInt64();
  if (!v.has_value()) return std::nullopt;
  return static_cast<double>(*v);
}

std::optional<bool> GgufValue::AsBool() const {
  if (type_ != GgufValueType::kBool) return std::nullopt;
  return bits_ != 0;
}

std::optional<std::string_view> GgufValue::AsString() const {
  if (type_ != GgufValueType::kString) return std::nullopt;
  return string_;
}

GgufValue GgufValue::At(uint64_t i) const {
  CHECK_EQ(static_cast<int>(type_), static_cast<int>(GgufValueType::kArray));
  CHECK_LT(i, count_);
  if (elements_ != nullptr) return (*elements_)[i];
  GgufValue v;
  v.type_ = element_type_;
  size_t n = ScalarSize(element_type_);
  std::memcpy(&v.bits_, packed_ + i * n, n);  // bits_ is zero; little-endian host.
  return v;
}

// ---- Parser ----

class GgufParser {
 public:
  GgufParser(GgufFile* file) : f_(file), data_(file->base_), size_(file->size_) {}

  absl::Status Run() {
    uint32_t magic;
    if (!ReadU32(&magic)) return Truncated("magic");
    if (magic != kGgufMagic) {
      return absl::InvalidArgumentError(absl::StrCat(f_->path_, ": not a GGUF file (bad magic)"));
    }
    if (!ReadU32(&f_->version_)) return Truncated("version");
    if (f_->version_ != 2 && f_->version_ != 3) {
      std::string hint;
      uint32_t v = f_->version_;
      uint32_t swapped = (v >> 24) | ((v >> 8) & 0xFF00) | ((v << 8) & 0xFF0000) | (v << 24);
      if (swapped == 2 || swapped == 3) hint = " (big-endian files are not supported)";
      return absl::InvalidArgumentError(
          absl::StrCat(f_->path_, ": unsupported GGUF version ", v, hint));
    }
    uint64_t n_tensors, n_kv;
    if (!ReadU64(&n_tensors)) return Truncated("tensor count");
    if (!ReadU64(&n_kv)) return Truncated("metadata count");
    // Each KV takes >= 8 (key length) + 4 (type) + 1 bytes, each tensor info
    // >= 8 + 4 + 4 + 8 bytes, so counts beyond that are corrupt; checking up
    // front keeps reserve() bounded by the file size.
    if (n_kv > Remaining() / 13) return Corrupt(absl::StrCat("metadata count ", n_kv, " exceeds file size"));
    if (n_tensors > Remaining() / 24) {
      return Corrupt(absl::StrCat("tensor count ", n_tensors, " exceeds file size"));
    }
    f_->metadata_.reserve(n_kv);
    for (uint64_t i = 0; i < n_kv; ++i) {
      if (absl::Status s = ReadKv(i); !s.ok()) return s;
    }
    if (const GgufValue* a = f_->Find("general.alignment"); a != nullptr) {
      std::optional<uint64_t> v = a->AsUint64();
      if (a->type() != GgufValueType::kUint32 || !v.has_value() || *v == 0 || (*v & (*v - 1)) != 0) {
        return Corrupt("general.alignment must be a uint32 power of two");
      }
      f_->alignment_ = *v;
    }
    f_->tensors_.reserve(n_tensors);
    for (uint64_t i = 0; i < n_tensors; ++i) {
      if (absl::Status s = ReadTensorInfo(i); !s.ok()) return s;
    }
    // Data starts at the next multiple of the alignment after the infos.
    uint64_t a = f_->alignment_;
    uint64_t pad = (a - pos_ % a) % a;
    f_->data_offset_ = pos_ + pad;  // pos_ <= size_, a <= 2^31: no overflow.
    for (GgufTensorInfo& t : f_->tensors_) {
      if (t.nbytes == 0 && t.offset == 0) {
        t.data = data_ + std::min<uint64_t>(f_->data_offset_, size_);
        continue;
      }
      if (f_->data_offset_ > size_ || t.offset > size_ - f_->data_offset_ ||
          t.nbytes > size_ - f_->data_offset_ - t.offset) {
        return absl::DataLossError(absl::StrCat(
            f_->path_, ": tensor '", Sv(t.name), "' data [", t.offset, ", +", t.nbytes,
            ") extends past the end of the file (data section is ",
            f_->data_offset_ > size_ ? 0 : size_ - f_->data_offset_, " bytes)"));
      }
      t.data = data_ + f_->data_offset_ + t.offset;
    }
    return absl::OkStatus();
  }

 private:
  size_t Remaining() const { return size_ - pos_; }

  absl::Status Truncated(std::string_view what) const {
    return absl::DataLossError(
        absl::StrCat(f_->path_, ": truncated GGUF file while reading ", Sv(what), " at offset ", pos_));
  }
  absl::Status Corrupt(std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(f_->path_, ": invalid GGUF file: ", Sv(what)));
  }

  bool ReadBytes(void* out, size_t n) {
    if (Remaining() < n) return false;
    std::memcpy(out, data_ + pos_, n);
    pos_ += n;
    return true;
  }
  bool ReadU32(uint32_t* v) { return ReadBytes(v, 4); }
  bool ReadU64(uint64_t* v) { return ReadBytes(v, 8); }

  bool ReadString(std::string_view* out) {
    uint64_t len;
    if (!ReadU64(&len)) return false;
    if (len > Remaining()) {
      pos_ -= 8;  // Report the offset of the length field.
      return false;
    }
    *out = std::string_view(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return true;
  }

  absl::Status ReadValue(GgufValueType type, int depth, std::string_view key, GgufValue* out) {
    out->type_ = type;
    if (type == GgufValueType::kString) {
      if (!ReadString(&out->string_)) return Truncated(absl::StrCat("string value of '", Sv(key), "'"));
      return absl::OkStatus();
    }
    if (type != GgufValueType::kArray) {
      size_t n = ScalarSize(type);
      if (!ReadBytes(&out->bits_, n)) return Truncated(absl::StrCat("value of '", Sv(key), "'"));
      if (type == GgufValueType::kBool && out->bits_ > 1) {
        return Corrupt(absl::StrCat("bool value of '", Sv(key), "' is ", out->bits_));
      }
      return absl::OkStatus();
    }
    if (depth >= kMaxArrayNesting) return Corrupt(absl::StrCat("arrays nested too deeply in '", Sv(key), "'"));
    uint32_t et;
    if (!ReadU32(&et)) return Truncated(absl::StrCat("array type of '", Sv(key), "'"));
    if (!IsKnownValueType(et)) {
      return Corrupt(absl::StrCat("unknown array element type ", et, " in '", Sv(key), "'"));
    }
    out->element_type_ = static_cast<GgufValueType>(et);
    if (!ReadU64(&out->count_)) return Truncated(absl::StrCat("array length of '", Sv(key), "'"));
    size_t n = ScalarSize(out->element_type_);
    if (n != 0) {
      if (out->count_ > Remaining() / n) {
        return absl::DataLossError(absl::StrCat(f_->path_, ": array '", Sv(key), "' of ", out->count_,
                                                " elements extends past the end of the file"));
      }
      out->packed_ = data_ + pos_;
      if (out->element_type_ == GgufValueType::kBool) {
        for (uint64_t i = 0; i < out->count_; ++i) {
          if (out->packed_[i] > 1) return Corrupt(absl::StrCat("bool array '", Sv(key), "' has value ", out->packed_[i]));
        }
      }
      pos_ += out->count_ * n;
      return absl::OkStatus();
    }
    // Strings take >= 8 bytes, arrays >= 12: bounds the reservation.
    size_t min_size = out->element_type_ == GgufValueType::kString ? 8 : 12;
    if (out->count_ > Remaining() / min_size) {
      return absl::DataLossError(absl::StrCat(f_->path_, ": array '", Sv(key), "' of ", out->count_,
                                              " elements extends past the end of the file"));
    }
    auto elements = std::make_shared<std::vector<GgufValue>>();
    elements->resize(out->count_);
    for (uint64_t i = 0; i < out->count_; ++i) {
      if (absl::Status s = ReadValue(out->element_type_, depth + 1, key, &(*elements)[i]); !s.ok()) {
        return s;
      }
    }
    out->elements_ = std::move(elements);
    return absl::OkStatus();
  }

  absl::Status ReadKv(uint64_t index) {
    GgufKv kv;
    if (!ReadString(&kv.key)) return Truncated(absl::StrCat("key of metadata entry ", index));
    uint32_t type;
    if (!ReadU32(&type)) return Truncated(absl::StrCat("type of '", Sv(kv.key), "'"));
    if (!IsKnownValueType(type)) return Corrupt(absl::StrCat("unknown value type ", type, " for '", Sv(kv.key), "'"));
    if (absl::Status s = ReadValue(static_cast<GgufValueType>(type), 0, kv.key, &kv.value); !s.ok()) {
      return s;
    }
    if (!f_->metadata_index_.emplace(kv.key, f_->metadata_.size()).second) {
      return Corrupt(absl::StrCat("duplicate metadata key '", Sv(kv.key), "'"));
    }
    f_->metadata_.push_back(std::move(kv));
    return absl::OkStatus();
  }

  absl::Status ReadTensorInfo(uint64_t index) {
    GgufTensorInfo t;
    if (!ReadString(&t.name)) return Truncated(absl::StrCat("name of tensor ", index));
    uint32_t n_dims;
    if (!ReadU32(&n_dims)) return Truncated(absl::StrCat("dims of tensor '", Sv(t.name), "'"));
    if (n_dims == 0 || n_dims > kMaxDims) {
      return Corrupt(absl::StrCat("tensor '", Sv(t.name), "' has ", n_dims, " dims (1..4 supported)"));
    }
    t.ne.resize(n_dims);
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t v;
      if (!ReadU64(&v)) return Truncated(absl::StrCat("shape of tensor '", Sv(t.name), "'"));
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Corrupt(absl::StrCat("tensor '", Sv(t.name), "' dim ", d, " is too large"));
      }
      t.ne[d] = static_cast<int64_t>(v);
    }
    uint32_t type;
    if (!ReadU32(&type)) return Truncated(absl::StrCat("type of tensor '", Sv(t.name), "'"));
    if (!kernels::cpu::GetGgmlTypeTraits(type).has_value()) {
      return Corrupt(absl::StrCat("tensor '", Sv(t.name), "' has unknown ggml type ", type));
    }
    t.type = static_cast<kernels::cpu::GgmlType>(type);
    if (!ReadU64(&t.offset)) return Truncated(absl::StrCat("offset of tensor '", Sv(t.name), "'"));
    if (t.offset % f_->alignment_ != 0) {
      return Corrupt(absl::StrCat("tensor '", Sv(t.name), "' offset ", t.offset,
                                  " is not a multiple of the alignment ", f_->alignment_));
    }
    std::optional<size_t> nbytes = kernels::cpu::GgmlTensorBytes(t.type, t.ne.data(), n_dims);
    if (!nbytes.has_value()) {
      return Corrupt(absl::StrCat("tensor '", Sv(t.name), "' has an invalid shape for type ",
                                  Sv(kernels::cpu::GgmlTypeName(t.type)),
                                  " (row not a multiple of the block size, or size overflow)"));
    }
    t.nbytes = *nbytes;
    t.data = nullptr;
    if (!f_->tensor_index_.emplace(t.name, f_->tensors_.size()).second) {
      return Corrupt(absl::StrCat("duplicate tensor name '", Sv(t.name), "'"));
    }
    f_->tensors_.push_back(std::move(t));
    return absl::OkStatus();
  }

  GgufFile* f_;
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// ---- GgufFile ----

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  absl::StatusOr<std::unique_ptr<MappedFile>> m = MappedFile::Open(path);
  if (!m.ok()) return m.status();
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  f->base_ = (*m)->data();
  f->size_ = (*m)->size();
  f->mapping_ = std::move(*m);
  GgufParser parser(f.get());
  if (absl::Status s = parser.Run(); !s.ok()) return s;
  return f;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Parse(const uint8_t* data, size_t size,
                                                          std::string name) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = std::move(name);
  f->base_ = data;
  f->size_ = data == nullptr ? 0 : size;
  GgufParser parser(f.get());
  if (absl::Status s = parser.Run(); !s.ok()) return s;
  return f;
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].value;
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

absl::Status Missing(const std::string& path, std::string_view key) {
  return absl::NotFoundError(absl::StrCat(path, ": metadata key '", Sv(key), "' not found"));
}
absl::Status WrongType(const std::string& path, std::string_view key, const GgufValue& v,
                       std::string_view want) {
  std::string got(GgufValueTypeName(v.type()));
  if (v.type() == GgufValueType::kArray) absl::StrAppend(&got, " of ", Sv(GgufValueTypeName(v.element_type())));
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": metadata key '", Sv(key), "' is ", got, ", expected ", Sv(want)));
}

}  // namespace

absl::StatusOr<std::string_view> GgufFile::GetString(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(path_, key);
  std::optional<std::string_view> s = v->AsString();
  if (!s.has_value()) return WrongType(path_, key, *v, "string");
  return *s;
}

absl::StatusOr<int64_t> GgufFile::GetInt(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(path_, key);
  std::optional<int64_t> i = v->AsInt64();
  if (!i.has_value()) return WrongType(path_, key, *v, "an integer (fitting int64)");
  return *i;
}

absl::StatusOr<double> GgufFile::GetFloat(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(path_, key);
  std::optional<double> d = v->AsDouble();
  if (!d.has_value()) return WrongType(path_, key, *v, "a number");
  return *d;
}

absl::StatusOr<bool> GgufFile::GetBool(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(path_, key);
  std::optional<bool> b = v->AsBool();
  if (!b.has_value()) return WrongType(path_, key, *v, "bool");
  return *b;
}

absl::StatusOr<std::vector<std::string_view>> GgufFile::GetStringArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(path_, key);
  if (v->type() != GgufValueType::kArray || v->element_type() != GgufValueType::kString) {
    return WrongType(path_, key, *v, "array of string");
  }
  std::vector<std::string_view> out;
  out.reserve(v->size());
  for (uint64_t i = 0; i < v->size(); ++i) out.push_back(*v->At(i).AsString());
  return out;
}

absl::StatusOr<std::vector<int64_t>> GgufFile::GetIntArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(path_, key);
  if (v->type() != GgufValueType::kArray || ScalarSize(v->element_type()) == 0 ||
      v->element_type() == GgufValueType::kFloat32 || v->element_type() == GgufValueType::kFloat64 ||
      v->element_type() == GgufValueType::kBool) {
    return WrongType(path_, key, *v, "array of integers");
  }
  std::vector<int64_t> out;
  out.reserve(v->size());
  for (uint64_t i = 0; i < v->size(); ++i) {
    std::optional<int64_t> x = v->At(i).AsInt64();
    if (!x.has_value()) return WrongType(path_, key, *v, "array of integers fitting int64");
    out.push_back(*x);
  }
  return out;
}

absl::StatusOr<std::vector<float>> GgufFile::GetFloatArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(path_, key);
  if (v->type() != GgufValueType::kArray || ScalarSize(v->element_type()) == 0 ||
      v->element_type() == GgufValueType::kBool) {
    return WrongType(path_, key, *v, "array of numbers");
  }
  std::vector<float> out;
  out.reserve(v->size());
  for (uint64_t i = 0; i < v->size(); ++i) out.push_back(static_cast<float>(*v->At(i).AsDouble()));
  return out;
}

}  // namespace rill::worker::loader
