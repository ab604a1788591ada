#include "tokenizer/tokenizer_json.h"

#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tokenizer/pre_tokenizer.h"

namespace rill::tokenizer {
namespace {

using base::json::JsonValue;

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";

std::string_view TypeOf(const JsonValue* v) {
  if (v == nullptr) return "";
  const JsonValue* t = v->Find("type");
  return t ? std::string_view(t->string_value()) : std::string_view();
}

// Flattens a possibly nested {"type":"Sequence", <list_key>: [...]}.
std::vector<const JsonValue*> Flatten(const JsonValue* v, std::string_view list_key) {
  std::vector<const JsonValue*> out;
  if (v == nullptr || v->is_null()) return out;
  if (TypeOf(v) == "Sequence") {
    if (const JsonValue* items = v->Find(list_key)) {
      for (const JsonValue& item : items->array_items()) {
        for (const JsonValue* x : Flatten(&item, list_key)) out.push_back(x);
      }
    }
    return out;
  }
  out.push_back(v);
  return out;
}

bool FlagOr(const JsonValue* v, std::string_view key, bool dflt) {
  const JsonValue* f = v->Find(key);
  return f && f->is_bool() ? f->bool_value() : dflt;
}

// The "String" or "Regex" content of a Split/Replace pattern.
std::string PatternOf(const JsonValue* v) {
  const JsonValue* p = v->Find("pattern");
  if (p == nullptr) return "";
  if (const JsonValue* s = p->Find("String")) return s->string_value();
  if (const JsonValue* s = p->Find("Regex")) return s->string_value();
  return "";
}

absl::Status Unsupported(std::string_view what) {
  return absl::UnimplementedError(
      absl::StrCat("tokenizer.json: unsupported ", std::string(what)));
}

// Token text from a tokenizer_config.json field ("<s>" or {"content": ...}).
std::string TokenField(const JsonValue* config, std::string_view key) {
  if (config == nullptr) return "";
  const JsonValue* v = config->Find(key);
  if (v == nullptr) return "";
  if (v->is_string()) return v->string_value();
  if (const JsonValue* c = v->Find("content")) return c->string_value();
  return "";
}

absl::Status DetectByteLevelPre(const JsonValue& tok, TokenizerSpec* spec) {
  const std::vector<const JsonValue*> pre =
      Flatten(tok.Find("pre_tokenizer"), "pretokenizers");
  for (const JsonValue* p : pre) {
    if (TypeOf(p) == "ByteLevel" && FlagOr(p, "add_prefix_space", false)) {
      return Unsupported("ByteLevel add_prefix_space=true");
    }
  }
  if (pre.size() == 1 && TypeOf(pre[0]) == "ByteLevel") {
    // Without its regex ByteLevel maps the whole text as one word.
    spec->pre = FlagOr(pre[0], "use_regex", true) ? "gpt2" : "none";
    return absl::OkStatus();
  }
  if (pre.size() == 2 && TypeOf(pre[1]) == "ByteLevel") {
    const bool regex = FlagOr(pre[1], "use_regex", true);
    if (TypeOf(pre[0]) == "Digits" && FlagOr(pre[0], "individual_digits", false) &&
        regex) {
      spec->pre = "smollm";
      return absl::OkStatus();
    }
    if (TypeOf(pre[0]) == "Split" && !regex) {
      const JsonValue* behavior = pre[0]->Find("behavior");
      const std::string pat = PatternOf(pre[0]);
      if (behavior && behavior->string_value() == "Isolated" &&
          !FlagOr(pre[0], "invert", false)) {
        // The GGUF names of the Split regexes Rill scans.
        for (const char* name : {"llama3", "qwen2", "qwen35"}) {
          if (pat == PreTokenizerSplitRegex(*PreTokenizerFromName(name))) {
            spec->pre = name;
            return absl::OkStatus();
          }
        }
      }
      return Unsupported(absl::StrCat("Split pre-tokenizer regex ", pat));
    }
  }
  return Unsupported("byte-level pre_tokenizer pipeline");
}

absl::Status DetectSentencePiece(const JsonValue& tok, TokenizerSpec* spec) {
  spec->model = "llama";
  if (const JsonValue* pre = tok.Find("pre_tokenizer"); pre && !pre->is_null()) {
    // Gemma 4: runs of newlines are words of their own ([^\n]+|\n+).
    const JsonValue* behavior = pre->Find("behavior");
    if (TypeOf(pre) == "Split" && PatternOf(pre) == "\n+" && behavior &&
        behavior->string_value() == "Isolated" && !FlagOr(pre, "invert", false)) {
      spec->model = "gemma4";
    } else {
      return Unsupported(absl::StrCat("pre_tokenizer '", std::string(TypeOf(pre)),
                                      "' for a SentencePiece-style model"));
    }
  }
  bool prepend = false, replace = false;
  for (const JsonValue* n : Flatten(tok.Find("normalizer"), "normalizers")) {
    const std::string_view type = TypeOf(n);
    if (type == "Prepend" && n->Find("prepend") &&
        n->Find("prepend")->string_value() == kSpaceMarker) {
      prepend = true;
    } else if (type == "Replace" && PatternOf(n) == " " && n->Find("content") &&
               n->Find("content")->string_value() == kSpaceMarker) {
      replace = true;
    } else {
      return Unsupported(absl::StrCat("normalizer '", std::string(type), "'"));
    }
  }
  if (!replace) return Unsupported("SentencePiece model without ' '->'▁'");
  spec->add_space_prefix = prepend;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TokenizerSpec> TokenizerSpecFromJson(const JsonValue& tok,
                                                    const JsonValue* config) {
  TokenizerSpec spec;
  const JsonValue* model = tok.Find("model");
  if (model == nullptr || TypeOf(model) != "BPE") {
    return Unsupported(absl::StrCat("model type '", std::string(TypeOf(model)), "'"));
  }
  if (const JsonValue* d = model->Find("dropout"); d && !d->is_null()) {
    return Unsupported("BPE dropout");
  }
  if (const JsonValue* p = model->Find("continuing_subword_prefix");
      p && !p->is_null() && !p->string_value().empty()) {
    return Unsupported("continuing_subword_prefix");
  }
  // Vocab plus added tokens may leave gaps; those become unused ids.
  int32_t size = 0;
  const JsonValue* vocab = model->Find("vocab");
  if (vocab == nullptr || !vocab->is_object()) {
    return absl::InvalidArgumentError("tokenizer.json: model.vocab missing");
  }
  for (const auto& [text, id] : vocab->object_members()) {
    size = std::max(size, static_cast<int32_t>(id.number_value()) + 1);
  }
  const JsonValue* added = tok.Find("added_tokens");
  if (added != nullptr) {
    for (const JsonValue& a : added->array_items()) {
      if (const JsonValue* id = a.Find("id")) {
        size = std::max(size, static_cast<int32_t>(id->number_value()) + 1);
      }
    }
  }
  spec.tokens.assign(size, "");
  spec.token_types.assign(size, static_cast<int32_t>(TokenType::kUnused));
  for (const auto& [text, id] : vocab->object_members()) {
    const int32_t i = static_cast<int32_t>(id.number_value());
    if (i < 0) return absl::InvalidArgumentError("negative token id");
    spec.tokens[i] = text;
    spec.token_types[i] = static_cast<int32_t>(TokenType::kNormal);
  }
  if (added != nullptr) {
    for (const JsonValue& a : added->array_items()) {
      const JsonValue* id = a.Find("id");
      const JsonValue* content = a.Find("content");
      if (id == nullptr || content == nullptr) continue;
      if (FlagOr(&a, "lstrip", false) || FlagOr(&a, "rstrip", false) ||
          FlagOr(&a, "single_word", false)) {
        return Unsupported(absl::StrCat("added token options on '",
                                        content->string_value(), "'"));
      }
      const int32_t i = static_cast<int32_t>(id->number_value());
      if (i < 0) return absl::InvalidArgumentError("negative token id");
      spec.tokens[i] = content->string_value();
      spec.token_types[i] = static_cast<int32_t>(
          FlagOr(&a, "special", false) ? TokenType::kControl
                                       : TokenType::kUserDefined);
    }
  }
  if (const JsonValue* merges = model->Find("merges")) {
    for (const JsonValue& m : merges->array_items()) {
      if (m.is_string()) {
        spec.merges.push_back(m.string_value());
      } else if (m.is_array() && m.array_items().size() == 2) {
        spec.merges.push_back(absl::StrCat(m.array_items()[0].string_value(), " ",
                                           m.array_items()[1].string_value()));
      } else {
        return absl::InvalidArgumentError("tokenizer.json: bad merge entry");
      }
    }
  }
  absl::flat_hash_map<std::string, int32_t> ids;
  for (int32_t i = 0; i < size; ++i) ids.emplace(spec.tokens[i], i);
  auto lookup = [&](const std::string& t) {
    auto it = ids.find(t);
    return t.empty() || it == ids.end() ? -1 : it->second;
  };
  if (const JsonValue* unk = model->Find("unk_token"); unk && unk->is_string()) {
    spec.unk_id = lookup(unk->string_value());
  }
  spec.byte_fallback = FlagOr(model, "byte_fallback", false);

  const bool byte_level = TypeOf(tok.Find("decoder")) == "ByteLevel";
  if (byte_level) {
    if (const JsonValue* n = tok.Find("normalizer"); n && !n->is_null()) {
      return Unsupported(absl::StrCat("normalizer '", std::string(TypeOf(n)), "'"));
    }
    spec.model = "gpt2";
    absl::Status s = DetectByteLevelPre(tok, &spec);
    if (!s.ok()) return s;
  } else {
    absl::Status s = DetectSentencePiece(tok, &spec);
    if (!s.ok()) return s;
  }

  // BOS/EOS insertion from a TemplateProcessing post-processor.
  for (const JsonValue* p : Flatten(tok.Find("post_processor"), "processors")) {
    if (TypeOf(p) != "TemplateProcessing") continue;
    const std::vector<JsonValue>& single =
        p->Find("single") ? p->Find("single")->array_items()
                          : std::vector<JsonValue>();
    for (size_t k = 0; k < single.size(); ++k) {
      const JsonValue* st = single[k].Find("SpecialToken");
      if (st == nullptr) continue;
      const int32_t id = lookup(st->Find("id") ? st->Find("id")->string_value() : "");
      if (k == 0) {
        spec.add_bos = true;
        spec.bos_id = id;
      } else if (k + 1 == single.size()) {
        spec.add_eos = true;
        spec.eos_id = id;
      }
    }
  }
  if (config != nullptr) {
    auto set_id = [&](std::string_view key, int32_t* id) {
      const std::string t = TokenField(config, key);
      if (!t.empty() && lookup(t) >= 0) *id = lookup(t);
    };
    set_id("bos_token", &spec.bos_id);
    set_id("eos_token", &spec.eos_id);
    set_id("pad_token", &spec.pad_id);
    set_id("unk_token", &spec.unk_id);
    if (const JsonValue* v = config->Find("add_bos_token"); v && v->is_bool()) {
      spec.add_bos = v->bool_value();
    }
    if (const JsonValue* v = config->Find("add_eos_token"); v && v->is_bool()) {
      spec.add_eos = v->bool_value();
    }
    if (const JsonValue* t = config->Find("chat_template")) {
      if (t->is_string()) {
        spec.chat_template = t->string_value();
      } else {
        for (const JsonValue& named : t->array_items()) {
          const JsonValue* name = named.Find("name");
          const JsonValue* text = named.Find("template");
          if (name == nullptr || text == nullptr) continue;
          if (name->string_value() == "default") {
            spec.chat_template = text->string_value();
          } else {
            spec.named_chat_templates[name->string_value()] = text->string_value();
          }
        }
      }
    }
  }
  return spec;
}

absl::StatusOr<TokenizerSpec> LoadTokenizerJson(const std::string& path,
                                                const std::string& config_path) {
  absl::StatusOr<JsonValue> tok = base::json::ParseJsonFile(path);
  if (!tok.ok()) return tok.status();
  absl::StatusOr<JsonValue> config;
  if (!config_path.empty()) {
    config = base::json::ParseJsonFile(config_path);
    if (!config.ok()) return config.status();
  }
  return TokenizerSpecFromJson(*tok, config_path.empty() ? nullptr : &*config);
}

}  // namespace rill::tokenizer
