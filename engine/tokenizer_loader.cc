#include "engine/tokenizer_loader.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tokenizer/tokenizer_json.h"

namespace rill::engine {
namespace {

absl::StatusOr<tokenizer::TokenizerSpec> FromGguf(const worker::loader::GgufFile& f) {
  tokenizer::TokenizerSpec spec;
  absl::StatusOr<std::string_view> model = f.GetString("tokenizer.ggml.model");
  if (!model.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(f.path(), ": no tokenizer in the GGUF metadata (tokenizer.ggml.model)"));
  }
  spec.model = std::string(*model);
  if (spec.model != "gpt2" && spec.model != "llama") {
    return absl::UnimplementedError(absl::StrCat(f.path(), ": tokenizer model '", spec.model,
                                                 "' is not supported (gpt2, llama)"));
  }
  absl::StatusOr<std::vector<std::string_view>> tokens = f.GetStringArray("tokenizer.ggml.tokens");
  if (!tokens.ok()) return tokens.status();
  spec.tokens.assign(tokens->begin(), tokens->end());
  if (absl::StatusOr<std::vector<int64_t>> types = f.GetIntArray("tokenizer.ggml.token_type");
      types.ok()) {
    spec.token_types.assign(types->begin(), types->end());
  }
  if (absl::StatusOr<std::vector<std::string_view>> merges =
          f.GetStringArray("tokenizer.ggml.merges");
      merges.ok()) {
    spec.merges.assign(merges->begin(), merges->end());
  }
  if (absl::StatusOr<std::vector<float>> scores = f.GetFloatArray("tokenizer.ggml.scores");
      scores.ok()) {
    spec.scores = std::move(*scores);
  }
  if (absl::StatusOr<std::string_view> pre = f.GetString("tokenizer.ggml.pre"); pre.ok()) {
    spec.pre = std::string(*pre);
  }
  auto id = [&](const char* key, int32_t* out) {
    if (absl::StatusOr<int64_t> v = f.GetInt(key); v.ok()) *out = static_cast<int32_t>(*v);
  };
  id("tokenizer.ggml.bos_token_id", &spec.bos_id);
  id("tokenizer.ggml.eos_token_id", &spec.eos_id);
  id("tokenizer.ggml.padding_token_id", &spec.pad_id);
  id("tokenizer.ggml.unknown_token_id", &spec.unk_id);
  auto flag = [&](const char* key, bool* out) {
    if (absl::StatusOr<bool> v = f.GetBool(key); v.ok()) *out = *v;
  };
  // llama.cpp's defaults when the keys are absent: SentencePiece models add
  // BOS, byte-level BPE models do not.
  spec.add_bos = spec.model == "llama";
  flag("tokenizer.ggml.add_bos_token", &spec.add_bos);
  flag("tokenizer.ggml.add_eos_token", &spec.add_eos);
  spec.add_space_prefix = spec.model == "llama";
  flag("tokenizer.ggml.add_space_prefix", &spec.add_space_prefix);
  if (absl::StatusOr<std::string_view> t = f.GetString("tokenizer.chat_template"); t.ok()) {
    spec.chat_template = std::string(*t);
  }
  return spec;
}

}  // namespace

absl::StatusOr<tokenizer::TokenizerSpec> TokenizerSpecFromCheckpoint(
    const worker::loader::Checkpoint& checkpoint) {
  const worker::loader::TokenizerSource& src = checkpoint.tokenizer();
  if (src.gguf != nullptr) return FromGguf(*src.gguf);
  if (src.tokenizer_json.empty()) {
    return absl::NotFoundError(
        absl::StrCat(checkpoint.path(), ": no tokenizer.json next to the weights"));
  }
  return tokenizer::LoadTokenizerJson(src.tokenizer_json, src.tokenizer_config_json);
}

absl::StatusOr<std::unique_ptr<tokenizer::BpeTokenizer>> LoadTokenizer(
    const worker::loader::Checkpoint& checkpoint) {
  absl::StatusOr<tokenizer::TokenizerSpec> spec = TokenizerSpecFromCheckpoint(checkpoint);
  if (!spec.ok()) return spec.status();
  return tokenizer::BpeTokenizer::Create(*spec);
}

}  // namespace rill::engine
