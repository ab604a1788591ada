#include "engine/tokenizer_loader.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer_json.h"

namespace rill::engine {
namespace {

using worker::loader::GgufFile;

constexpr char kSupportedModels[] =
    "gpt2 (byte-level BPE), llama (SentencePiece BPE), gemma4 (BPE over UTF-8), "
    "bert (WordPiece, encoders only)";

// BERT GGUFs whose normalization (lowercase, strip accents) Rill knows; the
// GGUF names it only through tokenizer.ggml.pre.
constexpr std::string_view kWordPiecePre[] = {"bert-bge", "bert-bge-large"};

absl::Status WithPath(const GgufFile& f, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(f.path(), ": ", s.message()));
}

absl::StatusOr<std::string> GgufTokenizerModel(const GgufFile& f) {
  absl::StatusOr<std::string_view> model = f.GetString("tokenizer.ggml.model");
  if (!model.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(f.path(), ": no tokenizer in the GGUF metadata (tokenizer.ggml.model)"));
  }
  return std::string(*model);
}

void ReadId(const GgufFile& f, const char* key, int32_t* out) {
  if (absl::StatusOr<int64_t> v = f.GetInt(key); v.ok()) *out = static_cast<int32_t>(*v);
}

bool ReadFlag(const GgufFile& f, const char* key, bool* out) {
  absl::StatusOr<bool> v = f.GetBool(key);
  if (v.ok()) *out = *v;
  return v.ok();
}

}  // namespace

absl::StatusOr<tokenizer::TokenizerSpec> TokenizerSpecFromGguf(const GgufFile& f) {
  tokenizer::TokenizerSpec spec;
  absl::StatusOr<std::string> model = GgufTokenizerModel(f);
  if (!model.ok()) return model.status();
  spec.model = *model;
  if (spec.model != "gpt2" && spec.model != "llama" && spec.model != "gemma4") {
    return absl::UnimplementedError(absl::StrCat(
        f.path(), ": tokenizer model '", spec.model, "' (tokenizer.ggml.model) is not supported",
        spec.model == "bert" ? " for generation (WordPiece serves encoders only)" : "",
        "; supported: ", kSupportedModels));
  }
  if (absl::StatusOr<std::string_view> pre = f.GetString("tokenizer.ggml.pre"); pre.ok()) {
    spec.pre = std::string(*pre);
  }
  bool llama3_pre = false;
  if (spec.model == "gpt2") {
    // Refused here, with the file named, rather than tokenized by other rules.
    absl::StatusOr<tokenizer::PreTokenizerType> pre = tokenizer::PreTokenizerFromName(spec.pre);
    if (!pre.ok()) return WithPath(f, pre.status());
    llama3_pre = *pre == tokenizer::PreTokenizerType::kLlama3;
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
  ReadId(f, "tokenizer.ggml.bos_token_id", &spec.bos_id);
  ReadId(f, "tokenizer.ggml.eos_token_id", &spec.eos_id);
  ReadId(f, "tokenizer.ggml.padding_token_id", &spec.pad_id);
  ReadId(f, "tokenizer.ggml.unknown_token_id", &spec.unk_id);
  // llama.cpp's defaults when the keys are absent: SentencePiece models add
  // BOS, byte-level BPE models do not, except Llama 3's (its HF tokenizer
  // adds <|begin_of_text|>); Gemma 4 always adds it.
  spec.add_bos = spec.model == "llama" || llama3_pre;
  ReadFlag(f, "tokenizer.ggml.add_bos_token", &spec.add_bos);
  if (spec.model == "gemma4") spec.add_bos = true;
  ReadFlag(f, "tokenizer.ggml.add_eos_token", &spec.add_eos);
  spec.add_space_prefix = spec.model == "llama";
  ReadFlag(f, "tokenizer.ggml.add_space_prefix", &spec.add_space_prefix);
  if (absl::StatusOr<std::string_view> t = f.GetString("tokenizer.chat_template"); t.ok()) {
    spec.chat_template = std::string(*t);
  }
  // Named ones (command-r: tool_use, rag), listed by tokenizer.chat_templates.
  if (absl::StatusOr<std::vector<std::string_view>> names =
          f.GetStringArray("tokenizer.chat_templates");
      names.ok()) {
    for (std::string_view name : *names) {
      const std::string key = "tokenizer.chat_template." + std::string(name);
      if (absl::StatusOr<std::string_view> t = f.GetString(key); t.ok()) {
        spec.named_chat_templates[std::string(name)] = std::string(*t);
      }
    }
  }
  return spec;
}

absl::StatusOr<tokenizer::WordPieceSpec> WordPieceSpecFromGguf(const GgufFile& f) {
  absl::StatusOr<std::string> model = GgufTokenizerModel(f);
  if (!model.ok()) return model.status();
  if (*model != "bert") {
    return absl::InvalidArgumentError(absl::StrCat(
        f.path(), ": tokenizer model '", *model, "' is not WordPiece (bert)"));
  }
  absl::StatusOr<std::string_view> pre = f.GetString("tokenizer.ggml.pre");
  std::string known;
  bool supported = false;
  for (std::string_view p : kWordPiecePre) {
    absl::StrAppend(&known, known.empty() ? "" : ", ", std::string(p));
    supported = supported || (pre.ok() && *pre == p);
  }
  if (!supported) {
    return absl::UnimplementedError(absl::StrCat(
        f.path(), ": WordPiece pre-tokenizer '", pre.ok() ? std::string(*pre) : "(none)",
        "' (tokenizer.ggml.pre) is not supported; supported: ", known));
  }
  absl::StatusOr<std::vector<std::string_view>> tokens = f.GetStringArray("tokenizer.ggml.tokens");
  if (!tokens.ok()) return tokens.status();
  absl::StatusOr<std::vector<int64_t>> types = f.GetIntArray("tokenizer.ggml.token_type");
  tokenizer::WordPieceSpec spec;
  spec.tokens.reserve(tokens->size());
  constexpr std::string_view kWordStart = "\xE2\x96\x81";  // U+2581
  for (size_t i = 0; i < tokens->size(); ++i) {
    const std::string_view t = (*tokens)[i];
    const bool control = types.ok() && i < types->size() &&
                         (*types)[i] == static_cast<int64_t>(tokenizer::TokenType::kControl);
    if (control) {
      spec.special_ids.push_back(static_cast<int32_t>(i));
      spec.tokens.emplace_back(t);
    } else if (t.substr(0, kWordStart.size()) == kWordStart) {
      spec.tokens.emplace_back(t.substr(kWordStart.size()));
    } else if (t.size() > 2 && t.front() == '[' && t.back() == ']') {
      spec.tokens.emplace_back(t);  // [unused0] and the like, kept as they are.
    } else {
      spec.tokens.push_back(std::string("##").append(t));
    }
  }
  int32_t cls = -1, sep = -1;
  ReadId(f, "tokenizer.ggml.unknown_token_id", &spec.unk_id);
  ReadId(f, "tokenizer.ggml.padding_token_id", &spec.pad_id);
  // Older converters wrote [CLS] / [SEP] as BOS / EOS; llama.cpp's WPM
  // vocabulary takes them from there too, and its defaults are the tokens.
  ReadId(f, "tokenizer.ggml.bos_token_id", &cls);
  ReadId(f, "tokenizer.ggml.cls_token_id", &cls);
  ReadId(f, "tokenizer.ggml.eos_token_id", &sep);
  ReadId(f, "tokenizer.ggml.seperator_token_id", &sep);  // llama.cpp's spelling.
  for (size_t i = 0; i < spec.tokens.size() && (cls < 0 || sep < 0 || spec.unk_id < 0); ++i) {
    const int32_t id = static_cast<int32_t>(i);
    if (cls < 0 && spec.tokens[i] == "[CLS]") cls = id;
    if (sep < 0 && spec.tokens[i] == "[SEP]") sep = id;
    if (spec.unk_id < 0 && spec.tokens[i] == "[UNK]") spec.unk_id = id;
  }
  if (cls >= 0) spec.prefix_ids = {cls};
  if (sep >= 0) spec.suffix_ids = {sep};
  ReadFlag(f, "tokenizer.ggml.normalizer.lowercase", &spec.normalizer.lowercase);
  spec.normalizer.strip_accents = spec.normalizer.lowercase;
  ReadFlag(f, "tokenizer.ggml.normalizer.strip_accents", &spec.normalizer.strip_accents);
  return spec;
}

absl::StatusOr<tokenizer::TokenizerSpec> TokenizerSpecFromCheckpoint(
    const worker::loader::Checkpoint& checkpoint) {
  const worker::loader::TokenizerSource& src = checkpoint.tokenizer();
  if (src.gguf != nullptr) return TokenizerSpecFromGguf(*src.gguf);
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

absl::StatusOr<std::unique_ptr<tokenizer::WordPieceTokenizer>> LoadWordPieceTokenizer(
    const worker::loader::Checkpoint& checkpoint) {
  const worker::loader::TokenizerSource& src = checkpoint.tokenizer();
  if (src.gguf != nullptr) {
    absl::StatusOr<tokenizer::WordPieceSpec> spec = WordPieceSpecFromGguf(*src.gguf);
    if (!spec.ok()) return spec.status();
    absl::StatusOr<std::unique_ptr<tokenizer::WordPieceTokenizer>> t =
        tokenizer::WordPieceTokenizer::FromSpec(*spec);
    if (!t.ok()) return WithPath(*src.gguf, t.status());
    return t;
  }
  if (src.tokenizer_json.empty()) return std::unique_ptr<tokenizer::WordPieceTokenizer>();
  return tokenizer::WordPieceTokenizer::FromTokenizerJson(src.tokenizer_json);
}

}  // namespace rill::engine
