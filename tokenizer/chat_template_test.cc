#include "tokenizer/chat_template.h"

#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include "base/json.h"
#include "tokenizer/test_util.h"

namespace rill::tokenizer {
namespace {

TEST(ChatTemplateTest, RejectsUnknownTemplates) {
  EXPECT_EQ(ChatTemplate::Create("{{ messages[0]['content'] | upper }}")
                .status()
                .code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(ChatTemplate::Create("").status().code(),
            absl::StatusCode::kUnimplemented);
}

// Renders random conversations and compares with Python jinja2 output.
TEST(ChatTemplateTest, MatchesJinja2) {
  const char* tmp = getenv("TEST_TMPDIR");
  const std::string out = std::string(tmp ? tmp : "/tmp") + "/templates.json";
  std::string args = out;
  if (!testing::DefaultModelPath().empty()) {
    args += " --gguf " + testing::DefaultModelPath();
  }
  ASSERT_EQ(testing::RunPython("tokenizer/testdata/render_templates.py",
                               args),
            0);
  absl::StatusOr<base::json::JsonValue> cases = base::json::ParseJsonFile(out);
  ASSERT_TRUE(cases.ok()) << cases.status();
  ASSERT_GE(cases->array_items().size(), 200u);
  int errors = 0;
  for (const base::json::JsonValue& c : cases->array_items()) {
    const std::string& text = c.Find("template")->string_value();
    absl::StatusOr<ChatTemplate> t = ChatTemplate::Create(text);
    ASSERT_TRUE(t.ok()) << t.status() << "\n" << text;
    std::vector<ChatMessage> msgs;
    for (const base::json::JsonValue& m : c.Find("messages")->array_items()) {
      msgs.push_back({m.Find("role")->string_value(), m.Find("content")->string_value()});
    }
    absl::StatusOr<std::string> got =
        t->Apply(msgs, c.Find("add_generation_prompt")->bool_value(), "<s>", "</s>");
    if (c.Find("error") != nullptr) {
      ++errors;
      EXPECT_FALSE(got.ok());
    } else {
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(*got, c.Find("output")->string_value());
    }
  }
  EXPECT_GT(errors, 0);  // The Llama-2 role check was exercised.
}

}  // namespace
}  // namespace rill::tokenizer
