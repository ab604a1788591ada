#include "tokenizer/jinja/template.h"

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace rill::tokenizer::jinja {
namespace {

std::vector<std::pair<std::string, Value>> Globals() {
  auto msg = [](const char* role, const char* content) {
    return Value::Dict({{"role", Value::String(role)}, {"content", Value::String(content)}});
  };
  return {{"ms", Value::List({msg("system", "You are nice"), msg("user", "hi!"), msg("assistant", "yo")})},
          {"y", Value::Int(1)}};
}

absl::StatusOr<std::string> Render(const std::string& source) {
  absl::StatusOr<Template> t = Template::Parse(source);
  if (!t.ok()) return t.status();
  return t->Render(Globals());
}

// Expected outputs are jinja2 3.1's (ImmutableSandboxedEnvironment,
// trim_blocks, lstrip_blocks, loopcontrols, transformers' tojson) for the same
// globals.
TEST(TemplateTest, RendersLikeJinja2) {
  const std::pair<std::string, std::string> cases[] = {
      {"  {% if true %}\n  yes\n  {% endif %}\nend",
       "  yes\nend"},
      {"a  {%- if true -%}  b  {%- endif %}  c\n",
       "ab  c"},
      {"{% for x in [1,2,3] %}\n    {{ x }}\n{% endfor %}",
       "    1\n    2\n    3\n"},
      {"{% set x = 1 %}{% for i in range(3) %}{% set x = x + i %}{{ x }}{% endfor %}|{{ x }}",
       "123|1"},
      {"{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}",
       "6"},
      {"{{ 'héllo wörld'[1:4] }}|{{ 'abc'[::-1] }}|{{ [1,2,3,4][-2:] }}|{{ 'héllo'|length }}",
       "éll|cba|[3, 4]|5"},
      {"{% for m in ms %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }},{% endfor %}",
       "10TrueFalse33,21FalseFalse32,32FalseTrue31,"},
      {"{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('a') }} {{ greet('b', punct='?') }}",
       "Hi a! Hi b?"},
      {"{{ '  x  '|trim }}|{{ 'xxhixx'.strip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a<think>b</think>c'.split('</think>')[-1] }}",
       "x|hi|['a', 'b', '', 'c']|['a', 'b']|c"},
      {"{{ {'a': [1, 2.5, none, true], 'b': 'q\"\\n'}|tojson }}|{{ {'a': 1, 'b': [1, {}]}|tojson(indent=2) }}",
       "{\"a\": [1, 2.5, null, true], \"b\": \"q\\\"\\n\"}|{\n  \"a\": 1,\n  \"b\": [\n    1,\n    {}\n  ]\n}"},
      {"{{ 'x\ny\n\nz'|indent(2) }}|{{ 'x\ny'|indent(4, true) }}",
       "x\n  y\n\n  z|    x\n    y"},
      {"{{ ms|selectattr('role', 'equalto', 'user')|list|length }}|{{ ms|map(attribute='role')|join(',') }}|{{ ms|rejectattr('role', 'eq', 'user')|map(attribute='content')|first }}",
       "1|system,user,assistant|You are nice"},
      {"{{ x is defined }}{{ y is not none }}{{ 'a' in 'cat' }}{{ 3 not in [1,2] }}{{ 1 ~ 2 ~ 'x' }}{{ 'a' if false else 'b' }}{{ 'c' if true }}",
       "FalseTrueTrueTrue12xbc"},
      {"{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}",
       "0134"},
      // |safe makes a Markup, which HTML-escapes a plain str added to it
      // (functionary's templates print tool definitions this way).
      {"{{ \"a'\"|safe + '<b & \"c\">' }}|{{ '<x>' + 'y>'|safe }}|{{ ('p'|safe + '\"') + '\"' }}|"
       "{{ 1|safe + '&' }}|{{ 'q\"' ~ ('r'|safe) }}|{{ [1, 2]|map('string')|list|tojson }}",
       "a'&lt;b &amp; &#34;c&#34;&gt;|&lt;x&gt;y>|p&#34;&#34;|1&amp;|q\"r|[\"1\", \"2\"]"},
      {"{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}{{ {'a': 1}.get('z', 'dflt') }}",
       "a=1;b=2;dflt"},
      {"{{ 1.0 }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1e-5 }} {{ 7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 7 / 2 }} {{ none }} {{ (1, 'a') }} {{ ['a', \"b'c\"] }}",
       "1.0 0.30000000000000004 1e+20 1e-05 3 2 1024 3.5 None (1, 'a') ['a', \"b'c\"]"},
      {"{{ 'Hello World'|lower }}{{ 'hello world'|title }}{{ 'hELLO'|capitalize }}{{ 'abc'|upper }}{{ ['b','A','c']|sort|join }}{{ ['a','A','b']|unique|list }}",
       "hello worldHello WorldHelloABCAbc['a', 'b']"},
      {"{% for m in ms if m.role != 'system' %}{{ m.role }}{% else %}none{% endfor %}{% for m in [] %}x{% else %}empty{% endfor %}",
       "userassistantempty"},
      {"{{ ms[0]['content'].startswith(('x', 'You')) }}{{ ms[1].content.endswith('!') }}{{ 'abcabc'.replace('b', 'X', 1) }}{{ 'abc'.find('c') }}",
       "TrueTrueaXcabc2"},
      {"{% set s %}block {{ 1 + 1 }}{% endset %}[{{ s }}]{# comment #}\n  {#- c2 -#}  x",
       "[block 2]x"},
      {"{%- for m in ms -%}\n  {%- if m.role == 'user' -%}\n    U:{{ m.content }}\n  {%- else -%}\n    {{ m.role|upper }}:{{ m.content }}\n  {%- endif -%}\n{% endfor %}\n",
       "SYSTEM:You are niceU:hi!ASSISTANT:yo"},
      {"{{ undefined_thing }}|{{ ms[9] }}|{{ x|default('d') }}|{{ ''|default('e', true) }}|{{ ms|length > 2 }}",
       "||d|e|True"},
      {"{% if ms[0].role == 'system' %}{% set rest = ms[1:] %}{% else %}{% set rest = ms %}{% endif %}{{ rest|length }}{{ ms|last|attr('role') }}",
       "2"},
      {"{{ '<a{}b{x}{}>'.format(1, 'z', x='q') }}|{{ '{1}{0!r}'.format(1,'y') }}|{{ {'b':1,'A':2}|dictsort }}|{{ '{{}}'.format() }}",
       "<a1bqz>|y1|[('A', 2), ('b', 1)]|{}"},
      {"{{ ['a\u00a0b\u2028 \x7f', \"it's\"] }}", "['a\\xa0b\\u2028 \\x7f', \"it's\"]"},
      {"{% set d = {512: 'b', 0: 'a', 1.5: 'f'} %}{{ d[512] }}{{ d[1.0 - 1] }}|{{ d }}|{% for k, v in d|dictsort %}{{ k }}={{ v }},{% endfor %}|{{ d|tojson }}|{{ 512 in d }}{{ '512' in d }}|{{ d.keys()|list }}|{{ {none: 1} }}",
       "ba|{512: 'b', 0: 'a', 1.5: 'f'}|0=a,1.5=f,512=b,|{\"512\": \"b\", \"0\": \"a\", \"1.5\": \"f\"}|TrueFalse|[512, 0, 1.5]|{None: 1}"},
  };
  for (const auto& [source, want] : cases) {
    absl::StatusOr<std::string> got = Render(source);
    ASSERT_TRUE(got.ok()) << got.status() << "\n" << source;
    EXPECT_EQ(*got, want) << source;
  }
}

TEST(TemplateTest, NamesWhatItDoesNotRender) {
  struct Case {
    std::string source;
    absl::StatusCode code;
    std::string message_part;
  };
  const Case cases[] = {
      {"{{ x|wordwrap(3) }}", absl::StatusCode::kUnimplemented, "filter 'wordwrap'"},
      {"{{ x is escaped }}", absl::StatusCode::kUnimplemented, "test 'escaped'"},
      {"{% include 'a' %}", absl::StatusCode::kUnimplemented, "{% include %}"},
      {"{% raw %}x{% endraw %}", absl::StatusCode::kUnimplemented, "{% raw %}"},
      {"{{ '{:>5}'.format(1) }}", absl::StatusCode::kUnimplemented, "str.format() with format specs"},
      {"{{ 'x %s' % 1 }}", absl::StatusCode::kUnimplemented, "'%' string formatting"},
      {"{{ 'ÉCOLE'|lower }}", absl::StatusCode::kUnimplemented, "lower() of non-ASCII"},
      {"{{ x|nosuchfilter }}", absl::StatusCode::kInvalidArgument, "No filter named 'nosuchfilter'"},
      {"{% if %}", absl::StatusCode::kInvalidArgument, "line 1"},
      {"{{ ms[0].nope.deeper }}", absl::StatusCode::kInvalidArgument, "has no attribute 'nope'"},
      {"{{ ms.append(1) }}", absl::StatusCode::kInvalidArgument, "unsafe"},
      {"{{ 'a' + 1 }}", absl::StatusCode::kInvalidArgument, "can only concatenate str"},
      {"{% for i in range(100001) %}{% endfor %}", absl::StatusCode::kInvalidArgument, "MAX_RANGE"},
      {"{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", absl::StatusCode::kInvalidArgument, "too deep"},
      // map/select give jinja2 generators, which json.dumps refuses.
      {"{{ ms|map(attribute='role')|tojson }}", absl::StatusCode::kInvalidArgument,
       "Object of type generator is not JSON serializable"},
      {"{{ {'a': ms|selectattr('role')}|tojson }}", absl::StatusCode::kInvalidArgument,
       "Object of type generator is not JSON serializable"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::string> got = Render(c.source);
    ASSERT_FALSE(got.ok()) << c.source << " rendered " << *got;
    EXPECT_EQ(got.status().code(), c.code) << c.source << ": " << got.status();
    EXPECT_NE(got.status().message().find(c.message_part), std::string::npos)
        << c.source << ": " << got.status();
  }
}

TEST(TemplateTest, RefusesOnlyWhatRenderingReaches) {
  absl::StatusOr<Template> t = Template::Parse(
      "{% if y == 2 %}{{ ms|wordwrap(5) }}{% elif y == 3 %}{{ ms is escaped }}{% endif %}ok");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->UnsupportedFeatures(), (std::vector<std::string>{"filter 'wordwrap'", "test 'escaped'"}));
  EXPECT_EQ(*t->Render({{"y", Value::Int(1)}}), "ok");
  absl::StatusOr<std::string> out = t->Render({{"y", Value::Int(2)}});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(out.status().message().find("filter 'wordwrap'"), std::string::npos) << out.status();
}

TEST(TemplateTest, RunawayTemplatesStop) {
  absl::StatusOr<std::string> got =
      Render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("step budget"), std::string::npos) << got.status();
}

}  // namespace
}  // namespace rill::tokenizer::jinja
