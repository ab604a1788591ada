// Writes the seed corpora of the frontend fuzzers (checked in under corpus/).
// Usage: make_seeds OUT_DIR  (writes OUT_DIR/{tokenizer,chat_template,request_validator}/*)
// Regenerate with: bazel run //frontend/fuzz:make_seeds -- $PWD/frontend/fuzz/corpus
// Input formats are described at the top of each *_fuzzer.cc.
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tools/fuzz/seed_maker.h"
#include "rill/v1/inference.pb.h"

namespace {

using rill::fuzz::WriteSeed;

std::string S(const char* p, size_t n) { return std::string(p, n); }

// ---- tokenizer: [mode byte][payload] ----
void TokenizerSeeds(const std::string& dir) {
  const std::pair<const char*, std::string> kTexts[] = {
      {"english", "The capital of France is Paris. It's 42 degrees, isn't it?"},
      {"code", "def f(x):\n    return x ** 2  # square\n\n\tprint(f(3))\r\n"},
      {"chatml", "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"},
      {"specials_glued", "<|endoftext|><|im_start|><|im_end|>x<|im_start"},
      {"emoji", "I \xe2\x9d\xa4\xef\xb8\x8f rivers \xf0\x9f\x8c\x8a\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd"},
      {"cjk", "\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe4\xb8\x96\xe7\x95\x8c\xe3\x80\x82 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e"},
      {"accents", "Cr\xc3\xa8me br\xc3\xbbl\xc3\xa9" "e, na\xc3\xafve co\xc3\xb6perate, e\xcc\x81"},
      {"digits", "1234567890 3.14159 1,000,000 0x1F 1e-9 \xd9\xa3\xd9\xa4"},
      {"spaces", "   leading\t\ttabs  \n\n\n  trailing   \xc2\xa0nbsp\xe2\x80\x83"},
      {"contractions", "I'm you're they've we'll she'd it's DON'T"},
      {"punct", "!!!???...---***((([[[{{{<<<>>>}}}]]])))"},
      {"controls", S("\x00\x01\x04\x07\x1b[0m\x7f", 9)},
      {"invalid_utf8", "ok \xc3 \xe2\x82 \xf0\x9f\x98 \xff\xfe \xed\xa0\x80 \xc0\xaf end"},
      {"cyrillic_greek", "\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 \xce\xba\xcf\x8c\xcf\x83\xce\xbc\xce\xb5"},
      {"long_word", "supercalifragilisticexpialidociousantidisestablishmentarianism"},
      {"empty", ""},
  };
  int k = 0;
  for (const auto& t : kTexts) {
    WriteSeed(dir, absl::StrCat("text_", t.first), std::string(1, static_cast<char>(k++ % 2)) + t.second);
  }
  auto ids = [](std::vector<int> v) {
    std::string s(1, '\x02');
    for (int id : v) {
      s.push_back(static_cast<char>(id & 0xff));
      s.push_back(static_cast<char>((id >> 8) & 0xff));
    }
    return s;
  };
  WriteSeed(dir, "ids_short", ids({1, 2, 100, 200, 1000, 5000}));
  WriteSeed(dir, "ids_bytes", ids({0, 3, 4, 5, 130, 150, 170, 180, 190, 200, 210, 220, 230, 240, 250}));
  WriteSeed(dir, "ids_specials", ids({1, 9690, 2, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  WriteSeed(dir, "ids_invalid", ids({10, 0xFFF0, 20, 0xFFF1, 0xFFF7, 30}));
  WriteSeed(dir, "ids_high", ids({49151, 49150, 40000, 30000, 20000, 65000}));
  WriteSeed(dir, "ids_empty", ids({}));
  // Spec mode: [3][flags][pre][bos][eos] vocab lines \0\0 text.
  auto spec = [](uint8_t flags, uint8_t pre, int8_t bos, int8_t eos, const std::string& vocab,
                 const std::string& text) {
    std::string s = {'\x03', static_cast<char>(flags), static_cast<char>(pre),
                     static_cast<char>(bos), static_cast<char>(eos)};
    return s + vocab + std::string("\0\0", 2) + text;
  };
  WriteSeed(dir, "spec_gpt2", spec(0x00, 2, -1, -1, "a\nb\nab\n\xc4\xa0\n#m a b", "ab ba abab"));
  WriteSeed(dir, "spec_gpt2_typed",
        spec(0x20, 1, 2, -1, "\x01h\n\x01i\n\x03<s>\n\x01hi\n#m h i", "<s>hi hi<s>"));
  WriteSeed(dir, "spec_llama_scores",
        spec(0x47, 0, -1, -1,
             "<unk>\n\xe2\x96\x81\na\nb\n\xe2\x96\x81" "a\nab\n<0x41>\n<0xC3>\n<0xA9>", "a ab A\xc3\xa9"));
  WriteSeed(dir, "spec_llama_merges",
        spec(0xa3, 0, 0, 1, "<s>\n</s>\n\xe2\x96\x81\nx\ny\n\xe2\x96\x81x\n#m \xe2\x96\x81 x", " x y"));
  WriteSeed(dir, "spec_llama_typed_bytes",
        spec(0x7f, 0, 1, 2,
             "\x02<unk>\n\x03<s>\n\x03</s>\n\x06<0x00>\n\x06<0xFF>\n\x06<0x20>\n\x01q\n\x04<tag>",
             "q<tag>\xff q"));
  WriteSeed(dir, "spec_bad_type", spec(0x20, 1, -1, -1, "\x09x\n\x01y", "xy"));
  WriteSeed(dir, "spec_bad_merge", spec(0x00, 1, -1, -1, "a\nb\n#m a c", "ab"));
  WriteSeed(dir, "spec_bad_pre", spec(0x00, 5, -1, -1, "a", "a"));
}

// ---- chat_template: [flags] template \0 bos \0 eos \0 (role \0 content \0)* ----
const char kSmolLm2[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}";
const char kChatMl[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";
const char kLlama3[] =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | "
    "trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
    "{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";
const char kLlama2[] =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set "
    "system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set "
    "system_message = false %}{% endif %}{% for message in loop_messages %}{% if "
    "(message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation "
    "roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 "
    "and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
    "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}"
    "{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + "
    "' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + "
    "eos_token }}{% endif %}{% endfor %}";

void ChatSeeds(const std::string& dir) {
  using Msgs = std::vector<std::pair<std::string, std::string>>;
  auto chat = [](uint8_t flags, const std::string& tmpl, const Msgs& msgs) {
    std::string s(1, static_cast<char>(flags));
    s += tmpl + std::string("\0<s>\0</s>", 9);
    for (const auto& [role, content] : msgs) {
      s += std::string(1, '\0') + role + std::string(1, '\0') + content;
    }
    return s;
  };
  const Msgs kUser = {{"user", "Hello!"}};
  const Msgs kSystem = {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", " Hello. "},
                        {"user", "\tBye\n"}};
  const Msgs kBadOrder = {{"user", "a"}, {"user", "b"}};
  const Msgs kOdd = {{"", ""}, {"tool", "{\"x\": 1}"}, {"user", "\xe2\x80\x83 \x1c\x1d spaced \x1f"},
                     {"assistant", "<|im_end|><|eot_id|>"}};
  const Msgs kInvalid = {{"user", "bad \xff\xc3 utf8"}, {"assistant", "\xed\xa0\x80"}};
  const struct {
    const char* name;
    const char* tmpl;
  } kTemplates[] = {{"smollm2", kSmolLm2}, {"chatml", kChatMl}, {"llama3", kLlama3},
                    {"llama2", kLlama2}};
  for (const auto& t : kTemplates) {
    WriteSeed(dir, absl::StrCat(t.name, "_user"), chat(1, t.tmpl, kUser));
    WriteSeed(dir, absl::StrCat(t.name, "_system"), chat(0, t.tmpl, kSystem));
    WriteSeed(dir, absl::StrCat(t.name, "_bad_order"), chat(1, t.tmpl, kBadOrder));
    WriteSeed(dir, absl::StrCat(t.name, "_odd"), chat(1, t.tmpl, kOdd));
    WriteSeed(dir, absl::StrCat(t.name, "_invalid_utf8"), chat(0, t.tmpl, kInvalid));
    WriteSeed(dir, absl::StrCat(t.name, "_empty"), chat(1, t.tmpl, {}));
  }
  // Published variants: reflowed whitespace, a different default system prompt.
  std::string spaced = kChatMl;
  for (size_t at = 0; (at = spaced.find("{%", at)) != std::string::npos; at += 4) {
    spaced.replace(at, 2, "{%- ");
  }
  WriteSeed(dir, "chatml_trim_markers", chat(1, spaced, kSystem));
  std::string qwen = kSmolLm2;
  const std::string smol_system =
      "You are a helpful AI assistant named SmolLM, trained by Hugging Face";
  qwen.replace(qwen.find(smol_system), smol_system.size(),
               "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
  WriteSeed(dir, "chatml_other_system", chat(1, qwen, kUser));
  WriteSeed(dir, "model_template_user", chat(3, "", kUser));  // Flags 2: the model's template.
  WriteSeed(dir, "model_template_odd", chat(2, "", kOdd));
  WriteSeed(dir, "unknown_template", chat(1, "{{ messages }}", kUser));
  WriteSeed(dir, "unterminated", chat(1, "{% for message in messages %}{{ 'x", kUser));
  WriteSeed(dir, "empty_template", chat(1, "", kUser));
}

// ---- request_validator: serialized rill.v1.GenerateRequest ----
void RequestSeeds(const std::string& dir) {
  auto put = [&](const std::string& name, const rill::v1::GenerateRequest& r) {
    WriteSeed(dir, name, r.SerializeAsString());
  };
  {
    rill::v1::GenerateRequest r;
    r.mutable_start()->set_request_id("req-1");
    r.mutable_start()->set_text("The capital of France is");
    put("text", r);
  }
  {
    rill::v1::GenerateRequest r;
    auto* s = r.mutable_start();
    for (int id : {1, 504, 3458, 282, 4649, 314}) s->mutable_token_ids()->add_ids(id);
    auto* p = s->mutable_sampling();
    p->set_n(2);
    p->set_max_tokens(32);
    p->set_min_tokens(4);
    p->set_temperature(0.7f);
    p->set_top_p(0.9f);
    p->set_top_k(40);
    p->set_min_p(0.05f);
    p->set_seed(1234);
    p->add_stop("\n\n");
    p->add_stop("END");
    p->add_stop_token_ids(2);
    p->set_include_stop_str_in_output(true);
    p->set_ignore_eos(true);
    p->set_logprobs(5);
    p->set_prompt_logprobs(1);
    p->set_repetition_penalty(1.1f);
    p->set_presence_penalty(0.5f);
    p->set_frequency_penalty(-0.5f);
    (*p->mutable_logit_bias())[42] = -100.0f;
    (*p->mutable_logit_bias())[7] = 3.5f;
    p->set_skip_special_tokens(false);
    s->set_lora_name("adapter-a");
    s->set_priority(-3);
    (*s->mutable_trace_headers())["traceparent"] = "00-abc-def-01";
    s->set_output_mode(rill::v1::OUTPUT_MODE_CUMULATIVE);
    s->set_add_special_tokens(false);
    put("token_ids_all_sampling", r);
  }
  {
    rill::v1::GenerateRequest r;
    auto* c = r.mutable_start()->mutable_chat();
    auto* m = c->add_messages();
    m->set_role("system");
    m->set_content("You are terse.");
    m = c->add_messages();
    m->set_role("user");
    m->set_content("Write a haiku about rivers \xf0\x9f\x8c\x8a");
    c->set_add_generation_prompt(true);
    r.mutable_start()->mutable_sampling()->set_max_tokens(64);
    r.mutable_start()->set_output_mode(rill::v1::OUTPUT_MODE_FINAL_ONLY);
    put("chat", r);
  }
  {
    rill::v1::GenerateRequest r;
    r.mutable_abort()->set_request_id("req-1");
    put("abort", r);
  }
  put("empty", rill::v1::GenerateRequest());
  {
    rill::v1::GenerateRequest r;
    r.mutable_start();
    put("start_no_prompt", r);
  }
  // Values each check rejects.
  struct Bad {
    const char* name;
    void (*set)(rill::v1::SamplingParams*);
  };
  const Bad kBad[] = {
      {"bad_n", [](rill::v1::SamplingParams* p) { p->set_n(0); }},
      {"bad_n_big", [](rill::v1::SamplingParams* p) { p->set_n(1000); }},
      {"bad_max_tokens", [](rill::v1::SamplingParams* p) { p->set_max_tokens(-1); }},
      {"bad_min_tokens", [](rill::v1::SamplingParams* p) { p->set_min_tokens(-5); }},
      {"bad_min_over_max",
       [](rill::v1::SamplingParams* p) {
         p->set_max_tokens(2);
         p->set_min_tokens(3);
       }},
      {"bad_temperature_nan",
       [](rill::v1::SamplingParams* p) { p->set_temperature(std::numeric_limits<float>::quiet_NaN()); }},
      {"bad_temperature_inf",
       [](rill::v1::SamplingParams* p) { p->set_temperature(std::numeric_limits<float>::infinity()); }},
      {"bad_top_p", [](rill::v1::SamplingParams* p) { p->set_top_p(0); }},
      {"bad_top_k", [](rill::v1::SamplingParams* p) { p->set_top_k(-7); }},
      {"bad_min_p", [](rill::v1::SamplingParams* p) { p->set_min_p(1.5f); }},
      {"bad_logprobs", [](rill::v1::SamplingParams* p) { p->set_logprobs(100); }},
      {"bad_prompt_logprobs", [](rill::v1::SamplingParams* p) { p->set_prompt_logprobs(-1); }},
      {"bad_repetition_penalty", [](rill::v1::SamplingParams* p) { p->set_repetition_penalty(0); }},
      {"many_stops",
       [](rill::v1::SamplingParams* p) {
         for (int i = 0; i < 70; ++i) p->add_stop("s");
       }},
      {"long_stop", [](rill::v1::SamplingParams* p) { p->add_stop(std::string(5000, 'x')); }},
  };
  for (const Bad& b : kBad) {
    rill::v1::GenerateRequest r;
    r.mutable_start()->set_text("x");
    b.set(r.mutable_start()->mutable_sampling());
    put(b.name, r);
  }
  {
    rill::v1::GenerateRequest r;
    r.mutable_start()->set_text("x");
    r.mutable_start()->set_output_mode(static_cast<rill::v1::OutputMode>(7));
    put("bad_output_mode", r);
  }
  {
    rill::v1::GenerateRequest r;
    r.mutable_start()->mutable_token_ids();
    put("empty_token_ids", r);
  }
  {
    rill::v1::GenerateRequest r;
    r.mutable_start()->mutable_chat();
    put("empty_chat", r);
  }
  // Hand-written wire bytes: invalid UTF-8, an unknown field, a group, a
  // truncated message, unpacked repeated ids.
  WriteSeed(dir, "raw_bad_utf8", S("\x0a\x05\x12\x03\xff\xfe\x41", 7));
  WriteSeed(dir, "raw_unknown_field", S("\x0a\x06\x12\x01x\xa8\x06\x01", 8));
  WriteSeed(dir, "raw_group", S("\x0a\x05\x12\x01x\x7b\x7c", 7));
  WriteSeed(dir, "raw_truncated", S("\x0a\x09\x12\x07Hello", 9));
  WriteSeed(dir, "raw_unpacked_ids", S("\x0a\x08\x1a\x06\x08\x01\x08\x02\x08\x03", 10));
  WriteSeed(dir, "raw_start_as_varint", S("\x08\x01", 2));
  WriteSeed(dir, "raw_text_as_fixed32", S("\x0a\x05\x15\x41\x42\x43\x44", 7));
}

}  // namespace

int main(int argc, char** argv) {
  return rill::fuzz::SeedMakerMain(argc, argv, {
                                   {"tokenizer", TokenizerSeeds},
                                   {"chat_template", ChatSeeds},
                                   {"request_validator", RequestSeeds}});
}
