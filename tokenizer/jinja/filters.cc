// jinja2's filters and tests (the ones chat templates use), plus the tojson
// that transformers installs in place of jinja2's own.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/py_str.h"

namespace rill::tokenizer::jinja {
namespace {

constexpr std::string_view kFilters[] = {
    "abs", "attr", "capitalize", "count", "d", "default", "dictsort", "first", "float", "indent", "int",
    "items", "join", "last", "length", "list", "lower", "map", "max", "min", "reject",
    "rejectattr", "replace", "reverse", "safe", "select", "selectattr", "sort", "string",
    "sum", "title", "tojson", "trim", "unique", "upper"};
constexpr std::string_view kJinjaFilters[] = {
    "batch", "center", "e", "escape", "filesizeformat", "forceescape", "format",
    "groupby", "pprint", "random", "round", "slice", "striptags", "truncate", "urlencode",
    "urlize", "wordcount", "wordwrap", "xmlattr"};
constexpr std::string_view kTests[] = {
    "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "even", "false", "float",
    "ge", "greaterthan", "gt", "in", "integer", "iterable", "le", "lessthan", "lower", "lt",
    "mapping", "ne", "none", "number", "odd", "sameas", "sequence", "string", "true",
    "undefined", "upper"};
constexpr std::string_view kJinjaTests[] = {"escaped", "filter", "test", "==", "!=", "<",
                                            "<=", ">", ">="};

template <size_t N>
bool In(const std::string_view (&list)[N], std::string_view name) {
  return std::find(std::begin(list), std::end(list), name) != std::end(list);
}

// jinja2's soft_str: what {{ v }} would print.
std::string SoftStr(const Value& v) { return v.ToString(); }

bool BoolArg(const Value* v, bool def) { return v == nullptr ? def : v->Truthy(); }

// jinja2's make_attrgetter: "a.b.0" looks up a, then b, then item 0.
Value GetPath(const Value& obj, const std::string& path) {
  Value cur = obj;
  size_t from = 0;
  while (true) {
    const size_t dot = path.find('.', from);
    const std::string part = path.substr(from, dot == std::string::npos ? std::string::npos : dot - from);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    cur = GetItem(cur, digits ? Value::Int(std::atoll(part.c_str())) : Value::String(part));
    if (dot == std::string::npos) return cur;
    from = dot + 1;
  }
}

// The value sort/unique/min/max compare: lower-cased strings unless
// case_sensitive.
Value SortKey(const Value& v, const Value* attribute, bool case_sensitive) {
  Value k = attribute ? GetPath(v, StrArg(attribute, "attribute")) : v;
  if (!case_sensitive && k.is_string()) return Value::String(PyLower(k.str()));
  return k;
}

CallArgs Rest(const CallArgs& a, size_t from) {
  CallArgs r;
  for (size_t i = from; i < a.positional.size(); ++i) r.positional.push_back(a.positional[i]);
  r.keyword = a.keyword;
  return r;
}

// select/reject/selectattr/rejectattr.
Value SelectFilter(const Value& in, const CallArgs& a, bool with_attr, bool keep) {
  const std::string attr = with_attr ? StrArg(Arg(a, 0, "attr"), "selectattr") : "";
  const size_t test_at = with_attr ? 1 : 0;
  const Value* test = test_at < a.positional.size() ? &a.positional[test_at] : nullptr;
  const CallArgs test_args = Rest(a, test_at + 1);
  std::vector<Value> out;
  if (!in.Truthy()) return Value::Generator({});  // jinja2 checks `if value:` first.
  for (const Value& item : Iterate(in)) {
    const Value v = with_attr ? GetPath(item, attr) : item;
    const bool ok = test ? CallTest(StrArg(test, "select"), v, test_args) : v.Truthy();
    if (ok == keep) out.push_back(item);
  }
  return Value::Generator(std::move(out));
}

Value MapFilter(const Value& in, const CallArgs& a) {
  std::vector<Value> out;
  if (!in.Truthy()) return Value::Generator({});  // jinja2 checks `if value:` first.
  if (a.positional.empty()) {
    const Value* attr = Arg(a, kKeywordOnly, "attribute");
    if (attr == nullptr) Fail("TypeError: map() needs a filter name or attribute=");
    const Value* def = Arg(a, kKeywordOnly, "default");
    for (const Value& item : Iterate(in)) {
      Value v = GetPath(item, StrArg(attr, "map"));
      out.push_back(v.is_undefined() && def ? *def : v);
    }
  } else {
    const std::string& filter = StrArg(&a.positional[0], "map");
    if (!HasFilter(filter)) Unsupported(absl::StrCat("map() with filter '", filter, "'"));
    const CallArgs rest = Rest(a, 1);
    for (const Value& item : Iterate(in)) out.push_back(CallFilter(filter, item, rest));
  }
  return Value::Generator(std::move(out));
}

// jinja2's do_indent.
std::string Indent(const std::string& s, const Value* width, bool first, bool blank) {
  std::string pad;
  if (width != nullptr && width->is_string()) {
    pad = width->str();
  } else {
    pad = std::string(std::max<int64_t>(0, IntArg(width, 4, "indent")), ' ');
  }
  const std::vector<std::string> lines = PySplitLines(s + "\n");
  std::string out;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) out += (i ? "\n" + pad : "") + lines[i];
  } else {
    out = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) out += "\n" + (lines[i].empty() ? "" : pad) + lines[i];
  }
  return first ? pad + out : out;
}

void JsonString(const std::string& s, std::string* out) {
  out->push_back('"');
  for (const char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          *out += absl::StrFormat("\\u%04x", static_cast<unsigned char>(c));
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

void DumpJson(const Value& v, int indent, int level, bool sort_keys, std::string* out) {
  const std::string nl = indent < 0 ? "" : "\n" + std::string((level + 1) * indent, ' ');
  const std::string close_nl = indent < 0 ? "" : "\n" + std::string(level * indent, ' ');
  const std::string sep = indent < 0 ? ", " : ",";
  switch (v.kind()) {
    case Value::Kind::kNone: *out += "null"; return;
    case Value::Kind::kBool: *out += v.bool_value() ? "true" : "false"; return;
    case Value::Kind::kInt: *out += absl::StrCat(v.int_value()); return;
    case Value::Kind::kFloat: {
      const double f = v.float_value();
      *out += std::isnan(f) ? "NaN" : std::isinf(f) ? (f > 0 ? "Infinity" : "-Infinity") : PythonFloatRepr(f);
      return;
    }
    case Value::Kind::kString: JsonString(v.str(), out); return;
    case Value::Kind::kList: {
      if (v.is_generator()) Fail("TypeError: Object of type generator is not JSON serializable");
      if (v.list().empty()) {
        *out += "[]";
        return;
      }
      *out += "[";
      for (size_t i = 0; i < v.list().size(); ++i) {
        *out += (i ? sep : "") + nl;
        DumpJson(v.list()[i], indent, level + 1, sort_keys, out);
      }
      *out += close_nl + "]";
      return;
    }
    case Value::Kind::kDict: {
      if (v.dict().items.empty()) {
        *out += "{}";
        return;
      }
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& item : v.dict().items) items.push_back(&item);
      if (sort_keys) {
        std::stable_sort(items.begin(), items.end(), [](auto* x, auto* y) { return x->first < y->first; });
      }
      *out += "{";
      for (size_t i = 0; i < items.size(); ++i) {
        *out += (i ? sep : "") + nl;
        const Value key = DictKeyValue(items[i]->first);
        // json.dumps writes None/int/float keys as "null", "512", "1.5".
        JsonString(key.is_string() ? key.str() : ToJson(key, -1, false), out);
        *out += ": ";
        DumpJson(items[i]->second, indent, level + 1, sort_keys, out);
      }
      *out += close_nl + "}";
      return;
    }
    default:
      Fail(absl::StrCat("TypeError: Object of type ", v.TypeName(), " is not JSON serializable"));
  }
}

Value ToInt(const Value& v, const Value* def) {
  const Value fallback = def ? *def : Value::Int(0);
  if (v.kind() == Value::Kind::kInt || v.kind() == Value::Kind::kBool) return Value::Int(v.int_value());
  if (v.kind() == Value::Kind::kFloat) {
    if (!std::isfinite(v.float_value())) return fallback;
    return Value::Int(static_cast<int64_t>(v.float_value()));
  }
  if (!v.is_string()) return fallback;
  const std::string s = PyStrip(v.str(), std::nullopt, true, true);
  char* end = nullptr;
  errno = 0;
  const long long i = std::strtoll(s.c_str(), &end, 10);
  if (!s.empty() && *end == '\0' && errno == 0) return Value::Int(i);
  const double f = std::strtod(s.c_str(), &end);
  if (!s.empty() && *end == '\0' && std::isfinite(f)) return Value::Int(static_cast<int64_t>(f));
  return fallback;
}

Value ToFloat(const Value& v, const Value* def) {
  const Value fallback = def ? *def : Value::Float(0);
  if (v.is_number()) return Value::Float(v.float_value());
  if (!v.is_string()) return fallback;
  const std::string s = PyStrip(v.str(), std::nullopt, true, true);
  char* end = nullptr;
  const double f = std::strtod(s.c_str(), &end);
  if (!s.empty() && *end == '\0') return Value::Float(f);
  return fallback;
}

}  // namespace

bool HasFilter(std::string_view name) { return In(kFilters, name); }
bool HasTest(std::string_view name) { return In(kTests, name); }
bool JinjaHasFilter(std::string_view name) { return HasFilter(name) || In(kJinjaFilters, name); }
bool JinjaHasTest(std::string_view name) { return HasTest(name) || In(kJinjaTests, name); }

std::string ToJson(const Value& v, int indent, bool sort_keys) {
  std::string out;
  DumpJson(v, indent, 0, sort_keys, &out);
  return out;
}

Value CallFilter(const std::string& name, const Value& in, const CallArgs& a) {
  if (name == "default" || name == "d") {
    const Value* def = Arg(a, 0, "default_value");
    const bool use = in.is_undefined() || (BoolArg(Arg(a, 1, "boolean"), false) && !in.Truthy());
    return use ? (def ? *def : Value::String("")) : in;
  }
  if (name == "safe") return Value::Markup(in.ToString());
  if (name == "length" || name == "count") return Value::Int(Length(in));
  if (name == "string") return Value::String(SoftStr(in));
  if (name == "trim") return Value::String(PyStrip(SoftStr(in), OptStrArg(Arg(a, 0, "chars"), "trim"), true, true));
  if (name == "upper") return Value::String(PyUpper(SoftStr(in)));
  if (name == "lower") return Value::String(PyLower(SoftStr(in)));
  if (name == "title") return Value::String(PyTitle(SoftStr(in)));
  if (name == "capitalize") return Value::String(PyCapitalize(SoftStr(in)));
  if (name == "tojson") {
    // transformers' tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
    const Value* ensure_ascii = Arg(a, 0, "ensure_ascii");
    const Value* separators = Arg(a, 2, "separators");
    if ((separators && !separators->is_none()) || (ensure_ascii && ensure_ascii->Truthy())) {
      Unsupported("tojson with separators= or ensure_ascii=True");
    }
    const Value* indent = Arg(a, 1, "indent");
    if (indent && indent->is_string()) Unsupported("tojson with a string indent");
    return Value::String(ToJson(in, indent && !indent->is_none() ? IntArg(indent, 0, "tojson") : -1,
                                BoolArg(Arg(a, 3, "sort_keys"), false)));
  }
  if (name == "join") {
    const Value* sep = Arg(a, 0, "d");
    const Value* attr = Arg(a, 1, "attribute");
    std::string out;
    bool first = true;
    for (const Value& item : Iterate(in)) {
      if (!first) out += sep ? SoftStr(*sep) : "";
      first = false;
      out += SoftStr(attr ? GetPath(item, StrArg(attr, "join")) : item);
    }
    return Value::String(std::move(out));
  }
  if (name == "list") return Value::List(Iterate(in));
  if (name == "first" || name == "last") {
    std::vector<Value> items = Iterate(in);
    if (items.empty()) return Value::Undefined(absl::StrCat("No ", name, " item, sequence was empty."));
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    if (in.is_string()) {
      std::vector<Value> chars = Iterate(in);
      std::string out;
      for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += it->str();
      return Value::String(std::move(out));
    }
    std::vector<Value> items = Iterate(in);
    std::reverse(items.begin(), items.end());
    return Value::List(std::move(items));
  }
  if (name == "items") {
    if (in.is_undefined()) return Value::List({});
    if (in.kind() != Value::Kind::kDict) Fail("TypeError: items() filter needs a mapping");
    return GetAttr(in, "items").func()(CallArgs{});
  }
  if (name == "dictsort") {
    // dictsort(case_sensitive=False, by='key', reverse=False): (key, value) pairs.
    if (in.kind() != Value::Kind::kDict) Fail("FilterArgumentError: dictsort needs a mapping");
    const bool case_sensitive = BoolArg(Arg(a, 0, "case_sensitive"), false);
    const Value* by = Arg(a, 1, "by");
    const bool by_value = by != nullptr && by->is_string() && by->str() == "value";
    if (by != nullptr && !by_value && !(by->is_string() && by->str() == "key")) {
      Fail("FilterArgumentError: You can only sort by either \"key\" or \"value\"");
    }
    const bool reverse = BoolArg(Arg(a, 2, "reverse"), false);
    std::vector<Value> pairs = GetAttr(in, "items").func()(CallArgs{}).list();
    auto key = [&](const Value& p) { return SortKey(p.list()[by_value ? 1 : 0], nullptr, case_sensitive); };
    std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& x, const Value& y) {
      return reverse ? Compare("<", key(y), key(x)) : Compare("<", key(x), key(y));
    });
    return Value::List(std::move(pairs));
  }
  if (name == "replace") {
    return Value::String(PyReplace(SoftStr(in), StrArg(Arg(a, 0, "old"), "replace"),
                                   StrArg(Arg(a, 1, "new"), "replace"), IntArg(Arg(a, 2, "count"), -1, "replace")));
  }
  if (name == "indent") {
    return Value::String(Indent(SoftStr(in), Arg(a, 0, "width"), BoolArg(Arg(a, 1, "first"), false),
                                BoolArg(Arg(a, 2, "blank"), false)));
  }
  if (name == "int") return ToInt(in, Arg(a, 0, "default"));
  if (name == "float") return ToFloat(in, Arg(a, 0, "default"));
  if (name == "abs") {
    if (in.kind() == Value::Kind::kFloat) return Value::Float(std::fabs(in.float_value()));
    if (!in.is_number()) Fail(absl::StrCat("TypeError: bad operand type for abs(): '", in.TypeName(), "'"));
    return Value::Int(std::llabs(in.int_value()));
  }
  if (name == "attr") {
    // getattr() only: unlike `.`, no fallback to a dict's items.
    const std::string& attr = StrArg(Arg(a, 0, "name"), "attr");
    if (in.kind() == Value::Kind::kDict) {
      Value m = GetAttr(Value::Dict(), attr);
      return m.kind() == Value::Kind::kFunction ? GetAttr(in, attr) : Value::Undefined(absl::StrCat("'dict object' has no attribute '", attr, "'"));
    }
    return GetAttr(in, attr);
  }
  if (name == "select" || name == "reject") return SelectFilter(in, a, false, name == "select");
  if (name == "selectattr" || name == "rejectattr") return SelectFilter(in, a, true, name == "selectattr");
  if (name == "map") return MapFilter(in, a);
  if (name == "sort" || name == "unique" || name == "min" || name == "max") {
    const bool case_sensitive = BoolArg(Arg(a, name == "sort" ? 1 : 0, "case_sensitive"), false);
    const Value* attr = Arg(a, name == "sort" ? 2 : 1, "attribute");
    std::vector<Value> items = Iterate(in);
    if (name == "unique") {
      std::vector<Value> out, keys;
      for (const Value& v : items) {
        const Value k = SortKey(v, attr, case_sensitive);
        if (std::none_of(keys.begin(), keys.end(), [&](const Value& x) { return x.Equals(k); })) {
          keys.push_back(k);
          out.push_back(v);
        }
      }
      return Value::List(std::move(out));
    }
    auto less = [&](const Value& x, const Value& y) {
      return Compare("<", SortKey(x, attr, case_sensitive), SortKey(y, attr, case_sensitive));
    };
    if (name == "sort") {
      // Python's sorted(reverse=True) also keeps equal items in their order.
      const bool reverse = BoolArg(Arg(a, 0, "reverse"), false);
      std::stable_sort(items.begin(), items.end(),
                       [&](const Value& x, const Value& y) { return reverse ? less(y, x) : less(x, y); });
      return Value::List(std::move(items));
    }
    if (items.empty()) return Value::Undefined(absl::StrCat("No ", name, " item, sequence was empty."));
    return name == "min" ? *std::min_element(items.begin(), items.end(), less)
                         : *std::max_element(items.begin(), items.end(), less);
  }
  if (name == "sum") {
    const Value* attr = Arg(a, 0, "attribute");
    Value total = Arg(a, 1, "start") ? *Arg(a, 1, "start") : Value::Int(0);
    for (const Value& v : Iterate(in)) total = BinaryOp("+", total, attr ? GetPath(v, StrArg(attr, "sum")) : v);
    return total;
  }
  if (JinjaHasFilter(name)) Unsupported(absl::StrCat("filter '", name, "'"));
  Fail(absl::StrCat("TemplateRuntimeError: No filter named '", name, "' found."));
}

bool CallTest(const std::string& name, const Value& v, const CallArgs& a) {
  const Value* arg = Arg(a, 0, "other");
  auto need_arg = [&]() -> const Value& {
    if (arg == nullptr) Fail(absl::StrCat("TypeError: test '", name, "' needs an argument"));
    return *arg;
  };
  const Value::Kind k = v.kind();
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return k == Value::Kind::kInt;
  if (name == "float") return k == Value::Kind::kFloat;
  if (name == "boolean") return k == Value::Kind::kBool;
  if (name == "true") return k == Value::Kind::kBool && v.bool_value();
  if (name == "false") return k == Value::Kind::kBool && !v.bool_value();
  if (name == "mapping") return k == Value::Kind::kDict;
  if (name == "iterable") return v.is_undefined() || v.is_string() || v.is_list() || k == Value::Kind::kDict;
  if (name == "sequence") return v.is_undefined() || v.is_string() || v.is_list() || k == Value::Kind::kDict;
  if (name == "callable") return k == Value::Kind::kFunction;
  if (name == "even" || name == "odd") {
    const Value r = BinaryOp("%", v, Value::Int(2));
    return (r.float_value() == 0) == (name == "even");
  }
  if (name == "divisibleby") return BinaryOp("%", v, need_arg()).float_value() == 0;
  if (name == "eq" || name == "equalto") return v.Equals(need_arg());
  if (name == "ne") return !v.Equals(need_arg());
  if (name == "lt" || name == "lessthan") return Compare("<", v, need_arg());
  if (name == "le") return Compare("<=", v, need_arg());
  if (name == "gt" || name == "greaterthan") return Compare(">", v, need_arg());
  if (name == "ge") return Compare(">=", v, need_arg());
  if (name == "in") return Compare("in", v, need_arg());
  if (name == "sameas") {
    const Value& o = need_arg();
    if (v.is_list() || v.is_dict() || k == Value::Kind::kFunction) {
      return o.kind() == k && (v.is_list() ? &v.list() == &o.list()
                               : v.is_dict() ? &v.dict() == &o.dict()
                                             : &v.func() == &o.func());
    }
    return o.kind() == k && v.Equals(o);
  }
  if (name == "lower" || name == "upper") {
    const std::string s = SoftStr(v);
    const bool has_cased = std::any_of(s.begin(), s.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)); });
    return has_cased && (name == "lower" ? PyLower(s) : PyUpper(s)) == s;
  }
  if (JinjaHasTest(name)) Unsupported(absl::StrCat("test '", name, "'"));
  Fail(absl::StrCat("TemplateRuntimeError: No test named '", name, "'."));
}

}  // namespace rill::tokenizer::jinja
