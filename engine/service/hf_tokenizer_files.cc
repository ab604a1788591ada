#include "engine/service/hf_tokenizer_files.h"

#include <string>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/json.h"
#include "engine/service/merges_from_scores.h"
#include "tokenizer/pre_tokenizer.h"

namespace rill::engine::service {
namespace {

using base::json::QuoteJsonString;
using tokenizer::TokenType;

constexpr char kSpaceMarker[] = "\xE2\x96\x81";  // U+2581 '▁'

// JSON string of token `id` of `tokens`, or null.
std::string TokenOr(const std::vector<std::string>& tokens, int32_t id) {
  if (id < 0 || id >= static_cast<int32_t>(tokens.size())) return "null";
  return QuoteJsonString(tokens[id]);
}

// TemplateProcessing that puts `prefix` before and `suffix` after each
// sequence (null when both are empty), as the tokenizer's
// add_special_tokens does.
std::string TemplateProcessing(const std::vector<std::string>& tokens,
                               const std::vector<int32_t>& prefix,
                               const std::vector<int32_t>& suffix) {
  if (prefix.empty() && suffix.empty()) return "null";
  auto special = [&](int32_t id, int type_id) {
    return absl::StrCat("{\"SpecialToken\":{\"id\":", TokenOr(tokens, id), ",\"type_id\":", type_id,
                        "}},");
  };
  auto sequence = [](const char* which, int type_id) {
    return absl::StrCat("{\"Sequence\":{\"id\":\"", which, "\",\"type_id\":", type_id, "}},");
  };
  std::string single, pair;
  for (int32_t id : prefix) absl::StrAppend(&single, special(id, 0));
  absl::StrAppend(&single, sequence("A", 0));
  for (int32_t id : suffix) absl::StrAppend(&single, special(id, 0));
  pair = single;
  absl::StrAppend(&pair, sequence("B", 1));
  for (int32_t id : suffix) absl::StrAppend(&pair, special(id, 1));
  single.pop_back();  // The last ','.
  pair.pop_back();
  std::string specials;
  absl::flat_hash_set<int32_t> seen;
  for (const std::vector<int32_t>* ids : {&prefix, &suffix}) {
    for (int32_t id : *ids) {
      if (!seen.insert(id).second) continue;
      absl::StrAppend(&specials, specials.empty() ? "" : ",", TokenOr(tokens, id),
                      ":{\"id\":", TokenOr(tokens, id), ",\"ids\":[", id, "],\"tokens\":[",
                      TokenOr(tokens, id), "]}");
    }
  }
  return absl::StrCat("{\"type\":\"TemplateProcessing\",\"single\":[", single, "],\"pair\":[", pair,
                      "],\"special_tokens\":{", specials, "}}");
}

// One added token, matched in the raw text as Rill's tokenizers match it.
std::string AddedToken(const std::string& content, size_t id, bool special) {
  return absl::StrCat("{\"id\":", id, ",\"content\":", QuoteJsonString(content),
                      ",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,"
                      "\"normalized\":false,\"special\":",
                      special ? "true" : "false", "}");
}

// {"text": id, ...} with the first id of each text (later duplicates are
// never produced by encoding, as in Rill's tokenizers).
std::string VocabObject(const std::vector<std::string>& tokens) {
  absl::flat_hash_set<std::string_view> seen;
  std::string vocab = "{";
  for (size_t id = 0; id < tokens.size(); ++id) {
    if (!seen.insert(tokens[id]).second) continue;
    absl::StrAppend(&vocab, vocab.size() > 1 ? "," : "", QuoteJsonString(tokens[id]), ":", id);
  }
  absl::StrAppend(&vocab, "}");
  return vocab;
}

// [["left","right"], ...]: pairs, since a SentencePiece token may hold ' '.
std::string MergesArray(const std::vector<Merge>& merges) {
  std::string out = "[";
  for (size_t i = 0; i < merges.size(); ++i) {
    absl::StrAppend(&out, i == 0 ? "[" : ",[", QuoteJsonString(merges[i].first), ",",
                    QuoteJsonString(merges[i].second), "]");
  }
  absl::StrAppend(&out, "]");
  return out;
}

// The spec's "left right" merges split as Rill's BPE splits them (at the
// first ' ' after the first byte).
absl::StatusOr<std::vector<Merge>> SplitMerges(const std::vector<std::string>& merges) {
  std::vector<Merge> out;
  out.reserve(merges.size());
  for (const std::string& m : merges) {
    const size_t sp = m.find(' ', 1);
    if (sp == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("GetTokenizer: bad merge '", m, "'"));
    }
    out.emplace_back(m.substr(0, sp), m.substr(sp + 1));
  }
  return out;
}

// The parts of tokenizer.json that differ between tokenizer families.
struct Pipeline {
  std::string normalizer = "null";
  std::string pre_tokenizer = "null";
  std::string decoder;
  bool ignore_merges = false;
  bool byte_fallback = false;  // Also fuse_unk, as transformers' Llama files.
  int32_t unk_id = -1;
  std::vector<Merge> merges;
};

std::string ByteLevel(bool use_regex) {
  return absl::StrCat(
      "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":",
      use_regex ? "true" : "false", "}");
}

std::string SplitIsolated(std::string_view regex) {
  return absl::StrCat("{\"type\":\"Split\",\"pattern\":{\"Regex\":", QuoteJsonString(regex),
                      "},\"behavior\":\"Isolated\",\"invert\":false}");
}

absl::StatusOr<Pipeline> ByteLevelPipeline(const tokenizer::TokenizerSpec& spec) {
  absl::StatusOr<tokenizer::PreTokenizerType> pre = tokenizer::PreTokenizerFromName(spec.pre);
  if (!pre.ok()) {
    return absl::UnimplementedError(absl::StrCat(
        "GetTokenizer: cannot write tokenizer.json: ", pre.status().message(),
        "; give the gateway the model's tokenizer files (smg --tokenizer-path)"));
  }
  Pipeline p;
  switch (*pre) {
    case tokenizer::PreTokenizerType::kNone:
      p.pre_tokenizer = ByteLevel(false);
      break;
    case tokenizer::PreTokenizerType::kGpt2:
      p.pre_tokenizer = ByteLevel(true);
      break;
    case tokenizer::PreTokenizerType::kSmolLm:
      p.pre_tokenizer = absl::StrCat(
          "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Digits\",\"individual_digits\":"
          "true},",
          ByteLevel(true), "]}");
      break;
    default: {
      const std::string_view regex = tokenizer::PreTokenizerSplitRegex(*pre);
      if (regex.empty()) {
        return absl::UnimplementedError(absl::StrCat(
            "GetTokenizer: writing tokenizer.json for pre-tokenizer '", spec.pre,
            "' is not supported; give the gateway the model's tokenizer files "
            "(smg --tokenizer-path)"));
      }
      p.pre_tokenizer = absl::StrCat("{\"type\":\"Sequence\",\"pretokenizers\":[",
                                     SplitIsolated(regex), ",", ByteLevel(false), "]}");
    }
  }
  p.ignore_merges = tokenizer::PreTokenizerIgnoresMerges(*pre);
  p.decoder =
      "{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"trim_offsets\":true,\"use_regex\":true}";
  absl::StatusOr<std::vector<Merge>> merges = SplitMerges(spec.merges);
  if (!merges.ok()) return merges.status();
  p.merges = std::move(*merges);
  return p;
}

absl::StatusOr<Pipeline> SentencePiecePipeline(const tokenizer::TokenizerSpec& spec) {
  Pipeline p;
  const std::string replace = absl::StrCat(
      "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"", kSpaceMarker, "\"}");
  p.normalizer = spec.add_space_prefix
                     ? absl::StrCat("{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\","
                                    "\"prepend\":\"",
                                    kSpaceMarker, "\"},", replace, "]}")
                     : replace;
  // Gemma 4: [^\n]+|\n+ after the normalizer (runs of newlines never merge
  // with other characters).
  if (spec.model == "gemma4") p.pre_tokenizer = SplitIsolated("\n+");
  // transformers' LlamaTokenizerFast decoder; Strip undoes the prefix space.
  p.decoder = absl::StrCat(
      "{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":\"",
      kSpaceMarker,
      "\"},\"content\":\" \"},{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"}",
      spec.add_space_prefix ? ",{\"type\":\"Strip\",\"content\":\" \",\"start\":1,\"stop\":0}" : "",
      "]}");
  p.byte_fallback = spec.byte_fallback;
  p.unk_id = spec.unk_id;
  absl::StatusOr<std::vector<Merge>> merges =
      spec.merges.empty() ? MergesFromScores(spec) : SplitMerges(spec.merges);
  if (!merges.ok()) {
    return absl::UnimplementedError(absl::StrCat("GetTokenizer: cannot write tokenizer.json: ",
                                                 merges.status().message()));
  }
  p.merges = std::move(*merges);
  return p;
}

// tokenizer_config.json's fields for a special token ("key":"text",), none
// for an absent id.
std::string ConfigToken(const char* key, const std::vector<std::string>& tokens, int32_t id) {
  if (id < 0 || id >= static_cast<int32_t>(tokens.size())) return "";
  return absl::StrCat(",\"", key, "\":", QuoteJsonString(tokens[id]));
}

// The default template as a string, or with named ones (command-r's
// tool_use, rag) the list of {name, template} that transformers reads.
std::string ChatTemplateField(const tokenizer::TokenizerSpec& spec) {
  if (spec.named_chat_templates.empty()) {
    return spec.chat_template.empty()
               ? ""
               : absl::StrCat(",\"chat_template\":", QuoteJsonString(spec.chat_template));
  }
  std::string list;
  auto add = [&](const std::string& name, const std::string& text) {
    absl::StrAppend(&list, list.empty() ? "[" : ",", "{\"name\":", QuoteJsonString(name),
                    ",\"template\":", QuoteJsonString(text), "}");
  };
  if (!spec.chat_template.empty()) add("default", spec.chat_template);
  for (const auto& [name, text] : spec.named_chat_templates) add(name, text);
  return absl::StrCat(",\"chat_template\":", list, "]");
}

}  // namespace

absl::StatusOr<std::vector<ZipEntry>> HfTokenizerFilesFromSpec(const tokenizer::TokenizerSpec& spec,
                                                               int64_t max_model_len) {
  absl::StatusOr<Pipeline> pipeline;
  if (spec.model == "gpt2") {
    pipeline = ByteLevelPipeline(spec);
  } else if (spec.model == "llama" || spec.model == "gemma4") {
    pipeline = SentencePiecePipeline(spec);
  } else {
    pipeline = absl::UnimplementedError(absl::StrCat(
        "GetTokenizer: writing tokenizer.json for a '", spec.model,
        "' tokenizer is not supported; give the gateway the model's tokenizer files "
        "(smg --tokenizer-path)"));
  }
  if (!pipeline.ok()) return pipeline.status();
  // Control and unknown-type tokens are special (skipped by
  // skip_special_tokens), user-defined ones are not; all are matched in the
  // raw text.
  std::string added = "[";
  for (size_t id = 0; id < spec.token_types.size() && id < spec.tokens.size(); ++id) {
    const auto type = static_cast<TokenType>(spec.token_types[id]);
    if (type != TokenType::kControl && type != TokenType::kUserDefined &&
        type != TokenType::kUnknown) {
      continue;
    }
    absl::StrAppend(&added, added.size() > 1 ? "," : "",
                    AddedToken(spec.tokens[id], id, type != TokenType::kUserDefined));
  }
  absl::StrAppend(&added, "]");
  std::vector<int32_t> prefix, suffix;
  if (spec.add_bos && spec.bos_id >= 0) prefix.push_back(spec.bos_id);
  if (spec.add_eos && spec.eos_id >= 0) suffix.push_back(spec.eos_id);
  const char* fallback = pipeline->byte_fallback ? "true" : "false";
  std::string tokenizer_json = absl::StrCat(
      "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":", added,
      ",\"normalizer\":", pipeline->normalizer, ",\"pre_tokenizer\":", pipeline->pre_tokenizer,
      ",\"post_processor\":", TemplateProcessing(spec.tokens, prefix, suffix),
      ",\"decoder\":", pipeline->decoder,
      ",\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":",
      TokenOr(spec.tokens, pipeline->unk_id),
      ",\"continuing_subword_prefix\":null,\"end_of_word_suffix\":null,\"fuse_unk\":", fallback,
      ",\"byte_fallback\":", fallback, ",\"ignore_merges\":",
      pipeline->ignore_merges ? "true" : "false", ",\"vocab\":", VocabObject(spec.tokens),
      ",\"merges\":", MergesArray(pipeline->merges), "}}");
  std::string config = absl::StrCat(
      "{\"tokenizer_class\":\"PreTrainedTokenizerFast\",\"model_max_length\":", max_model_len,
      ",\"add_bos_token\":", spec.add_bos ? "true" : "false",
      ",\"add_eos_token\":", spec.add_eos ? "true" : "false",
      ",\"clean_up_tokenization_spaces\":false", ConfigToken("bos_token", spec.tokens, spec.bos_id),
      ConfigToken("eos_token", spec.tokens, spec.eos_id),
      ConfigToken("pad_token", spec.tokens, spec.pad_id >= 0 ? spec.pad_id : spec.eos_id),
      ConfigToken("unk_token", spec.tokens, spec.unk_id), ChatTemplateField(spec),
      "}");
  return std::vector<ZipEntry>{{"tokenizer.json", std::move(tokenizer_json)},
                               {"tokenizer_config.json", std::move(config)}};
}

absl::StatusOr<std::vector<ZipEntry>> HfTokenizerFilesFromWordPieceSpec(
    const tokenizer::WordPieceSpec& spec, int64_t max_model_len) {
  const int32_t n = static_cast<int32_t>(spec.tokens.size());
  if (spec.unk_id < 0 || spec.unk_id >= n) {
    return absl::InvalidArgumentError("GetTokenizer: the WordPiece vocabulary has no unknown token");
  }
  std::string added = "[";
  for (int32_t id : spec.special_ids) {
    if (id < 0 || id >= n) continue;
    absl::StrAppend(&added, added.size() > 1 ? "," : "", AddedToken(spec.tokens[id], id, true));
  }
  absl::StrAppend(&added, "]");
  const tokenizer::BertNormalizerOptions& norm = spec.normalizer;
  auto flag = [](bool b) { return b ? "true" : "false"; };
  std::string tokenizer_json = absl::StrCat(
      "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":", added,
      ",\"normalizer\":{\"type\":\"BertNormalizer\",\"clean_text\":", flag(norm.clean_text),
      ",\"handle_chinese_chars\":", flag(norm.handle_chinese_chars),
      ",\"strip_accents\":", flag(norm.strip_accents), ",\"lowercase\":", flag(norm.lowercase),
      "},\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"},\"post_processor\":",
      TemplateProcessing(spec.tokens, spec.prefix_ids, spec.suffix_ids),
      ",\"decoder\":{\"type\":\"WordPiece\",\"prefix\":\"##\",\"cleanup\":true},"
      "\"model\":{\"type\":\"WordPiece\",\"unk_token\":",
      TokenOr(spec.tokens, spec.unk_id),
      ",\"continuing_subword_prefix\":\"##\",\"max_input_chars_per_word\":100,\"vocab\":",
      VocabObject(spec.tokens), "}}");
  const int32_t cls = spec.prefix_ids.empty() ? -1 : spec.prefix_ids.front();
  const int32_t sep = spec.suffix_ids.empty() ? -1 : spec.suffix_ids.back();
  std::string config = absl::StrCat(
      "{\"tokenizer_class\":\"PreTrainedTokenizerFast\",\"model_max_length\":", max_model_len,
      ",\"do_lower_case\":", flag(norm.lowercase), ",\"clean_up_tokenization_spaces\":true",
      ConfigToken("cls_token", spec.tokens, cls), ConfigToken("sep_token", spec.tokens, sep),
      ConfigToken("pad_token", spec.tokens, spec.pad_id),
      ConfigToken("unk_token", spec.tokens, spec.unk_id), "}");
  return std::vector<ZipEntry>{{"tokenizer.json", std::move(tokenizer_json)},
                               {"tokenizer_config.json", std::move(config)}};
}

}  // namespace rill::engine::service
