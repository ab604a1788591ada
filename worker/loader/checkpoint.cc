#include "worker/loader/checkpoint.h"

#include <sys/stat.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker/loader/checkpoint_internal.h"
#include "worker/loader/str_util.h"

namespace rill::worker::loader {

const TensorRef* Checkpoint::Find(std::string_view canonical_name) const {
  auto it = tensors_.find(std::string(canonical_name));
  return it == tensors_.end() ? nullptr : &it->second;
}

absl::StatusOr<const TensorRef*> Checkpoint::Get(std::string_view canonical_name) const {
  const TensorRef* t = Find(canonical_name);
  if (t == nullptr) {
    return absl::NotFoundError(
        absl::StrCat(path_, ": tensor '", Sv(canonical_name), "' not found"));
  }
  return t;
}

namespace {

std::string Shape(const std::vector<int64_t>& ne) { return absl::StrCat("[", absl::StrJoin(ne, ", "), "]"); }

class Validator {
 public:
  explicit Validator(const Checkpoint& c) : c_(c) {}

  // Required tensor with exactly shape `ne` (ggml order).
  absl::Status Expect(const std::string& name, std::vector<int64_t> ne) {
    const TensorRef* t = c_.Find(name);
    if (t == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(c_.path(), ": missing tensor '", name,
                                                     "' (expected shape ", Shape(ne), ")"));
    }
    return CheckShape(name, *t, ne);
  }
  // Optional tensor: shape checked only if present.
  absl::Status Maybe(const std::string& name, std::vector<int64_t> ne) {
    const TensorRef* t = c_.Find(name);
    return t == nullptr ? absl::OkStatus() : CheckShape(name, *t, ne);
  }

 private:
  absl::Status CheckShape(const std::string& name, const TensorRef& t, const std::vector<int64_t>& ne) {
    if (t.ne != ne) {
      return absl::InvalidArgumentError(absl::StrCat(c_.path(), ": tensor '", name, "' has shape ",
                                                     Shape(t.ne), ", expected ", Shape(ne),
                                                     " (ggml order) from the config"));
    }
    return absl::OkStatus();
  }
  const Checkpoint& c_;
};

#define RILL_RETURN_IF_ERROR(expr)         \
  do {                                     \
    absl::Status _st = (expr);             \
    if (!_st.ok()) return _st;             \
  } while (0)

}  // namespace

absl::Status ExpectTensorShape(const Checkpoint& c, const std::string& name,
                               const std::vector<int64_t>& ne) {
  return Validator(c).Expect(name, ne);
}

absl::Status CheckpointBuilder::Validate(const Checkpoint& c) {
  const ModelConfig& m = c.config();
  auto positive = [&](const char* what, int64_t v) -> absl::Status {
    if (v > 0 && v < (int64_t{1} << 40)) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(c.path(), ": config ", what, " = ", v, " is invalid"));
  };
  RILL_RETURN_IF_ERROR(positive("vocab_size", m.vocab_size));
  RILL_RETURN_IF_ERROR(positive("hidden_size", m.hidden_size));
  RILL_RETURN_IF_ERROR(positive("num_layers", m.num_layers));
  RILL_RETURN_IF_ERROR(positive("num_heads", m.num_heads));
  RILL_RETURN_IF_ERROR(positive("num_kv_heads", m.num_kv_heads));
  RILL_RETURN_IF_ERROR(positive("head_dim", m.head_dim));
  RILL_RETURN_IF_ERROR(positive("intermediate_size", m.intermediate_size));
  RILL_RETURN_IF_ERROR(positive("max_position_embeddings", m.max_position_embeddings));
  if (m.num_heads % m.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(c.path(), ": num_heads ", m.num_heads,
                                                   " is not a multiple of num_kv_heads ", m.num_kv_heads));
  }
  const int64_t h = m.hidden_size, v = m.vocab_size, inter = m.intermediate_size;
  const int64_t q = m.num_heads * m.head_dim, kv = m.num_kv_heads * m.head_dim;
  Validator val(c);
  RILL_RETURN_IF_ERROR(val.Expect("token_embd", {h, v}));
  if (m.architecture == "bert") {
    RILL_RETURN_IF_ERROR(positive("type_vocab_size", m.type_vocab_size));
    if (m.num_heads * m.head_dim != h) {
      return absl::InvalidArgumentError(absl::StrCat(c.path(), ": hidden_size ", h,
                                                     " is not a multiple of num_heads ", m.num_heads));
    }
    RILL_RETURN_IF_ERROR(val.Expect("pos_embd", {h, m.max_position_embeddings}));
    RILL_RETURN_IF_ERROR(val.Expect("token_types", {h, m.type_vocab_size}));
    RILL_RETURN_IF_ERROR(val.Expect("token_embd_norm", {h}));
    RILL_RETURN_IF_ERROR(val.Expect("token_embd_norm.bias", {h}));
    for (int64_t i = 0; i < m.num_layers; ++i) {
      const std::string b = absl::StrCat("blk.", i, ".");
      for (const char* name : {"attn_q", "attn_k", "attn_v", "attn_output"}) {
        RILL_RETURN_IF_ERROR(val.Expect(b + name, {h, h}));
        RILL_RETURN_IF_ERROR(val.Expect(b + name + ".bias", {h}));
      }
      for (const char* name : {"attn_output_norm", "layer_output_norm"}) {
        RILL_RETURN_IF_ERROR(val.Expect(b + name, {h}));
        RILL_RETURN_IF_ERROR(val.Expect(b + name + ".bias", {h}));
      }
      RILL_RETURN_IF_ERROR(val.Expect(b + "ffn_up", {h, inter}));
      RILL_RETURN_IF_ERROR(val.Expect(b + "ffn_up.bias", {inter}));
      RILL_RETURN_IF_ERROR(val.Expect(b + "ffn_down", {inter, h}));
      RILL_RETURN_IF_ERROR(val.Expect(b + "ffn_down.bias", {h}));
    }
    return absl::OkStatus();
  }
  RILL_RETURN_IF_ERROR(val.Expect("output_norm", {h}));
  if (m.tie_word_embeddings) {
    if (c.Find("output") != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(c.path(), ": tensor 'output' present but embeddings are tied"));
    }
  } else {
    RILL_RETURN_IF_ERROR(val.Expect("output", {h, v}));
  }
  if (m.architecture == "llama") {
    for (int64_t i = 0; i < m.num_layers; ++i) {
      const std::string b = absl::StrCat("blk.", i, ".");
      RILL_RETURN_IF_ERROR(val.Expect(b + "attn_norm", {h}));
      RILL_RETURN_IF_ERROR(val.Expect(b + "attn_q", {h, q}));
      RILL_RETURN_IF_ERROR(val.Expect(b + "attn_k", {h, kv}));
      RILL_RETURN_IF_ERROR(val.Expect(b + "attn_v", {h, kv}));
      RILL_RETURN_IF_ERROR(val.Expect(b + "attn_output", {q, h}));
      RILL_RETURN_IF_ERROR(val.Expect(b + "ffn_norm", {h}));
      if (m.IsMoeLayer(i)) {
        RILL_RETURN_IF_ERROR(ValidateMoeLayer(c, i));
      } else {
        RILL_RETURN_IF_ERROR(val.Expect(b + "ffn_gate", {h, inter}));
        RILL_RETURN_IF_ERROR(val.Expect(b + "ffn_up", {h, inter}));
        RILL_RETURN_IF_ERROR(val.Expect(b + "ffn_down", {inter, h}));
      }
      if (m.attention_bias) {
        RILL_RETURN_IF_ERROR(val.Expect(b + "attn_q.bias", {q}));
        RILL_RETURN_IF_ERROR(val.Expect(b + "attn_k.bias", {kv}));
        RILL_RETURN_IF_ERROR(val.Expect(b + "attn_v.bias", {kv}));
      }
      RILL_RETURN_IF_ERROR(val.Maybe(b + "attn_output.bias", {h}));
      if (m.post_norms) {
        RILL_RETURN_IF_ERROR(val.Expect(b + "post_attention_norm", {h}));
        RILL_RETURN_IF_ERROR(val.Expect(b + "post_ffw_norm", {h}));
      }
      if (m.qk_norm) {
        RILL_RETURN_IF_ERROR(val.Expect(b + "attn_q_norm", {m.head_dim}));
        RILL_RETURN_IF_ERROR(val.Expect(b + "attn_k_norm", {m.head_dim}));
      }
    }
    return absl::OkStatus();
  }
  if (m.architecture == "gpt2") {
    RILL_RETURN_IF_ERROR(val.Expect("pos_embd", {h, m.max_position_embeddings}));
    RILL_RETURN_IF_ERROR(val.Expect("output_norm.bias", {h}));
    for (int64_t i = 0; i < m.num_layers; ++i) {
      const std::string b = absl::StrCat("blk.", i, ".");
      RILL_RETURN_IF_ERROR(val.Expect(b + "attn_norm", {h}));
      RILL_RETURN_IF_ERROR(val.Expect(b + "attn_norm.bias", {h}));
      RILL_RETURN_IF_ERROR(val.Expect(b + "attn_qkv", {h, 3 * h}));
      RILL_RETURN_IF_ERROR(val.Expect(b + "attn_qkv.bias", {3 * h}));
      RILL_RETURN_IF_ERROR(val.Expect(b + "attn_output", {h, h}));
      RILL_RETURN_IF_ERROR(val.Expect(b + "attn_output.bias", {h}));
      RILL_RETURN_IF_ERROR(val.Expect(b + "ffn_norm", {h}));
      RILL_RETURN_IF_ERROR(val.Expect(b + "ffn_norm.bias", {h}));
      RILL_RETURN_IF_ERROR(val.Expect(b + "ffn_up", {h, inter}));
      RILL_RETURN_IF_ERROR(val.Expect(b + "ffn_up.bias", {inter}));
      RILL_RETURN_IF_ERROR(val.Expect(b + "ffn_down", {inter, h}));
      RILL_RETURN_IF_ERROR(val.Expect(b + "ffn_down.bias", {h}));
    }
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(c.path(), ": unsupported architecture '", m.architecture, "'"));
}

absl::Status CheckpointBuilder::SplitFusedProjections(Checkpoint* c) {
  const ModelConfig& m = c->config_;
  const int64_t q = m.num_heads * m.head_dim, kv = m.num_kv_heads * m.head_dim;
  const int64_t f = m.intermediate_size;
  // Fused name -> (part name, rows) in row order.
  const std::pair<const char*, std::vector<std::pair<const char*, int64_t>>> kFused[] = {
      {"attn_qkv", {{"attn_q", q}, {"attn_k", kv}, {"attn_v", kv}}},
      {"ffn_gate_up", {{"ffn_gate", f}, {"ffn_up", f}}},
  };
  for (int64_t i = 0; i < m.num_layers; ++i) {
    for (const auto& [fused, parts] : kFused) {
      const std::string name = absl::StrCat("blk.", i, ".", fused);
      auto it = c->tensors_.find(name);
      if (it == c->tensors_.end()) continue;
      const TensorRef t = it->second;
      int64_t rows = 0;
      for (const auto& part : parts) rows += part.second;
      if (t.ne.size() != 2 || t.ne[1] != rows || t.nbytes % rows != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            c->path_, ": fused tensor '", name, "' has shape ", Shape(t.ne), ", expected [",
            m.hidden_size, ", ", rows, "] (ggml order) from the config"));
      }
      const size_t row_bytes = t.nbytes / rows;
      int64_t row = 0;
      for (const auto& [part, n] : parts) {
        const std::string part_name = absl::StrCat("blk.", i, ".", part);
        if (c->tensors_.count(part_name) > 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              c->path_, ": tensor '", part_name, "' present besides the fused '", name, "'"));
        }
        c->tensors_[part_name] =
            TensorRef{t.type, {t.ne[0], n}, static_cast<const uint8_t*>(t.data) + row * row_bytes,
                      row_bytes * n};
        row += n;
      }
      c->tensors_.erase(name);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Checkpoint>> LoadCheckpoint(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat(path, ": no such file or directory"));
  }
  absl::StatusOr<std::unique_ptr<Checkpoint>> c =
      S_ISDIR(st.st_mode) ? CheckpointBuilder::LoadHf(path) : CheckpointBuilder::LoadGguf(path);
  if (!c.ok()) return c.status();
  if (absl::Status s = CheckpointBuilder::Validate(**c); !s.ok()) return s;
  return c;
}

}  // namespace rill::worker::loader
