#include "tokenizer/wordpiece_tokenizer.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tokenizer/unicode_data.h"

namespace rill::tokenizer {
namespace {

bool BoolOr(const base::json::JsonValue* obj, std::string_view key, bool def) {
  const base::json::JsonValue* v = obj != nullptr ? obj->Find(key) : nullptr;
  return v != nullptr && v->is_bool() ? v->bool_value() : def;
}

}  // namespace

absl::StatusOr<std::unique_ptr<WordPieceTokenizer>> WordPieceTokenizer::FromTokenizerJson(
    const std::string& path) {
  absl::StatusOr<base::json::JsonValue> root = base::json::ParseJsonFile(path);
  if (!root.ok()) return root.status();
  absl::StatusOr<std::unique_ptr<WordPieceTokenizer>> t = FromJson(*root);
  if (!t.ok()) return absl::Status(t.status().code(), absl::StrCat(path, ": ", t.status().message()));
  return t;
}

absl::StatusOr<std::unique_ptr<WordPieceTokenizer>> WordPieceTokenizer::FromJson(
    const base::json::JsonValue& root) {
  const base::json::JsonValue* model = root.Find("model");
  if (model == nullptr || model->Find("type") == nullptr ||
      model->Find("type")->string_value() != "WordPiece") {
    return absl::InvalidArgumentError("tokenizer model is not WordPiece");
  }
  const base::json::JsonValue* vocab = model->Find("vocab");
  if (vocab == nullptr || !vocab->is_object() || vocab->object_members().empty()) {
    return absl::InvalidArgumentError("WordPiece model has no vocab");
  }
  std::unique_ptr<WordPieceTokenizer> t(new WordPieceTokenizer());
  const size_t n = vocab->object_members().size();
  t->id_to_token_.resize(n);
  for (const auto& [token, id] : vocab->object_members()) {
    const double d = id.number_value();
    if (!id.is_number() || d < 0 || d >= n || d != static_cast<int32_t>(d)) {
      return absl::InvalidArgumentError(absl::StrCat("vocab id of '", token, "' is not in [0, ", n, ")"));
    }
    t->vocab_[token] = static_cast<int32_t>(d);
    t->id_to_token_[static_cast<size_t>(d)] = token;
  }
  if (const base::json::JsonValue* p = model->Find("continuing_subword_prefix");
      p != nullptr && p->is_string()) {
    t->prefix_ = p->string_value();
  }
  if (const base::json::JsonValue* m = model->Find("max_input_chars_per_word");
      m != nullptr && m->is_number()) {
    t->max_input_chars_per_word_ = static_cast<int>(m->number_value());
  }
  const base::json::JsonValue* unk = model->Find("unk_token");
  std::optional<int32_t> unk_id = t->TokenToId(unk != nullptr ? unk->string_value() : "[UNK]");
  if (!unk_id.has_value()) return absl::InvalidArgumentError("WordPiece unk_token is not in the vocab");
  t->unk_id_ = *unk_id;
  t->pad_id_ = t->TokenToId("[PAD]").value_or(-1);

  const base::json::JsonValue* norm = root.Find("normalizer");
  if (norm != nullptr && !norm->is_null()) {
    if (norm->Find("type") == nullptr || norm->Find("type")->string_value() != "BertNormalizer") {
      return absl::UnimplementedError("only the BertNormalizer is supported with WordPiece");
    }
    t->normalizer_.clean_text = BoolOr(norm, "clean_text", true);
    t->normalizer_.handle_chinese_chars = BoolOr(norm, "handle_chinese_chars", true);
    t->normalizer_.lowercase = BoolOr(norm, "lowercase", true);
    // strip_accents null follows lowercase (the BERT convention).
    t->normalizer_.strip_accents = BoolOr(norm, "strip_accents", t->normalizer_.lowercase);
  } else {
    t->normalizer_ = BertNormalizerOptions{false, false, false, false};
  }

  if (const base::json::JsonValue* added = root.Find("added_tokens"); added != nullptr) {
    for (const base::json::JsonValue& a : added->array_items()) {
      const base::json::JsonValue* content = a.Find("content");
      const base::json::JsonValue* id = a.Find("id");
      if (content == nullptr || id == nullptr || !BoolOr(&a, "special", false)) continue;
      t->specials_.emplace_back(content->string_value(), static_cast<int32_t>(id->number_value()));
    }
    std::sort(t->specials_.begin(), t->specials_.end(),
              [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  }

  // Post-processor: the ids around a single sequence.
  const base::json::JsonValue* post = root.Find("post_processor");
  const std::string post_type =
      post != nullptr && post->Find("type") != nullptr ? post->Find("type")->string_value() : "";
  auto special_id = [&](const std::string& name) -> absl::StatusOr<int32_t> {
    std::optional<int32_t> id = t->TokenToId(name);
    if (!id.has_value()) return absl::InvalidArgumentError(absl::StrCat("special token ", name, " is not in the vocab"));
    return *id;
  };
  if (post_type == "TemplateProcessing") {
    bool after = false;
    const base::json::JsonValue* single = post->Find("single");
    for (const base::json::JsonValue& piece :
         single != nullptr ? single->array_items() : std::vector<base::json::JsonValue>{}) {
      if (piece.Find("Sequence") != nullptr) {
        after = true;
      } else if (const base::json::JsonValue* s = piece.Find("SpecialToken"); s != nullptr) {
        absl::StatusOr<int32_t> id = special_id(s->Find("id") != nullptr ? s->Find("id")->string_value() : "");
        if (!id.ok()) return id.status();
        (after ? t->suffix_ids_ : t->prefix_ids_).push_back(*id);
      }
    }
  } else if (post_type == "BertProcessing" || post_type.empty()) {
    absl::StatusOr<int32_t> cls = special_id("[CLS]");
    absl::StatusOr<int32_t> sep = special_id("[SEP]");
    if (!cls.ok()) return cls.status();
    if (!sep.ok()) return sep.status();
    t->prefix_ids_ = {*cls};
    t->suffix_ids_ = {*sep};
  } else {
    return absl::UnimplementedError(absl::StrCat("post_processor ", post_type, " is not supported"));
  }
  return t;
}

absl::StatusOr<std::unique_ptr<WordPieceTokenizer>> WordPieceTokenizer::FromSpec(
    const WordPieceSpec& spec) {
  const int32_t n = static_cast<int32_t>(spec.tokens.size());
  if (n == 0) return absl::InvalidArgumentError("WordPiece vocab is empty");
  auto in_range = [n](int32_t id) { return id >= 0 && id < n; };
  if (!in_range(spec.unk_id)) {
    return absl::InvalidArgumentError(absl::StrCat("WordPiece unk id ", spec.unk_id, " is not in [0, ", n, ")"));
  }
  for (const std::vector<int32_t>* ids : {&spec.special_ids, &spec.prefix_ids, &spec.suffix_ids}) {
    for (int32_t id : *ids) {
      if (!in_range(id)) {
        return absl::InvalidArgumentError(absl::StrCat("WordPiece special id ", id, " is not in [0, ", n, ")"));
      }
    }
  }
  std::unique_ptr<WordPieceTokenizer> t(new WordPieceTokenizer());
  t->id_to_token_ = spec.tokens;
  for (int32_t id = 0; id < n; ++id) t->vocab_.emplace(spec.tokens[id], id);  // First id wins.
  t->unk_id_ = spec.unk_id;
  t->pad_id_ = in_range(spec.pad_id) ? spec.pad_id : -1;
  t->normalizer_ = spec.normalizer;
  for (int32_t id : spec.special_ids) t->specials_.emplace_back(spec.tokens[id], id);
  std::sort(t->specials_.begin(), t->specials_.end(),
            [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  t->prefix_ids_ = spec.prefix_ids;
  t->suffix_ids_ = spec.suffix_ids;
  return t;
}

std::optional<int32_t> WordPieceTokenizer::TokenToId(std::string_view token) const {
  auto it = vocab_.find(std::string(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

void WordPieceTokenizer::EncodeWord(std::string_view word, std::vector<int32_t>* out) const {
  std::vector<size_t> offsets;
  const std::vector<uint32_t> cps = DecodeUtf8(word, &offsets);
  if (static_cast<int>(cps.size()) > max_input_chars_per_word_) {
    out->push_back(unk_id_);
    return;
  }
  // Greedy longest match first, on character boundaries.
  std::vector<int32_t> pieces;
  size_t start = 0;
  std::string candidate;
  while (start < cps.size()) {
    size_t end = cps.size();
    int32_t found = -1;
    while (end > start) {
      candidate.assign(start > 0 ? prefix_ : "");
      candidate.append(word.substr(offsets[start], offsets[end] - offsets[start]));
      auto it = vocab_.find(candidate);
      if (it != vocab_.end()) {
        found = it->second;
        break;
      }
      --end;
    }
    if (found < 0) {
      out->push_back(unk_id_);
      return;
    }
    pieces.push_back(found);
    start = end;
  }
  out->insert(out->end(), pieces.begin(), pieces.end());
}

std::vector<int32_t> WordPieceTokenizer::Encode(std::string_view text,
                                                bool add_special_tokens) const {
  std::vector<int32_t> ids;
  if (add_special_tokens) ids = prefix_ids_;
  auto encode_run = [&](std::string_view run) {
    for (const std::string& word : BertPreTokenize(BertNormalize(run, normalizer_))) {
      EncodeWord(word, &ids);
    }
  };
  size_t run_begin = 0, pos = 0;
  while (pos < text.size()) {
    bool matched = false;
    for (const auto& [content, id] : specials_) {
      if (!content.empty() && text.compare(pos, content.size(), content) == 0) {
        encode_run(text.substr(run_begin, pos - run_begin));
        ids.push_back(id);
        pos += content.size();
        run_begin = pos;
        matched = true;
        break;
      }
    }
    if (!matched) ++pos;
  }
  encode_run(text.substr(run_begin));
  if (add_special_tokens) ids.insert(ids.end(), suffix_ids_.begin(), suffix_ids_.end());
  return ids;
}

}  // namespace rill::tokenizer
