#include "tokenizer/spec_proto.h"

#include <string>

namespace rill::tokenizer {

rill::internal::TokenizerSpec SpecToProto(const TokenizerSpec& s, int64_t max_model_len) {
  rill::internal::TokenizerSpec p;
  p.set_model(s.model);
  for (const std::string& t : s.tokens) p.add_tokens(t);
  for (int32_t t : s.token_types) p.add_token_types(t);
  for (const std::string& m : s.merges) p.add_merges(m);
  for (float f : s.scores) p.add_scores(f);
  p.set_pre(s.pre);
  p.set_bos_id(s.bos_id);
  p.set_eos_id(s.eos_id);
  p.set_pad_id(s.pad_id);
  p.set_unk_id(s.unk_id);
  p.set_add_bos(s.add_bos);
  p.set_add_eos(s.add_eos);
  p.set_add_space_prefix(s.add_space_prefix);
  p.set_byte_fallback(s.byte_fallback);
  p.set_chat_template(s.chat_template);
  for (const auto& [name, text] : s.named_chat_templates) (*p.mutable_named_chat_templates())[name] = text;
  p.set_max_model_len(max_model_len);
  return p;
}

TokenizerSpec SpecFromProto(const rill::internal::TokenizerSpec& p) {
  TokenizerSpec s;
  s.model = p.model();
  s.tokens.assign(p.tokens().begin(), p.tokens().end());
  s.token_types.assign(p.token_types().begin(), p.token_types().end());
  s.merges.assign(p.merges().begin(), p.merges().end());
  s.scores.assign(p.scores().begin(), p.scores().end());
  if (!p.pre().empty()) s.pre = p.pre();
  s.bos_id = p.bos_id();
  s.eos_id = p.eos_id();
  s.pad_id = p.pad_id();
  s.unk_id = p.unk_id();
  s.add_bos = p.add_bos();
  s.add_eos = p.add_eos();
  s.add_space_prefix = p.add_space_prefix();
  s.byte_fallback = p.byte_fallback();
  s.chat_template = p.chat_template();
  for (const auto& [name, text] : p.named_chat_templates()) s.named_chat_templates[name] = text;
  return s;
}

}  // namespace rill::tokenizer
