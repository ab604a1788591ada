#include "tokenizer/jinja/from_json.h"

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include "base/json.h"
#include "tokenizer/jinja/template.h"

namespace rill::tokenizer::jinja {
namespace {

std::string RenderWith(const std::string& source, const std::string& json) {
  absl::StatusOr<base::json::JsonValue> parsed = base::json::ParseJson(json);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  absl::StatusOr<Template> t = Template::Parse(source);
  EXPECT_TRUE(t.ok()) << t.status();
  absl::StatusOr<std::string> out = t->Render({{"x", FromJson(*parsed)}});
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : "";
}

// Expected outputs are what jinja2 prints for json.loads of the same text.
TEST(FromJsonTest, EveryJsonTypeIsThePythonValueJsonLoadsGives) {
  EXPECT_EQ(RenderWith("{{ x }}|{{ x|tojson }}",
                       R"({"b": true, "n": null, "i": 3, "f": 3.0, "e": 1e2, "s": "é\"", "l": [1, [2]], "o": {}})"),
            "{'b': True, 'n': None, 'i': 3, 'f': 3.0, 'e': 100.0, 's': 'é\"', 'l': [1, [2]], 'o': {}}|"
            R"({"b": true, "n": null, "i": 3, "f": 3.0, "e": 100.0, "s": "é\"", "l": [1, [2]], "o": {}})");
  EXPECT_EQ(RenderWith("{{ x.i is integer }}{{ x.f is float }}{{ x.b is boolean }}{{ x.n is none }}"
                       "{{ x.l is sequence }}{{ x.o is mapping }}{{ x.i + 1 }}{{ x.l[1][0] }}",
                       R"({"i": -7, "f": 0.5, "b": false, "n": null, "l": [0, [9]], "o": {"k": 1}})"),
            "TrueTrueTrueTrueTrueTrue-69");
  EXPECT_EQ(RenderWith("{% if x %}yes{% else %}no{% endif %}", "false"), "no");
}

TEST(FromJsonTest, RepeatedKeyKeepsFirstPositionAndLastValue) {
  EXPECT_EQ(RenderWith("{{ x }}", R"({"a": 1, "b": 2, "a": 3})"), "{'a': 3, 'b': 2}");
}

}  // namespace
}  // namespace rill::tokenizer::jinja
