// A model's chat template through the frontend's Generate stream: what the
// template rejects (its raise_exception) is the request's INVALID_ARGUMENT
// with the template's message, a template Rill cannot render is
// FAILED_PRECONDITION naming what it lacks; neither disturbs the stream.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "frontend/testing/frontend_fixture.h"

namespace rill::frontend::testing {
namespace {

using rill::v1::GenerateRequest;
using rill::v1::GenerateResponse;

// Turn markers in the style of Gemma's template: roles must alternate and
// there is no system role.
constexpr char kAlternatingTemplate[] =
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}"
    "{{ raise_exception('System role not supported') }}{% endif %}"
    "{% for message in messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "{{ '<turn>' + role + '\\n' + message['content'] | trim + '<end>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<turn>model\\n' }}{% endif %}";

GenerateRequest Chat(const std::string& id, const std::vector<std::pair<std::string, std::string>>& msgs) {
  GenerateRequest req;
  auto* s = req.mutable_start();
  s->set_request_id(id);
  for (const auto& [role, content] : msgs) {
    auto* m = s->mutable_chat()->add_messages();
    m->set_role(role);
    m->set_content(content);
  }
  s->mutable_sampling()->set_max_tokens(2);
  return req;
}

class ChatTemplateErrorsTest : public FrontendFixture {
 protected:
  void CustomizeSpec(rill::internal::TokenizerSpec* spec) override {
    spec->set_chat_template(chat_template_);
  }

  // Sends the requests on one stream; responses by request id.
  std::map<std::string, std::vector<GenerateResponse>> Run(const std::vector<GenerateRequest>& reqs) {
    grpc::ClientContext ctx;
    auto stream = stub_->Generate(&ctx);
    std::vector<std::string> ids;
    for (const GenerateRequest& r : reqs) {
      EXPECT_TRUE(stream->Write(r));
      ids.push_back(r.start().request_id());
    }
    stream->WritesDone();
    auto all = ReadAll(stream.get(), ids);
    EXPECT_TRUE(stream->Finish().ok());
    return all;
  }

  std::string chat_template_ = kAlternatingTemplate;
};

TEST_F(ChatTemplateErrorsTest, RaiseExceptionIsInvalidArgumentWithTheTemplatesMessage) {
  auto all = Run({Chat("twice", {{"user", "a"}, {"user", "b"}}),
                  Chat("system", {{"system", "s"}, {"user", "a"}}),
                  Chat("good", {{"user", "  Hi  "}, {"assistant", "Yo"}, {"user", "Bye"}})});
  for (const auto& [id, want] : std::vector<std::pair<std::string, std::string>>{
           {"twice", "Conversation roles must alternate user/assistant/user/assistant/..."},
           {"system", "System role not supported"}}) {
    ASSERT_EQ(all[id].size(), 1u) << id;
    const GenerateResponse& r = all[id][0];
    EXPECT_TRUE(r.finished()) << id;
    EXPECT_EQ(r.status().code(), grpc::StatusCode::INVALID_ARGUMENT) << id;
    EXPECT_NE(r.status().message().find(want), std::string::npos) << id << ": " << r.status().message();
  }
  ASSERT_FALSE(all["good"].empty());
  EXPECT_EQ(all["good"].back().status().code(), 0) << all["good"].back().status().message();
  const std::string bos = tok().bos_id() >= 0 ? tok().bpe().IdToToken(tok().bos_id()) : "";
  EXPECT_EQ(all["good"].front().prompt(),
            bos + "<turn>user\nHi<end>\n<turn>model\nYo<end>\n<turn>user\nBye<end>\n<turn>model\n");
}

class UnrenderableTemplateTest : public ChatTemplateErrorsTest {
 protected:
  UnrenderableTemplateTest() { chat_template_ = "{{ messages[0]['content'] | wordwrap(10) }}"; }
};

TEST_F(UnrenderableTemplateTest, IsFailedPreconditionNamingWhatIsMissing) {
  GenerateRequest text;
  text.mutable_start()->set_request_id("text");
  text.mutable_start()->set_text("plain text still works");
  text.mutable_start()->mutable_sampling()->set_max_tokens(2);
  auto all = Run({Chat("chat", {{"user", "a"}}), text});
  ASSERT_EQ(all["chat"].size(), 1u);
  EXPECT_EQ(all["chat"][0].status().code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(all["chat"][0].status().message().find("filter 'wordwrap'"), std::string::npos)
      << all["chat"][0].status().message();
  ASSERT_FALSE(all["text"].empty());
  EXPECT_EQ(all["text"].back().status().code(), 0) << all["text"].back().status().message();
}

}  // namespace
}  // namespace rill::frontend::testing
