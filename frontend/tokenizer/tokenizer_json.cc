#include "frontend/tokenizer/tokenizer_json.h"

#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace rill::tokenizer {
namespace {

using json::Value;

constexpr std::string_view kLlama3Re =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr std::string_view kQwen2Re =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";

std::string_view TypeOf(const Value* v) {
  if (v == nullptr) return "";
  const Value* t = v->Find("type");
  return t ? std::string_view(t->AsString()) : std::string_view();
}

// Flattens a possibly nested {"type":"Sequence", <list_key>: [...]}.
std::vector<const Value*> Flatten(const Value* v, std::string_view list_key) {
  std::vector<const Value*> out;
  if (v == nullptr || v->is_null()) return out;
  if (TypeOf(v) == "Sequence") {
    if (const Value* items = v->Find(list_key)) {
      for (const Value& item : items->AsArray()) {
        for (const Value* x : Flatten(&item, list_key)) out.push_back(x);
      }
    }
    return out;
  }
  out.push_back(v);
  return out;
}

bool FlagOr(const Value* v, std::string_view key, bool dflt) {
  const Value* f = v->Find(key);
  return f && f->is_bool() ? f->AsBool() : dflt;
}

// The "String" or "Regex" content of a Split/Replace pattern.
std::string PatternOf(const Value* v) {
  const Value* p = v->Find("pattern");
  if (p == nullptr) return "";
  if (const Value* s = p->Find("String")) return s->AsString();
  if (const Value* s = p->Find("Regex")) return s->AsString();
  return "";
}

absl::Status Unsupported(std::string_view what) {
  return absl::UnimplementedError(
      absl::StrCat("tokenizer.json: unsupported ", std::string(what)));
}

// Token text from a tokenizer_config.json field ("<s>" or {"content": ...}).
std::string TokenField(const Value* config, std::string_view key) {
  if (config == nullptr) return "";
  const Value* v = config->Find(key);
  if (v == nullptr) return "";
  if (v->is_string()) return v->AsString();
  if (const Value* c = v->Find("content")) return c->AsString();
  return "";
}

absl::Status DetectByteLevelPre(const Value& tok, TokenizerSpec* spec) {
  const std::vector<const Value*> pre =
      Flatten(tok.Find("pre_tokenizer"), "pretokenizers");
  for (const Value* p : pre) {
    if (TypeOf(p) == "ByteLevel" && FlagOr(p, "add_prefix_space", false)) {
      return Unsupported("ByteLevel add_prefix_space=true");
    }
  }
  if (pre.size() == 1 && TypeOf(pre[0]) == "ByteLevel" &&
      FlagOr(pre[0], "use_regex", true)) {
    spec->pre = "gpt2";
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
      const Value* behavior = pre[0]->Find("behavior");
      const std::string pat = PatternOf(pre[0]);
      if (behavior && behavior->AsString() == "Isolated" &&
          !FlagOr(pre[0], "invert", false)) {
        if (pat == kLlama3Re) {
          spec->pre = "llama3";
          return absl::OkStatus();
        }
        if (pat == kQwen2Re) {
          spec->pre = "qwen2";
          return absl::OkStatus();
        }
      }
      return Unsupported(absl::StrCat("Split pre-tokenizer regex ", pat));
    }
  }
  return Unsupported("byte-level pre_tokenizer pipeline");
}

absl::Status DetectSentencePiece(const Value& tok, TokenizerSpec* spec) {
  if (const Value* pre = tok.Find("pre_tokenizer"); pre && !pre->is_null()) {
    return Unsupported(absl::StrCat("pre_tokenizer '", std::string(TypeOf(pre)),
                                    "' for a SentencePiece-style model"));
  }
  bool prepend = false, replace = false;
  for (const Value* n : Flatten(tok.Find("normalizer"), "normalizers")) {
    const std::string_view type = TypeOf(n);
    if (type == "Prepend" && n->Find("prepend") &&
        n->Find("prepend")->AsString() == kSpaceMarker) {
      prepend = true;
    } else if (type == "Replace" && PatternOf(n) == " " && n->Find("content") &&
               n->Find("content")->AsString() == kSpaceMarker) {
      replace = true;
    } else {
      return Unsupported(absl::StrCat("normalizer '", std::string(type), "'"));
    }
  }
  if (!replace) return Unsupported("SentencePiece model without ' '->'▁'");
  spec->model = "llama";
  spec->add_space_prefix = prepend;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TokenizerSpec> TokenizerSpecFromJson(const Value& tok,
                                                    const Value* config) {
  TokenizerSpec spec;
  const Value* model = tok.Find("model");
  if (model == nullptr || TypeOf(model) != "BPE") {
    return Unsupported(absl::StrCat("model type '", std::string(TypeOf(model)), "'"));
  }
  if (const Value* d = model->Find("dropout"); d && !d->is_null()) {
    return Unsupported("BPE dropout");
  }
  if (const Value* p = model->Find("continuing_subword_prefix");
      p && !p->is_null() && !p->AsString().empty()) {
    return Unsupported("continuing_subword_prefix");
  }
  // Vocab plus added tokens may leave gaps; those become unused ids.
  int32_t size = 0;
  const Value* vocab = model->Find("vocab");
  if (vocab == nullptr || !vocab->is_object()) {
    return absl::InvalidArgumentError("tokenizer.json: model.vocab missing");
  }
  for (const auto& [text, id] : vocab->AsObject()) {
    size = std::max(size, static_cast<int32_t>(id.AsNumber()) + 1);
  }
  const Value* added = tok.Find("added_tokens");
  if (added != nullptr) {
    for (const Value& a : added->AsArray()) {
      if (const Value* id = a.Find("id")) {
        size = std::max(size, static_cast<int32_t>(id->AsNumber()) + 1);
      }
    }
  }
  spec.tokens.assign(size, "");
  spec.token_types.assign(size, static_cast<int32_t>(TokenType::kUnused));
  for (const auto& [text, id] : vocab->AsObject()) {
    const int32_t i = static_cast<int32_t>(id.AsNumber());
    if (i < 0) return absl::InvalidArgumentError("negative token id");
    spec.tokens[i] = text;
    spec.token_types[i] = static_cast<int32_t>(TokenType::kNormal);
  }
  if (added != nullptr) {
    for (const Value& a : added->AsArray()) {
      const Value* id = a.Find("id");
      const Value* content = a.Find("content");
      if (id == nullptr || content == nullptr) continue;
      if (FlagOr(&a, "lstrip", false) || FlagOr(&a, "rstrip", false) ||
          FlagOr(&a, "single_word", false)) {
        return Unsupported(absl::StrCat("added token options on '",
                                        content->AsString(), "'"));
      }
      const int32_t i = static_cast<int32_t>(id->AsNumber());
      if (i < 0) return absl::InvalidArgumentError("negative token id");
      spec.tokens[i] = content->AsString();
      spec.token_types[i] = static_cast<int32_t>(
          FlagOr(&a, "special", false) ? TokenType::kControl
                                       : TokenType::kUserDefined);
    }
  }
  if (const Value* merges = model->Find("merges")) {
    for (const Value& m : merges->AsArray()) {
      if (m.is_string()) {
        spec.merges.push_back(m.AsString());
      } else if (m.is_array() && m.AsArray().size() == 2) {
        spec.merges.push_back(absl::StrCat(m.AsArray()[0].AsString(), " ",
                                           m.AsArray()[1].AsString()));
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
  if (const Value* unk = model->Find("unk_token"); unk && unk->is_string()) {
    spec.unk_id = lookup(unk->AsString());
  }
  spec.byte_fallback = FlagOr(model, "byte_fallback", false);

  const bool byte_level = TypeOf(tok.Find("decoder")) == "ByteLevel";
  if (byte_level) {
    if (const Value* n = tok.Find("normalizer"); n && !n->is_null()) {
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
  for (const Value* p : Flatten(tok.Find("post_processor"), "processors")) {
    if (TypeOf(p) != "TemplateProcessing") continue;
    const std::vector<Value>& single =
        p->Find("single") ? p->Find("single")->AsArray()
                          : std::vector<Value>();
    for (size_t k = 0; k < single.size(); ++k) {
      const Value* st = single[k].Find("SpecialToken");
      if (st == nullptr) continue;
      const int32_t id = lookup(st->Find("id") ? st->Find("id")->AsString() : "");
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
    if (const Value* v = config->Find("add_bos_token"); v && v->is_bool()) {
      spec.add_bos = v->AsBool();
    }
    if (const Value* v = config->Find("add_eos_token"); v && v->is_bool()) {
      spec.add_eos = v->AsBool();
    }
    if (const Value* t = config->Find("chat_template")) {
      if (t->is_string()) {
        spec.chat_template = t->AsString();
      } else {
        for (const Value& named : t->AsArray()) {
          const Value* name = named.Find("name");
          if (name && name->AsString() == "default" && named.Find("template")) {
            spec.chat_template = named.Find("template")->AsString();
          }
        }
      }
    }
  }
  return spec;
}

absl::StatusOr<TokenizerSpec> LoadTokenizerJson(const std::string& path,
                                                const std::string& config_path) {
  absl::StatusOr<Value> tok = json::ParseFile(path);
  if (!tok.ok()) return tok.status();
  absl::StatusOr<Value> config;
  if (!config_path.empty()) {
    config = json::ParseFile(config_path);
    if (!config.ok()) return config.status();
  }
  return TokenizerSpecFromJson(*tok, config_path.empty() ? nullptr : &*config);
}

}  // namespace rill::tokenizer
