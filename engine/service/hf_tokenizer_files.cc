#include "engine/service/hf_tokenizer_files.h"

#include "absl/strings/str_cat.h"
#include "base/json.h"

namespace rill::engine::service {
namespace {

using base::json::QuoteJsonString;

constexpr int32_t kControl = static_cast<int32_t>(tokenizer::TokenType::kControl);
constexpr int32_t kUserDefined = static_cast<int32_t>(tokenizer::TokenType::kUserDefined);

std::string TokenOr(const tokenizer::TokenizerSpec& spec, int32_t id) {
  if (id < 0 || id >= static_cast<int32_t>(spec.tokens.size())) return "null";
  return QuoteJsonString(spec.tokens[id]);
}

// TemplateProcessing that adds BOS / EOS as the spec says (null: none).
std::string PostProcessor(const tokenizer::TokenizerSpec& spec) {
  const bool bos = spec.add_bos && spec.bos_id >= 0;
  const bool eos = spec.add_eos && spec.eos_id >= 0;
  if (!bos && !eos) return "null";
  auto special = [&](int32_t id) {
    return absl::StrCat("{\"SpecialToken\":{\"id\":", TokenOr(spec, id), ",\"type_id\":0}}");
  };
  auto seq = [](const char* which) {
    return absl::StrCat("{\"Sequence\":{\"id\":\"", which, "\",\"type_id\":0}}");
  };
  std::string single = "[", pair = "[";
  if (bos) absl::StrAppend(&single, special(spec.bos_id), ",");
  absl::StrAppend(&single, seq("A"));
  if (eos) absl::StrAppend(&single, ",", special(spec.eos_id));
  absl::StrAppend(&single, "]");
  if (bos) absl::StrAppend(&pair, special(spec.bos_id), ",");
  absl::StrAppend(&pair, seq("A"), ",", seq("B"));
  if (eos) absl::StrAppend(&pair, ",", special(spec.eos_id));
  absl::StrAppend(&pair, "]");
  std::string specials = "{";
  bool first = true;
  for (int32_t id : {bos ? spec.bos_id : -1, eos ? spec.eos_id : -1}) {
    if (id < 0) continue;
    absl::StrAppend(&specials, first ? "" : ",", TokenOr(spec, id), ":{\"id\":", TokenOr(spec, id),
                    ",\"ids\":[", id, "],\"tokens\":[", TokenOr(spec, id), "]}");
    first = false;
  }
  absl::StrAppend(&specials, "}");
  return absl::StrCat("{\"type\":\"TemplateProcessing\",\"single\":", single, ",\"pair\":", pair,
                      ",\"special_tokens\":", specials, "}");
}

}  // namespace

absl::StatusOr<std::vector<ZipEntry>> HfTokenizerFilesFromSpec(const tokenizer::TokenizerSpec& spec,
                                                               int64_t max_model_len) {
  if (spec.model != "gpt2") {
    return absl::UnimplementedError(absl::StrCat(
        "GetTokenizer: writing tokenizer.json for a '", spec.model,
        "' (SentencePiece-style) tokenizer is not supported yet; give the gateway the model's "
        "tokenizer files (smg --tokenizer-path)"));
  }
  const char* byte_level =
      "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true}";
  std::string pre;
  if (spec.pre == "gpt2" || spec.pre == "default" || spec.pre.empty()) {
    pre = byte_level;
  } else if (spec.pre == "smollm") {
    pre = absl::StrCat(
        "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Digits\",\"individual_digits\":true},",
        byte_level, "]}");
  } else {
    return absl::UnimplementedError(absl::StrCat(
        "GetTokenizer: writing tokenizer.json for pre-tokenizer '", spec.pre,
        "' is not supported yet; give the gateway the model's tokenizer files "
        "(smg --tokenizer-path)"));
  }
  std::string added = "[";
  bool first = true;
  for (size_t id = 0; id < spec.token_types.size() && id < spec.tokens.size(); ++id) {
    const int32_t type = spec.token_types[id];
    if (type != kControl && type != kUserDefined) continue;
    absl::StrAppend(&added, first ? "" : ",", "{\"id\":", id,
                    ",\"content\":", QuoteJsonString(spec.tokens[id]),
                    ",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,"
                    "\"normalized\":false,\"special\":",
                    type == kControl ? "true" : "false", "}");
    first = false;
  }
  absl::StrAppend(&added, "]");
  std::string vocab = "{";
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    absl::StrAppend(&vocab, id == 0 ? "" : ",", QuoteJsonString(spec.tokens[id]), ":", id);
  }
  absl::StrAppend(&vocab, "}");
  std::string merges = "[";
  for (size_t i = 0; i < spec.merges.size(); ++i) {
    absl::StrAppend(&merges, i == 0 ? "" : ",", QuoteJsonString(spec.merges[i]));
  }
  absl::StrAppend(&merges, "]");
  std::string tokenizer_json = absl::StrCat(
      "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":", added,
      ",\"normalizer\":null,\"pre_tokenizer\":", pre, ",\"post_processor\":", PostProcessor(spec),
      ",\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"trim_offsets\":true,"
      "\"use_regex\":true},\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,"
      "\"continuing_subword_prefix\":null,\"end_of_word_suffix\":null,\"fuse_unk\":false,"
      "\"byte_fallback\":false,\"ignore_merges\":false,\"vocab\":",
      vocab, ",\"merges\":", merges, "}}");
  std::string config = absl::StrCat(
      "{\"tokenizer_class\":\"PreTrainedTokenizerFast\",\"model_max_length\":", max_model_len,
      ",\"add_bos_token\":", spec.add_bos ? "true" : "false",
      ",\"add_eos_token\":", spec.add_eos ? "true" : "false",
      ",\"bos_token\":", TokenOr(spec, spec.bos_id), ",\"eos_token\":", TokenOr(spec, spec.eos_id),
      ",\"pad_token\":", TokenOr(spec, spec.pad_id >= 0 ? spec.pad_id : spec.eos_id),
      ",\"unk_token\":", TokenOr(spec, spec.unk_id),
      ",\"chat_template\":", QuoteJsonString(spec.chat_template), "}");
  return std::vector<ZipEntry>{{"tokenizer.json", std::move(tokenizer_json)},
                               {"tokenizer_config.json", std::move(config)}};
}

}  // namespace rill::engine::service
