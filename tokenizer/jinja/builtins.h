// What a template can call or look up besides its own variables, with the
// semantics of jinja2's ImmutableSandboxedEnvironment over Python objects:
// filters, tests, attribute and item lookup (str/list/dict methods), and the
// global functions range / namespace / dict. Internal to tokenizer/jinja;
// errors are thrown as RenderError (value.h).
#ifndef RILL_TOKENIZER_JINJA_BUILTINS_H_
#define RILL_TOKENIZER_JINJA_BUILTINS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/jinja/value.h"

namespace rill::tokenizer::jinja {

// Filters and tests this engine implements; KnownTo... says whether jinja2
// has one of that name (so a load error can say "not supported" rather than
// "no such filter").
bool HasFilter(std::string_view name);
bool HasTest(std::string_view name);
bool JinjaHasFilter(std::string_view name);
bool JinjaHasTest(std::string_view name);

Value CallFilter(const std::string& name, const Value& input, const CallArgs& args);
bool CallTest(const std::string& name, const Value& value, const CallArgs& args);

// `obj.name`: a Python attribute (a bound method) first, then the item.
Value GetAttr(const Value& obj, const std::string& name);
// `obj[key]`: the item first, then (for a string key) the attribute.
Value GetItem(const Value& obj, const Value& key);
// obj[start:stop:step] on a list or string (null: omitted).
Value Slice(const Value& obj, const Value* start, const Value* stop, const Value* step);

// Iterating over a value: list items, dict keys, a string's characters;
// Undefined is empty.
std::vector<Value> Iterate(const Value& v);

// range, namespace, dict (and, as errors naming them, cycler/joiner/lipsum).
std::vector<std::pair<std::string, Value>> StandardGlobals();

// Python's len() in code points for strings.
int64_t Length(const Value& v);

// Python's operators: + - * / // % ** and <, <=, >, >=, in.
Value BinaryOp(const std::string& op, const Value& a, const Value& b);
bool Compare(const std::string& op, const Value& a, const Value& b);

// json.dumps(v, ensure_ascii=False, indent=indent, separators=..., sort_keys=...)
// as transformers' tojson filter calls it; indent < 0: none.
std::string ToJson(const Value& v, int indent, bool sort_keys);

// Argument helpers for builtins: argument i or keyword `name` (null when not
// given); calls with more than n arguments fail; typed reads fail with
// Python's TypeError wording.
inline constexpr size_t kKeywordOnly = static_cast<size_t>(-1);
const Value* Arg(const CallArgs& a, size_t i, std::string_view name);
void MaxArgs(const CallArgs& a, size_t n, const std::string& fn);
const std::string& StrArg(const Value* v, const std::string& fn);
std::optional<std::string> OptStrArg(const Value* v, const std::string& fn);
int64_t IntArg(const Value* v, int64_t def, const std::string& fn);

// A value that may not be Undefined here: fails like jinja2's UndefinedError.
void RequireDefined(const Value& v);

}  // namespace rill::tokenizer::jinja

#endif  // RILL_TOKENIZER_JINJA_BUILTINS_H_
