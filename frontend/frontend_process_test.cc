// rill-frontend as a separate process (its real flags) in front of an
// in-process fake engine; the Python reference client runs against it, and
// chat requests with vLLM's chat fields (chat_template_kwargs, tools, tool
// calls and results, continue_final_message, a request chat_template) render
// as jinja2 renders them or fail with the field named.
#include <signal.h>

#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "frontend/testing/fake_engine.h"
#include "tests/util/python_runner.h"
#include "tests/util/subprocess.h"
#include "rill/v1/inference.grpc.pb.h"

namespace rill::frontend::testing {
namespace {

// Starts rill-frontend with its real flags (plus `extra`) in front of
// `engine` and returns its port once it listens.
int StartFrontend(const FakeEngine& engine, const std::string& name,
                  const std::vector<std::string>& extra, rill::tests::util::Subprocess* child) {
  const std::string port_file = absl::StrCat(rill::tests::util::TestTempDir(), "/", name, ".port");
  std::vector<std::string> argv = {rill::tests::util::RunfilePath("frontend/rill-frontend"),
                                   "--host=127.0.0.1", "--port=0", "--port_file=" + port_file,
                                   "--engine=" + engine.address()};
  argv.insert(argv.end(), extra.begin(), extra.end());
  absl::Status started = child->Start(argv);
  EXPECT_TRUE(started.ok()) << started;
  absl::StatusOr<std::string> port =
      rill::tests::util::WaitForFile(port_file, absl::Seconds(60), child);
  EXPECT_TRUE(port.ok()) << port.status();
  int n = 0;
  return port.ok() && absl::SimpleAtoi(absl::StripAsciiWhitespace(*port), &n) ? n : 0;
}

// A fake engine on the default model's tokenizer that streams 40 scripted
// tokens, `token_delay_ms` apart.
void StartScriptedEngine(FakeEngine* engine, int token_delay_ms) {
  ASSERT_TRUE(engine->Start().ok());
  std::vector<int32_t> script;
  for (int i = 0; i < 40; ++i) script.push_back(300 + i);
  engine->set_script(script);
  engine->set_token_delay_ms(token_delay_ms);
}

TEST(FrontendProcessTest, BinaryServesGenerateAndPythonClient) {
  auto spec = DefaultModelSpec();
  if (!spec.ok()) GTEST_SKIP() << spec.status();
  FakeEngine engine(*spec);
  ASSERT_NO_FATAL_FAILURE(StartScriptedEngine(&engine, 5));

  rill::tests::util::Subprocess frontend;
  const int port = StartFrontend(engine, "fe", {"--frontend_id=p1"}, &frontend);
  ASSERT_GT(port, 0);
  const std::string target = absl::StrCat("127.0.0.1:", port);
  auto stub = rill::v1::Inference::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    ctx.set_wait_for_ready(true);
    rill::v1::Load load;
    ASSERT_TRUE(stub->GetLoad(&ctx, {}, &load).ok());
    EXPECT_EQ(load.frontend_id(), "p1");
  }
  {
    grpc::ClientContext ctx;
    auto stream = stub->Generate(&ctx);
    rill::v1::GenerateRequest req;
    req.mutable_start()->set_text("Hello");
    req.mutable_start()->mutable_sampling()->set_max_tokens(5);
    stream->Write(req);
    stream->WritesDone();
    rill::v1::GenerateResponse r;
    bool finished = false;
    while (stream->Read(&r)) finished |= r.finished();
    EXPECT_TRUE(finished);
    EXPECT_TRUE(stream->Finish().ok());
  }
  const absl::StatusOr<std::string> py = rill::tests::util::VenvPython();
  if (py.ok()) {
    std::string cmd = absl::StrCat(*py, " tests/clients/python_client.py --target ", target,
                                   " --proto_dir proto");
    EXPECT_EQ(system(cmd.c_str()), 0) << cmd;
  }
  frontend.SignalGroup(SIGTERM);
  absl::StatusOr<int> code = frontend.Wait(absl::Seconds(30));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << rill::base::DescribeExitCode(*code);
}

// SIGTERM: a short request finishes normally inside the grace period, a long
// one ends with finish_reason ABORT (aborted at the engine), exit status 0.
TEST(FrontendProcessTest, SigtermDrainsThenAborts) {
  auto spec = DefaultModelSpec();
  if (!spec.ok()) GTEST_SKIP() << spec.status();
  FakeEngine engine(*spec);
  ASSERT_NO_FATAL_FAILURE(StartScriptedEngine(&engine, 50));

  rill::tests::util::Subprocess frontend;
  const int port = StartFrontend(engine, "fe_term", {"--shutdown_grace_ms=3000"}, &frontend);
  ASSERT_GT(port, 0);
  auto stub = rill::v1::Inference::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  auto start = [](const std::string& id, int max_tokens) {
    rill::v1::GenerateRequest req;
    req.mutable_start()->set_request_id(id);
    req.mutable_start()->set_text("Hello");
    req.mutable_start()->mutable_sampling()->set_max_tokens(max_tokens);
    return req;
  };
  grpc::ClientContext short_ctx, long_ctx;
  short_ctx.set_wait_for_ready(true);
  long_ctx.set_wait_for_ready(true);
  auto short_stream = stub->Generate(&short_ctx);
  auto long_stream = stub->Generate(&long_ctx);
  short_stream->Write(start("short", 10));  // ~0.5 s at 50 ms a token.
  long_stream->Write(start("long", 100000));
  rill::v1::GenerateResponse r;
  ASSERT_TRUE(short_stream->Read(&r));
  ASSERT_TRUE(long_stream->Read(&r));
  frontend.SignalGroup(SIGTERM);
  rill::v1::GenerateResponse last;
  while (short_stream->Read(&r)) last = r;
  EXPECT_TRUE(last.finished());
  EXPECT_EQ(last.status().code(), 0);
  ASSERT_GT(last.outputs_size(), 0);
  EXPECT_EQ(last.outputs(0).finish_reason(), rill::v1::FINISH_REASON_LENGTH);
  last.Clear();
  while (long_stream->Read(&r)) last = r;
  EXPECT_TRUE(last.finished());
  ASSERT_GT(last.outputs_size(), 0);
  EXPECT_EQ(last.outputs(0).finish_reason(), rill::v1::FINISH_REASON_ABORT);
  EXPECT_TRUE(engine.WaitForAbort("long", absl::Seconds(10)));
  absl::StatusOr<int> code = frontend.Wait(absl::Seconds(30));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << rill::base::DescribeExitCode(*code);
}

// Qwen3's published template, from @chat_templates in the runfiles.
std::string Qwen3Template() {
  for (const char* dir : {"../chat_templates", "external/chat_templates"}) {
    std::ifstream f(absl::StrCat(dir, "/templates/Qwen-Qwen3-0.6B.jinja"));
    if (f) {
      std::stringstream text;
      text << f.rdbuf();
      return text.str();
    }
  }
  return "";
}

rill::v1::ChatMessage* AddMessage(rill::v1::ChatPrompt* chat, const std::string& role,
                                  const std::string& content) {
  rill::v1::ChatMessage* m = chat->add_messages();
  m->set_role(role);
  m->set_content(content);
  return m;
}

// A tool-calling conversation as a vLLM client sends it: content parts, a
// tool definition, an assistant's call whose arguments are a JSON string, the
// tool's result, and enable_thinking=false.
rill::v1::GenerateRequest ToolConversation(const std::string& id) {
  rill::v1::GenerateRequest req;
  req.mutable_start()->set_request_id(id);
  req.mutable_start()->mutable_sampling()->set_max_tokens(2);
  rill::v1::ChatPrompt* chat = req.mutable_start()->mutable_chat();
  rill::v1::ChatMessage* system = AddMessage(chat, "system", "");
  for (const char* text : {"Be", "brief"}) {
    rill::v1::ChatContentPart* part = system->add_content_parts();
    part->set_type("text");
    part->set_text(text);
  }
  AddMessage(chat, "user", "Weather in Paris?")->set_name("ann");
  AddMessage(chat, "assistant", "")->set_tool_calls(
      R"([{"id": "call00001", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}])");
  rill::v1::ChatMessage* result = AddMessage(chat, "tool", "21 C");
  result->set_tool_call_id("call00001");
  result->set_name("get_weather");
  chat->set_tools(
      R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city", )"
      R"("parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
  chat->set_chat_template_kwargs(R"({"enable_thinking": false})");
  return req;
}

// What jinja2 renders for ToolConversation with Qwen3's template (vLLM hands
// the template the call's arguments as an object).
constexpr char kQwen3ToolConversation[] =
    "<|im_start|>system\nBe\nbrief\n\n# Tools\n\nYou may call one or more functions to assist with the user "
    "query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather in a city\", "
    "\"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": "
    "[\"city\"]}}}\n</tools>\n\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nWeather in Paris?<|im_end|>\n"
    "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
    "</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n21 C\n</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n<think>\n\n</think>\n\n";

TEST(FrontendProcessTest, ChatRequestsCarryVllmsChatFields) {
  auto spec = DefaultModelSpec();
  if (!spec.ok()) GTEST_SKIP() << spec.status();
  const std::string qwen3 = Qwen3Template();
  ASSERT_FALSE(qwen3.empty()) << "@chat_templates is missing: run tools/setup.sh";
  spec->set_chat_template(qwen3);
  FakeEngine engine(*spec);
  ASSERT_NO_FATAL_FAILURE(StartScriptedEngine(&engine, 0));
  rill::tests::util::Subprocess frontend;
  const int port =
      StartFrontend(engine, "fe_chat", {"--trust_request_chat_template"}, &frontend);
  ASSERT_GT(port, 0);
  auto stub = rill::v1::Inference::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));

  std::vector<rill::v1::GenerateRequest> reqs;
  reqs.push_back(ToolConversation("tools"));
  {  // The model's template with enable_thinking=true: no empty think block.
    rill::v1::GenerateRequest r = ToolConversation("thinking");
    r.mutable_start()->mutable_chat()->set_chat_template_kwargs(R"({"enable_thinking": true})");
    reqs.push_back(r);
  }
  {  // Continue the assistant's message (add_generation_prompt left unset).
    rill::v1::GenerateRequest r;
    r.mutable_start()->set_request_id("continue");
    r.mutable_start()->mutable_sampling()->set_max_tokens(2);
    AddMessage(r.mutable_start()->mutable_chat(), "user", "Write a haiku");
    AddMessage(r.mutable_start()->mutable_chat(), "assistant", "Autumn moonlight");
    r.mutable_start()->mutable_chat()->set_continue_final_message(true);
    reqs.push_back(r);
  }
  {  // The request's own template, with kwargs of every JSON type.
    rill::v1::GenerateRequest r;
    r.mutable_start()->set_request_id("own");
    r.mutable_start()->mutable_sampling()->set_max_tokens(2);
    rill::v1::ChatPrompt* chat = r.mutable_start()->mutable_chat();
    AddMessage(chat, "user", "hi");
    chat->set_chat_template(
        "{{ messages[0].content }}|{{ n + 1 }}|{{ f }}|{{ flag }}|{{ l|tojson }}|{{ o.k }}|{{ o|tojson }}|"
        "{{ none is none }}|{{ documents|length }}");
    chat->set_chat_template_kwargs(
        R"({"n": 41, "f": 2.5, "flag": false, "l": [1, "x", null], "o": {"k": "v", "a": [0]}, "none": null})");
    chat->set_documents(R"([{"title": "a", "text": "b"}])");
    reqs.push_back(r);
  }
  const std::map<std::string, std::string> want_prompt = {
      {"tools", kQwen3ToolConversation},
      // Without the trailing "<think>\n\n</think>\n\n" (19 bytes).
      {"thinking", std::string(kQwen3ToolConversation, sizeof(kQwen3ToolConversation) - 1 - 19)},
      {"continue",
       "<|im_start|>user\nWrite a haiku<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nAutumn moonlight"},
      {"own", "hi|42|2.5|False|[1, \"x\", null]|v|{\"k\": \"v\", \"a\": [0]}|True|1"},
  };

  // Bad input: the request fails with the field named, the stream goes on.
  struct Bad {
    std::string id;
    grpc::StatusCode code;
    std::string message_part;
    std::function<void(rill::v1::ChatPrompt*)> edit;
  };
  const std::vector<Bad> bad = {
      {"kwargs_not_json", grpc::StatusCode::INVALID_ARGUMENT, "chat.chat_template_kwargs: not JSON",
       [](rill::v1::ChatPrompt* c) { c->set_chat_template_kwargs("{enable_thinking: false}"); }},
      {"kwargs_not_object", grpc::StatusCode::INVALID_ARGUMENT, "chat.chat_template_kwargs: must be a JSON object",
       [](rill::v1::ChatPrompt* c) { c->set_chat_template_kwargs("[false]"); }},
      {"kwargs_reserved", grpc::StatusCode::INVALID_ARGUMENT, "chat_template_kwargs: \"tools\"",
       [](rill::v1::ChatPrompt* c) { c->set_chat_template_kwargs(R"({"tools": []})"); }},
      {"tools_not_json", grpc::StatusCode::INVALID_ARGUMENT, "chat.tools: not JSON",
       [](rill::v1::ChatPrompt* c) { c->set_tools("[{\"type\": "); }},
      {"tools_not_array", grpc::StatusCode::INVALID_ARGUMENT, "chat.tools: must be a JSON array",
       [](rill::v1::ChatPrompt* c) { c->set_tools("{}"); }},
      {"documents_not_array", grpc::StatusCode::INVALID_ARGUMENT, "chat.documents: must be a JSON array",
       [](rill::v1::ChatPrompt* c) { c->set_documents("\"doc\""); }},
      {"call_not_function", grpc::StatusCode::INVALID_ARGUMENT, "chat.messages[2].tool_calls[0]",
       [](rill::v1::ChatPrompt* c) { c->mutable_messages(2)->set_tool_calls("[1]"); }},
      {"call_on_user", grpc::StatusCode::INVALID_ARGUMENT, "chat.messages[1].tool_calls",
       [](rill::v1::ChatPrompt* c) { c->mutable_messages(1)->set_tool_calls("[{}]"); }},
      {"image_part", grpc::StatusCode::INVALID_ARGUMENT, "chat.messages[0].content_parts[0].type",
       [](rill::v1::ChatPrompt* c) { c->mutable_messages(0)->mutable_content_parts(0)->set_type("image_url"); }},
      {"continue_and_generation", grpc::StatusCode::INVALID_ARGUMENT,
       "continue_final_message and add_generation_prompt",
       [](rill::v1::ChatPrompt* c) {
         c->set_continue_final_message(true);
         c->set_add_generation_prompt(true);
       }},
      {"continue_after_tool", grpc::StatusCode::INVALID_ARGUMENT, "continue_final_message: the last message",
       [](rill::v1::ChatPrompt* c) { c->set_continue_final_message(true); }},
      {"template_syntax", grpc::StatusCode::INVALID_ARGUMENT, "chat.chat_template",
       [](rill::v1::ChatPrompt* c) { c->set_chat_template("{% for m in messages %}"); }},
      {"template_raises", grpc::StatusCode::INVALID_ARGUMENT, "no tools here",
       [](rill::v1::ChatPrompt* c) { c->set_chat_template("{{ raise_exception('no tools here') }}"); }},
      {"template_unsupported", grpc::StatusCode::FAILED_PRECONDITION, "filter 'wordwrap'",
       [](rill::v1::ChatPrompt* c) { c->set_chat_template("{{ messages[0].content|wordwrap(3) }}"); }},
  };
  for (const Bad& b : bad) {
    rill::v1::GenerateRequest r = ToolConversation(b.id);
    b.edit(r.mutable_start()->mutable_chat());
    reqs.push_back(r);
  }

  grpc::ClientContext ctx;
  ctx.set_wait_for_ready(true);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto stream = stub->Generate(&ctx);
  for (const rill::v1::GenerateRequest& r : reqs) ASSERT_TRUE(stream->Write(r));
  stream->WritesDone();
  std::map<std::string, std::vector<rill::v1::GenerateResponse>> got;
  rill::v1::GenerateResponse resp;
  size_t finished = 0;
  while (finished < reqs.size() && stream->Read(&resp)) {
    got[resp.request_id()].push_back(resp);
    if (resp.finished()) ++finished;
  }
  EXPECT_TRUE(stream->Finish().ok());
  for (const auto& [id, want] : want_prompt) {
    ASSERT_FALSE(got[id].empty()) << id;
    EXPECT_EQ(got[id].back().status().code(), 0) << id << ": " << got[id].back().status().message();
    EXPECT_EQ(got[id].front().prompt(), want) << id;
  }
  for (const Bad& b : bad) {
    ASSERT_EQ(got[b.id].size(), 1u) << b.id;
    EXPECT_TRUE(got[b.id][0].finished()) << b.id;
    EXPECT_EQ(got[b.id][0].status().code(), b.code) << b.id << ": " << got[b.id][0].status().message();
    EXPECT_NE(got[b.id][0].status().message().find(b.message_part), std::string::npos)
        << b.id << ": " << got[b.id][0].status().message();
  }

  // Tokenize reads a chat the same way (a unary status there).
  grpc::ClientContext tctx;
  rill::v1::TokenizeRequest t;
  *t.mutable_chat() = reqs[0].start().chat();
  t.mutable_chat()->set_tools("{}");
  rill::v1::TokenizeResponse tr;
  grpc::Status s = stub->Tokenize(&tctx, t, &tr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("chat.tools"), std::string::npos) << s.error_message();

  frontend.SignalGroup(SIGTERM);
  absl::StatusOr<int> code = frontend.Wait(absl::Seconds(30));
  ASSERT_TRUE(code.ok()) << code.status();

  // Without --trust_request_chat_template a request's own template is refused
  // (on Generate and Tokenize); the model's template still renders.
  rill::tests::util::Subprocess untrusting;
  const int port2 = StartFrontend(engine, "fe_chat_untrusted", {}, &untrusting);
  ASSERT_GT(port2, 0);
  auto stub2 = rill::v1::Inference::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port2), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx2;
  ctx2.set_wait_for_ready(true);
  ctx2.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto stream2 = stub2->Generate(&ctx2);
  rill::v1::GenerateRequest own = reqs[3];
  ASSERT_EQ(own.start().request_id(), "own");
  ASSERT_TRUE(stream2->Write(own));
  ASSERT_TRUE(stream2->Write(reqs[0]));
  stream2->WritesDone();
  std::map<std::string, std::vector<rill::v1::GenerateResponse>> got2;
  size_t finished2 = 0;
  while (finished2 < 2 && stream2->Read(&resp)) {
    got2[resp.request_id()].push_back(resp);
    if (resp.finished()) ++finished2;
  }
  EXPECT_TRUE(stream2->Finish().ok());
  ASSERT_EQ(got2["own"].size(), 1u);
  EXPECT_EQ(got2["own"][0].status().code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(got2["own"][0].status().message().find("--trust_request_chat_template"),
            std::string::npos)
      << got2["own"][0].status().message();
  ASSERT_FALSE(got2["tools"].empty());
  EXPECT_EQ(got2["tools"].back().status().code(), 0) << got2["tools"].back().status().message();
  EXPECT_EQ(got2["tools"].front().prompt(), kQwen3ToolConversation);
  grpc::ClientContext tctx2;
  rill::v1::TokenizeRequest t2;
  *t2.mutable_chat() = own.start().chat();
  s = stub2->Tokenize(&tctx2, t2, &tr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("chat.chat_template"), std::string::npos) << s.error_message();
  untrusting.SignalGroup(SIGTERM);
  code = untrusting.Wait(absl::Seconds(30));
  ASSERT_TRUE(code.ok()) << code.status();
}

}  // namespace
}  // namespace rill::frontend::testing
