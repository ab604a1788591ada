// libFuzzer target: chat templates (ChatTemplate::Create parses the template
// source with Rill's Jinja engine, Apply renders the messages). Both must
// return a Status, never crash or hang.
//
// Input: [flags] then '\0'-separated fields: template, bos, eos, then
// role/content pairs. Flags bit 0: add_generation_prompt; bits 1-2 == 1:
// render with the default model's template (loaded once) instead of the
// input's, so the messages get fuzzed against a template that parses; bit 3:
// the bos field parsed as JSON is also the chat_template_kwargs (an object)
// or the tools (an array); bit 4: continue_final_message (instead of bit 0).
// Checked: Create fails only with UNIMPLEMENTED (a template Rill cannot use),
// Apply only with INVALID_ARGUMENT (the template rejects the messages) or
// UNIMPLEMENTED (it needs what the engine lacks); valid UTF-8 in gives valid
// UTF-8 out; the default model's (ChatML) template copies every role and
// content verbatim.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <glog/logging.h>

#include "base/json.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/test_util.h"
#include "tokenizer/unicode_data.h"

namespace {

using rill::tokenizer::ChatMessage;
using rill::tokenizer::ChatTemplate;
using rill::tokenizer::IsValidUtf8;

std::string* g_model_template = nullptr;  // Empty when no model is installed.

std::vector<std::string> SplitFields(std::string_view s) {
  std::vector<std::string> out;
  while (true) {
    const size_t z = s.find('\0');
    out.emplace_back(s.substr(0, z));
    if (z == std::string_view::npos) return out;
    s.remove_prefix(z + 1);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  g_model_template = new std::string;
  const std::string path = rill::tokenizer::testing::DefaultModelPath();
  if (path.empty()) return 0;
  absl::StatusOr<rill::tokenizer::TokenizerSpec> spec =
      rill::tokenizer::testing::ReadGgufTokenizer(path);
  CHECK(spec.ok()) << spec.status();
  *g_model_template = spec->chat_template;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  const std::vector<std::string> f =
      SplitFields(std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
  const bool use_model = ((flags >> 1) & 3) == 1 && !g_model_template->empty();
  const std::string& source = use_model ? *g_model_template : f[0];
  const std::string bos = f.size() > 1 ? f[1] : "<s>";
  const std::string eos = f.size() > 2 ? f[2] : "</s>";
  std::vector<ChatMessage> messages;
  bool all_utf8 = IsValidUtf8(bos) && IsValidUtf8(eos);
  for (size_t i = 3; i < f.size() && messages.size() < 256; i += 2) {
    messages.push_back({f[i], i + 1 < f.size() ? f[i + 1] : ""});
    all_utf8 = all_utf8 && IsValidUtf8(messages.back().role) &&
               IsValidUtf8(messages.back().content);
  }

  absl::StatusOr<ChatTemplate> t = ChatTemplate::Create(source);
  if (!t.ok()) {
    CHECK_EQ(t.status().code(), absl::StatusCode::kUnimplemented) << t.status();
    return 0;
  }
  rill::tokenizer::ChatTemplateOptions options;
  options.add_generation_prompt = (flags & 1) && !(flags & 16);
  options.continue_final_message = flags & 16;
  options.bos_token = bos;
  options.eos_token = eos;
  if (flags & 8) {
    absl::StatusOr<rill::base::json::JsonValue> json = rill::base::json::ParseJson(bos);
    if (json.ok() && json->is_object()) options.kwargs = json->object_members();
    if (json.ok() && json->is_array()) options.tools = *json;
  }
  absl::StatusOr<std::string> out = t->Apply(messages, options);
  if (!out.ok()) {
    CHECK(out.status().code() == absl::StatusCode::kInvalidArgument ||
          out.status().code() == absl::StatusCode::kUnimplemented)
        << out.status();
    return 0;
  }
  if (all_utf8 && IsValidUtf8(source)) {
    CHECK(IsValidUtf8(*out)) << "valid UTF-8 in rendered to invalid UTF-8";
  }
  if (use_model && !options.continue_final_message) {
    size_t at = 0;
    for (const ChatMessage& m : messages) {
      const std::string block = "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      const size_t found = out->find(block, at);
      CHECK(found != std::string::npos) << "message missing from the ChatML rendering";
      at = found + block.size();
    }
  }
  return 0;
}
