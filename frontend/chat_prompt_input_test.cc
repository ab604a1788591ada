#include "frontend/chat_prompt_input.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include "absl/strings/str_cat.h"
#include "base/json.h"

namespace rill::frontend {
namespace {

rill::v1::ChatPrompt AssistantCalls(const std::string& tool_calls) {
  rill::v1::ChatPrompt chat;
  rill::v1::ChatMessage* m = chat.add_messages();
  m->set_role("assistant");
  m->set_tool_calls(tool_calls);
  return chat;
}

std::string ArgumentsOf(const tokenizer::PromptInput& in) {
  const base::json::JsonValue* args =
      in.messages[0].tool_calls->array_items()[0].Find("function")->Find("arguments");
  return args == nullptr ? "(absent)" : args->is_object() ? std::to_string(args->object_members().size())
                                                          : "(not an object)";
}

// vLLM's rule: arguments reach the template as an object; a JSON string
// holding one is parsed, anything else becomes {}.
TEST(ChatPromptInputTest, ToolCallArgumentsBecomeObjects) {
  auto with_arguments = [](const std::string& arguments) {
    absl::StatusOr<tokenizer::PromptInput> in = ChatPromptInput(AssistantCalls(absl::StrCat(
        R"([{"id": "c", "type": "function", "function": {"name": "f", "arguments": )", arguments, "}}]")));
    EXPECT_TRUE(in.ok()) << in.status();
    return in.ok() ? ArgumentsOf(*in) : "(error)";
  };
  EXPECT_EQ(with_arguments(R"("{\"a\": 1, \"b\": 2}")"), "2");
  EXPECT_EQ(with_arguments(R"({"a": 1})"), "1");
  EXPECT_EQ(with_arguments(R"("not json")"), "0");
  EXPECT_EQ(with_arguments(R"("[1, 2]")"), "0");
  EXPECT_EQ(with_arguments("null"), "0");
  absl::StatusOr<tokenizer::PromptInput> in =
      ChatPromptInput(AssistantCalls(R"([{"function": {"name": "f"}}])"));
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(ArgumentsOf(*in), "0");  // Absent: {}.
}

TEST(ChatPromptInputTest, EmptyToolCallsAreDroppedAndPartsJoined) {
  rill::v1::ChatPrompt chat = AssistantCalls("[]");
  rill::v1::ChatMessage* user = chat.add_messages();
  user->set_role("user");
  for (const char* text : {"a", "b"}) {
    rill::v1::ChatContentPart* part = user->add_content_parts();
    part->set_type("text");
    part->set_text(text);
  }
  absl::StatusOr<tokenizer::PromptInput> in = ChatPromptInput(chat);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_FALSE(in->messages[0].tool_calls.has_value());
  EXPECT_EQ(in->messages[1].content, "a\nb");
  ASSERT_TRUE(in->messages[1].content_parts.has_value());  // For templates that iterate them.
  EXPECT_EQ(*in->messages[1].content_parts, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(in->chat_options.add_generation_prompt);
  chat.set_continue_final_message(true);
  in = ChatPromptInput(chat);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_FALSE(in->chat_options.add_generation_prompt);  // Its default follows continue_final_message.
  user->set_content("c");
  EXPECT_EQ(ChatPromptInput(chat).status().code(), absl::StatusCode::kInvalidArgument);  // Both set.
}

// Python's json hands a template exact big integers; Rill's template values
// stop at int64, so such a request is refused, naming the field, rather than
// rendered with a float.
TEST(ChatPromptInputTest, IntegersPastInt64AreRefused) {
  rill::v1::ChatPrompt chat;
  rill::v1::ChatMessage* user = chat.add_messages();
  user->set_role("user");
  user->set_content("hi");
  chat.set_chat_template_kwargs(R"({"seed": 9223372036854775807, "f": 1e30, "g": -9223372036854775808})");
  EXPECT_TRUE(ChatPromptInput(chat).ok());  // int64's ends and floats are fine
  chat.set_chat_template_kwargs(R"({"deep": [{"n": 9223372036854775808}]})");
  absl::Status s = ChatPromptInput(chat).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("chat.chat_template_kwargs: the integer 9223372036854775808"),
            std::string::npos) << s;
  chat.clear_chat_template_kwargs();
  chat.set_tools(R"([{"type": "function", "function": {"name": "f", "x": -99999999999999999999}}])");
  s = ChatPromptInput(chat).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("chat.tools"), std::string::npos) << s;
}

}  // namespace
}  // namespace rill::frontend
