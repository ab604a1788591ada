#include "tokenizer/chat_template.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/json.h"
#include "tokenizer/test_util.h"

namespace rill::tokenizer {
namespace {

TEST(ChatTemplateTest, RefusesEmptyAndUnrenderableTemplatesByName) {
  EXPECT_EQ(ChatTemplate::Create("").status().code(), absl::StatusCode::kUnimplemented);
  for (const char* t : {"{% include 'x.jinja' %}", "{% for m in messages %}",
                        "{% call f() %}x{% endcall %}"}) {
    absl::StatusOr<ChatTemplate> c = ChatTemplate::Create(t);
    ASSERT_FALSE(c.ok()) << t;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kUnimplemented) << c.status();
  }
  // A filter the engine lacks is named at load and refused when reached.
  absl::StatusOr<ChatTemplate> c = ChatTemplate::Create("{{ messages[0]['content'] | wordwrap(5) }}");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->UnsupportedFeatures(), std::vector<std::string>{"filter 'wordwrap'"});
  absl::StatusOr<std::string> out = c->Apply({{"user", "x"}}, true, "<s>", "</s>");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(out.status().message().find("filter 'wordwrap'"), std::string::npos) << out.status();
}

TEST(ChatTemplateTest, RaiseExceptionIsInvalidArgumentWithItsMessage) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::Create(
      "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
      "{% endif %}{{ messages[0]['content'] }}");
  ASSERT_TRUE(t.ok()) << t.status();
  absl::StatusOr<std::string> out = t->Apply({{"system", "x"}}, true, "<s>", "</s>");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(), "System role not supported");
  EXPECT_EQ(*t->Apply({{"user", "x"}}, true, "<s>", "</s>"), "x");
}

ChatTemplate Compile(const std::string& source) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::Create(source);
  EXPECT_TRUE(t.ok()) << t.status();
  return std::move(*t);
}

base::json::JsonValue Json(const std::string& text) {
  absl::StatusOr<base::json::JsonValue> v = base::json::ParseJson(text);
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *v : base::json::JsonValue();
}

constexpr char kChatml[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

TEST(ChatTemplateTest, ContinueFinalMessageLeavesTheAssistantMessageOpen) {
  const ChatTemplate t = Compile(kChatml);
  ChatTemplateOptions options;
  options.add_generation_prompt = false;
  options.continue_final_message = true;
  absl::StatusOr<std::string> out = t.Apply({{"user", "Hi"}, {"assistant", "Once upon a"}}, options);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nOnce upon a");
  // Trailing whitespace the template keeps is kept (transformers' rule).
  out = t.Apply({{"user", "Hi"}, {"assistant", "1, 2, "}}, options);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n1, 2, ");
}

TEST(ChatTemplateTest, ContradictingOptionsAreInvalidArgumentNamingTheOption) {
  const ChatTemplate t = Compile(kChatml);
  ChatTemplateOptions both;
  both.continue_final_message = true;  // add_generation_prompt stays true.
  absl::StatusOr<std::string> out = t.Apply({{"user", "Hi"}, {"assistant", "x"}}, both);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("add_generation_prompt"), std::string::npos) << out.status();

  ChatTemplateOptions cont;
  cont.add_generation_prompt = false;
  cont.continue_final_message = true;
  out = t.Apply({{"user", "Hi"}}, cont);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("continue_final_message"), std::string::npos) << out.status();

  ChatTemplateOptions reserved;
  reserved.kwargs = {{"tools", Json("[]")}};
  out = t.Apply({{"user", "Hi"}}, reserved);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("chat_template_kwargs"), std::string::npos) << out.status();
}

// A repeated kwarg keeps its last value (json.loads); kwargs the template
// never reads are skipped, so many of them cost nothing.
TEST(ChatTemplateTest, KwargsLastValueWinsAndUnreadOnesAreFree) {
  const ChatTemplate t = Compile("{{ x }}|{{ y is defined }}");
  ChatTemplateOptions options;
  options.kwargs = Json(R"({"x": 1, "x": [2]})").object_members();
  for (int i = 0; i < 200000; ++i) options.kwargs.emplace_back(absl::StrCat("k", i), Json("true"));
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> out = t.Apply({{"user", "Hi"}}, options);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "[2]|False");
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

// Tool fields reach the template only when set: `'tool_calls' in message`.
TEST(ChatTemplateTest, MessagesCarryToolFieldsOnlyWhenSet) {
  const ChatTemplate t = Compile(
      "{% for m in messages %}{{ m.role }}{% if 'tool_calls' in m %} calls={{ m.tool_calls|tojson }}"
      "{% endif %}{% if m.tool_call_id is defined %} id={{ m.tool_call_id }}{% endif %}"
      "{% if m.name is defined %} name={{ m.name }}{% endif %};{% endfor %}{{ tools|tojson }}");
  ChatMessage call{"assistant", ""};
  call.tool_calls = Json(R"([{"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}])");
  ChatMessage result{"tool", "42"};
  result.tool_call_id = "c1";
  result.name = "f";
  ChatTemplateOptions options;
  options.add_generation_prompt = false;
  options.tools = Json(R"([{"type": "function", "function": {"name": "f"}}])");
  absl::StatusOr<std::string> out = t.Apply({{"user", "q"}, call, result}, options);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out,
            "user;assistant calls=[{\"id\": \"c1\", \"type\": \"function\", \"function\": {\"name\": \"f\", "
            "\"arguments\": {\"x\": 1}}}];tool id=c1 name=f;[{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]");
}

// Templates of the model families Rill runs: each must render every case
// byte-identically to jinja2 (no refusal allowed).
const std::set<std::string>& RequiredTemplates() {
  static const auto* names = new std::set<std::string>{
      "builtin:chatml", "builtin:chatml_default_system", "builtin:llama3", "builtin:llama2",
      "meta-llama-Llama-3.1-8B-Instruct.jinja", "meta-llama-Llama-3.2-3B-Instruct.jinja",
      "meta-llama-Llama-3.3-70B-Instruct.jinja", "Qwen-Qwen2.5-7B-Instruct.jinja",
      "Qwen-QwQ-32B.jinja", "Qwen-Qwen3-0.6B.jinja", "Qwen3-Coder.jinja",
      "mistralai-Mistral-Nemo-Instruct-2407.jinja", "Mistral-Small-3.2-24B-Instruct-2506.jinja",
      "unsloth-mistral-Devstral-Small-2507.jinja", "microsoft-Phi-3.5-mini-instruct.jinja",
      "google-gemma-2-2b-it.jinja", "HuggingFaceTB-SmolLM3-3B.jinja",
      "llama_chat_format:MISTRAL_INSTRUCT_CHAT_TEMPLATE",
      "llama_chat_format:MIXTRAL_INSTRUCT_CHAT_TEMPLATE",
      "llama_chat_format:CHATML_CHAT_TEMPLATE", "llama_chat_format:LLAMA3_INSTRUCT_CHAT_TEMPLATE",
      "builtin:kwargs_probe"};
  return *names;
}

std::string TemplatesDir() {
  // @chat_templates in the runfiles (tools/fetch_llama_cpp_test_data.sh fetches it).
  for (const char* dir : {"../chat_templates", "external/chat_templates"}) {
    if (FILE* f = fopen(absl::StrCat(dir, "/llama_chat_format.py").c_str(), "r")) {
      fclose(f);
      return dir;
    }
  }
  return "";
}

struct Tally {
  int identical = 0;      // Same bytes as jinja2.
  int same_error = 0;     // jinja2 raised and so did Rill (raise_exception: same message).
  int refused = 0;        // UNIMPLEMENTED at render time.
  std::string refusal;    // Why (load or render time).
  std::string lacks;      // Filters/tests it names that the engine lacks.
  int identical_with_tools = 0;  // Of identical: with tools, tool_calls or tool results.
  int identical_continued = 0;   // Of identical: continue_final_message.
};

// A reference case's message: role, content and the tool fields it has.
ChatMessage MessageFromJson(const base::json::JsonValue& m) {
  ChatMessage out{m.Find("role")->string_value(), m.Find("content")->string_value()};
  if (const base::json::JsonValue* v = m.Find("name")) out.name = v->string_value();
  if (const base::json::JsonValue* v = m.Find("tool_call_id")) out.tool_call_id = v->string_value();
  if (const base::json::JsonValue* v = m.Find("tool_calls")) out.tool_calls = *v;
  if (const base::json::JsonValue* v = m.Find("content_parts")) {
    out.content_parts.emplace();
    for (const base::json::JsonValue& p : v->array_items()) out.content_parts->push_back(p.string_value());
  }
  return out;
}

// Every published template in @chat_templates (llama.cpp's collection of HF
// templates, llama-cpp-python's built-ins), the default model's, and the
// four templates Rill used to recognise, over fixed and random conversations,
// with and without the generation prompt (and enable_thinking where the
// template reads it): Rill's output is jinja2's, or Rill refuses by name.
TEST(ChatTemplateTest, MatchesJinja2OnPublishedTemplates) {
  const std::string dir = TemplatesDir();
  ASSERT_FALSE(dir.empty()) << "@chat_templates is missing: run tools/setup.sh "
                               "(tools/fetch_llama_cpp_test_data.sh)";
  const char* tmp = getenv("TEST_TMPDIR");
  const std::string out = std::string(tmp ? tmp : "/tmp") + "/templates.json";
  std::string args = absl::StrCat(out, " --templates ", dir);
  const bool with_model = !testing::DefaultModelPath().empty();
  if (with_model) args += " --gguf " + testing::DefaultModelPath();
  ASSERT_EQ(testing::RunPython("tokenizer/testdata/render_templates.py", args), 0);
  absl::StatusOr<base::json::JsonValue> ref = base::json::ParseJsonFile(out);
  ASSERT_TRUE(ref.ok()) << ref.status();
  const std::time_t now = static_cast<std::time_t>(*ref->Find("now")->AsInt64());

  std::map<std::string, absl::StatusOr<ChatTemplate>> templates;
  std::map<std::string, Tally> tally;
  for (const auto& [name, source] : ref->Find("templates")->object_members()) {
    templates.emplace(name, ChatTemplate::Create(source.string_value()));
    const absl::StatusOr<ChatTemplate>& t = templates.at(name);
    if (ref->Find("compile_errors")->Find(name) != nullptr) {
      EXPECT_FALSE(t.ok()) << name << ": jinja2 rejects it, Rill accepted it";
      continue;
    }
    if (t.ok()) {
      // Content parts as vLLM gives them: a list where it detects the "openai" format.
      const base::json::JsonValue* format = ref->Find("content_formats")->Find(name);
      ASSERT_NE(format, nullptr) << name;
      EXPECT_EQ(t->TakesContentParts(), format->string_value() == "openai") << name;
    }
    if (t.ok() && !t->UnsupportedFeatures().empty()) {
      tally[name].lacks = absl::StrJoin(t->UnsupportedFeatures(), ", ");
    }
    if (!t.ok()) {
      EXPECT_EQ(t.status().code(), absl::StatusCode::kUnimplemented) << name << ": " << t.status();
      EXPECT_EQ(RequiredTemplates().count(name), 0u) << name << " must render: " << t.status();
      tally[name].refusal = std::string(t.status().message());
    }
  }
  for (const std::string& name : RequiredTemplates()) {
    EXPECT_TRUE(templates.count(name)) << name << " is missing from the reference set";
  }
  if (with_model) {
    EXPECT_TRUE(templates.count("default-model"));
  }

  absl::Duration render_time;
  int renders = 0;
  for (const base::json::JsonValue& c : ref->Find("cases")->array_items()) {
    const std::string& name = c.Find("template")->string_value();
    const absl::StatusOr<ChatTemplate>& t = templates.at(name);
    if (!t.ok()) continue;
    std::vector<ChatMessage> msgs;
    for (const base::json::JsonValue& m : c.Find("messages")->array_items()) msgs.push_back(MessageFromJson(m));
    ChatTemplateOptions options;
    options.add_generation_prompt = c.Find("add_generation_prompt")->bool_value();
    options.bos_token = "<s>";
    options.eos_token = "</s>";
    options.now = now;
    options.kwargs = c.Find("kwargs")->object_members();
    if (const base::json::JsonValue* tools = c.Find("tools")) options.tools = *tools;
    if (const base::json::JsonValue* docs = c.Find("documents")) options.documents = *docs;
    if (const base::json::JsonValue* cont = c.Find("continue_final_message")) {
      options.continue_final_message = cont->bool_value();
    }
    const bool with_tools = options.tools.has_value() ||
                            std::any_of(msgs.begin(), msgs.end(), [](const ChatMessage& m) {
                              return m.tool_calls.has_value() || m.tool_call_id.has_value();
                            });
    const std::string where = absl::StrCat(
        name, " on ", msgs.size(), " messages (first: ",
        msgs.empty() ? "" : msgs[0].role + " " + base::json::QuoteJsonString(msgs[0].content), ")",
        options.add_generation_prompt ? " +generation prompt" : "", with_tools ? " +tools" : "",
        options.documents ? " +documents" : "", options.continue_final_message ? " +continue" : "",
        options.kwargs.empty() ? "" : " +kwargs");
    const absl::Time start = absl::Now();
    absl::StatusOr<std::string> got = t->Apply(msgs, options);
    render_time += absl::Now() - start;
    ++renders;
    Tally& n = tally[name];
    if (!got.ok() && got.status().code() == absl::StatusCode::kUnimplemented) {
      EXPECT_EQ(RequiredTemplates().count(name), 0u) << where << " must render: " << got.status();
      ++n.refused;
      n.refusal = std::string(got.status().message());
      continue;
    }
    if (c.Find("error") != nullptr) {
      EXPECT_FALSE(got.ok()) << where << ": jinja2 raised " << c.Find("error")->string_value()
                             << " but Rill rendered " << base::json::QuoteJsonString(*got);
      if (got.ok()) continue;
      EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << where;
      if (c.Find("raised")->bool_value()) {
        EXPECT_EQ(got.status().message(), c.Find("error")->string_value()) << where;
      }
      ++n.same_error;
      continue;
    }
    EXPECT_TRUE(got.ok()) << where << ": " << got.status();
    if (!got.ok()) continue;
    EXPECT_EQ(*got, c.Find("output")->string_value()) << where;
    if (*got == c.Find("output")->string_value()) {
      ++n.identical;
      if (with_tools) ++n.identical_with_tools;
      if (options.continue_final_message) ++n.identical_continued;
    }
  }
  // The tool-calling families render tool definitions, an assistant's
  // tool_calls and the tool's results as jinja2 does (every case of a
  // required template was compared above: this checks that they ran).
  for (const char* name : {"meta-llama-Llama-3.1-8B-Instruct.jinja", "Qwen-Qwen2.5-7B-Instruct.jinja",
                           "Qwen-Qwen3-0.6B.jinja", "mistralai-Mistral-Nemo-Instruct-2407.jinja"}) {
    EXPECT_GE(tally[name].identical_with_tools, 10) << name;
    EXPECT_GE(tally[name].identical_continued, 3) << name;
  }
  EXPECT_GT(tally["builtin:kwargs_probe"].identical, 0);

  int identical = 0, errors = 0, refused_templates = 0;
  for (const auto& [name, n] : tally) {
    identical += n.identical;
    errors += n.same_error;
    if (!n.refusal.empty()) ++refused_templates;
    fprintf(stderr, "%-55s %3d identical, %3d same error, %3d refused%s%s%s%s\n", name.c_str(),
            n.identical, n.same_error, n.refused, n.refusal.empty() ? "" : ": ", n.refusal.c_str(),
            n.lacks.empty() ? "" : " (names ", n.lacks.empty() ? "" : (n.lacks + ")").c_str());
  }
  fprintf(stderr, "total: %d identical, %d same error, %d of %zu templates refused (at least in part)\n",
          identical, errors, refused_templates, templates.size());
  fprintf(stderr, "rendering took %.1f us per case on average (%d cases)\n",
          absl::ToDoubleMicroseconds(render_time) / std::max(renders, 1), renders);
  EXPECT_GT(identical, 1500);
  // Qwen3's enable_thinking=false opens an empty think block, as jinja2
  // renders it (the case ran above; here the two renderings are compared).
  const std::string qwen3 = "Qwen-Qwen3-0.6B.jinja";
  ASSERT_TRUE(templates.count(qwen3) && templates.at(qwen3).ok());
  ChatTemplateOptions thinking;
  thinking.kwargs = {{"enable_thinking", Json("true")}};
  ChatTemplateOptions no_thinking;
  no_thinking.kwargs = {{"enable_thinking", Json("false")}};
  EXPECT_EQ(*templates.at(qwen3)->Apply({{"user", "Hello"}}, thinking),
            "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(*templates.at(qwen3)->Apply({{"user", "Hello"}}, no_thinking),
            "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_GT(errors, 0);  // Role checks (raise_exception) were exercised.
}

}  // namespace
}  // namespace rill::tokenizer
