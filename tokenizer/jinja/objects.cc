// Lookup, iteration, operators and methods of the Python objects a template
// sees (the builtins.h functions that are not filters or tests).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/py_str.h"

namespace rill::tokenizer::jinja {

const Value* Arg(const CallArgs& a, size_t i, std::string_view name) {
  if (i < a.positional.size()) return &a.positional[i];
  for (const auto& [k, v] : a.keyword) {
    if (k == name) return &v;
  }
  return nullptr;
}

void MaxArgs(const CallArgs& a, size_t n, const std::string& fn) {
  if (a.positional.size() + a.keyword.size() > n) {
    Fail(absl::StrCat("TypeError: ", fn, "() takes at most ", n, " arguments"));
  }
}

const std::string& StrArg(const Value* v, const std::string& fn) {
  if (v == nullptr || !v->is_string()) {
    Fail(absl::StrCat("TypeError: ", fn, "() argument must be str, not ",
                      v == nullptr ? "nothing" : v->TypeName()));
  }
  return v->str();
}

std::optional<std::string> OptStrArg(const Value* v, const std::string& fn) {
  if (v == nullptr || v->is_none()) return std::nullopt;
  return StrArg(v, fn);
}

int64_t IntArg(const Value* v, int64_t def, const std::string& fn) {
  if (v == nullptr || v->is_none()) return def;
  if (v->kind() != Value::Kind::kInt && v->kind() != Value::Kind::kBool) {
    Fail(absl::StrCat("TypeError: ", fn, "() expects an integer, not ", v->TypeName()));
  }
  return v->int_value();
}

namespace {

// markupsafe.escape, which Markup applies to a plain str joined to it.
std::string HtmlEscape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

Value StrList(std::vector<std::string> parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (std::string& p : parts) items.push_back(Value::String(std::move(p)));
  return Value::List(std::move(items));
}

bool AffixMatch(const std::string& s, const Value* arg, bool prefix, const std::string& fn) {
  if (arg != nullptr && arg->is_list() && arg->is_tuple()) {
    for (const Value& v : arg->list()) {
      if (AffixMatch(s, &v, prefix, fn)) return true;
    }
    return false;
  }
  const std::string& a = StrArg(arg, fn);
  if (a.size() > s.size()) return false;
  return prefix ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0;
}

Value Method(const std::string& owner, const std::string& name, Function f) {
  return Value::Func(absl::StrCat(owner, ".", name), std::move(f));
}

[[noreturn]] void Unsafe(const std::string& name, const Value& obj) {
  Fail(absl::StrCat("SecurityError: access to attribute '", name, "' of '", obj.TypeName(),
                    "' object is unsafe."));
}

// str.format with plain fields: {}, {0}, {name}, optionally !s / !r.
// Format specs and attribute/index lookups inside a field are refused.
std::string PyFormat(const std::string& fmt, const CallArgs& a) {
  std::string out;
  size_t auto_index = 0;
  bool numbered_auto = false, numbered_manual = false;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') ++i;
      else Fail("ValueError: Single '}' encountered in format string");
      out.push_back('}');
      continue;
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    const size_t close = fmt.find('}', i);
    if (close == std::string::npos) Fail("ValueError: Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close;
    char conversion = 's';
    if (field.size() >= 2 && field[field.size() - 2] == '!') {
      conversion = field.back();
      field.resize(field.size() - 2);
    }
    if (field.find_first_of(":.[{") != std::string::npos || (conversion != 's' && conversion != 'r')) {
      Unsupported("str.format() with format specs, conversions other than !s/!r or field lookups");
    }
    const Value* v = nullptr;
    if (field.empty() || std::all_of(field.begin(), field.end(), ::isdigit)) {
      (field.empty() ? numbered_auto : numbered_manual) = true;
      if (numbered_auto && numbered_manual) {
        Fail("ValueError: cannot switch from manual field specification to automatic field numbering");
      }
      const size_t idx = field.empty() ? auto_index++ : std::stoul(field);
      if (idx >= a.positional.size()) Fail("IndexError: Replacement index out of range for positional args tuple");
      v = &a.positional[idx];
    } else {
      v = Arg(a, kKeywordOnly, field);
      if (v == nullptr) Fail(absl::StrCat("KeyError: '", field, "'"));
    }
    out += conversion == 'r' ? v->Repr() : v->ToString();
  }
  return out;
}

Value StrMethod(const Value& obj, const std::string& name) {
  const std::string s = obj.str();
  const std::string fn = "str." + name;
  auto m = [&](Function f) { return Method("str", name, std::move(f)); };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool l = name != "rstrip", r = name != "lstrip";
    return m([=](const CallArgs& a) {
      MaxArgs(a, 1, fn);
      return Value::String(PyStrip(s, OptStrArg(Arg(a, 0, "chars"), fn), l, r));
    });
  }
  if (name == "split" || name == "rsplit") {
    const bool rev = name == "rsplit";
    return m([=](const CallArgs& a) {
      MaxArgs(a, 2, fn);
      const std::optional<std::string> sep = OptStrArg(Arg(a, 0, "sep"), fn);
      const int64_t max = IntArg(Arg(a, 1, "maxsplit"), -1, fn);
      return StrList(rev ? PyRSplit(s, sep, max) : PySplit(s, sep, max));
    });
  }
  if (name == "startswith" || name == "endswith") {
    const bool prefix = name == "startswith";
    return m([=](const CallArgs& a) {
      if (a.positional.size() + a.keyword.size() != 1) {
        Unsupported(absl::StrCat(fn, "() with start/end arguments"));
      }
      return Value::Bool(AffixMatch(s, Arg(a, 0, "prefix"), prefix, fn));
    });
  }
  if (name == "replace") {
    return m([=](const CallArgs& a) {
      MaxArgs(a, 3, fn);
      return Value::String(PyReplace(s, StrArg(Arg(a, 0, "old"), fn), StrArg(Arg(a, 1, "new"), fn),
                                     IntArg(Arg(a, 2, "count"), -1, fn)));
    });
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    return m([=](const CallArgs& a) {
      MaxArgs(a, 0, fn);
      return Value::String(name == "upper"   ? PyUpper(s)
                           : name == "lower" ? PyLower(s)
                           : name == "title" ? PyTitle(s)
                                             : PyCapitalize(s));
    });
  }
  if (name == "find" || name == "rfind" || name == "count") {
    return m([=](const CallArgs& a) {
      if (a.positional.size() + a.keyword.size() != 1) {
        Unsupported(absl::StrCat(fn, "() with start/end arguments"));
      }
      const std::string& sub = StrArg(Arg(a, 0, "sub"), fn);
      if (name != "count") return Value::Int(PyFind(s, sub, name == "rfind"));
      if (sub.empty()) return Value::Int(CodePointCount(s) + 1);
      int64_t n = 0;
      for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
      return Value::Int(n);
    });
  }
  if (name == "removeprefix" || name == "removesuffix") {
    const bool prefix = name == "removeprefix";
    return m([=](const CallArgs& a) {
      MaxArgs(a, 1, fn);
      const Value* arg = Arg(a, 0, "affix");
      if (!AffixMatch(s, arg, prefix, fn)) return Value::String(s);
      const size_t n = arg->str().size();
      return Value::String(prefix ? s.substr(n) : s.substr(0, s.size() - n));
    });
  }
  if (name == "splitlines") {
    return m([=](const CallArgs& a) {
      MaxArgs(a, 0, fn);
      return StrList(PySplitLines(s));
    });
  }
  if (name == "isspace") {
    return m([=](const CallArgs& a) {
      MaxArgs(a, 0, fn);
      return Value::Bool(!s.empty() && PyStrip(s, std::nullopt, true, false).empty());
    });
  }
  if (name == "join") {
    return m([=](const CallArgs& a) {
      MaxArgs(a, 1, fn);
      const Value* seq = Arg(a, 0, "iterable");
      if (seq == nullptr) Fail("TypeError: str.join() takes exactly one argument");
      std::string out;
      bool first = true;
      for (const Value& v : Iterate(*seq)) {
        if (!first) out += s;
        first = false;
        out += StrArg(&v, fn);
      }
      return Value::String(std::move(out));
    });
  }
  if (name == "format") {
    return m([=](const CallArgs& a) { return Value::String(PyFormat(s, a)); });
  }
  static const auto* python_methods = new std::vector<std::string>{
      "casefold", "center", "encode", "expandtabs", "format_map", "index",
      "isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "isidentifier", "islower",
      "isnumeric", "isprintable", "istitle", "isupper", "ljust", "partition", "rindex",
      "rjust", "rpartition", "swapcase", "translate", "zfill"};
  if (std::find(python_methods->begin(), python_methods->end(), name) != python_methods->end()) {
    Unsupported(absl::StrCat("str.", name, "()"));
  }
  return Value::Undefined(absl::StrCat("'str object' has no attribute '", name, "'"));
}

Value DictMethod(const Value& obj, const std::string& name) {
  const Value d = obj;
  if (name == "items" || name == "keys" || name == "values") {
    return Method("dict", name, [d, name](const CallArgs& a) {
      MaxArgs(a, 0, "dict." + name);
      std::vector<Value> out;
      for (const auto& [k, v] : d.dict().items) {
        if (name == "items") {
          out.push_back(Value::List({DictKeyValue(k), v}, /*tuple=*/true));
        } else {
          out.push_back(name == "keys" ? DictKeyValue(k) : v);
        }
      }
      return Value::List(std::move(out));
    });
  }
  if (name == "get") {
    return Method("dict", name, [d](const CallArgs& a) {
      MaxArgs(a, 2, "dict.get");
      const Value* key = Arg(a, 0, "key");
      const Value* def = Arg(a, 1, "default");
      if (key == nullptr) Fail("TypeError: get expected at least 1 argument");
      if (key->kind() != Value::Kind::kList && key->kind() != Value::Kind::kDict) {
        if (const Value* v = d.dict().Find(DictKey(*key))) return *v;
      }
      return def != nullptr ? *def : Value::None();
    });
  }
  if (name == "pop" || name == "popitem" || name == "setdefault" || name == "update" ||
      name == "clear") {
    Unsafe(name, obj);
  }
  if (name == "copy" || name == "fromkeys") Unsupported(absl::StrCat("dict.", name, "()"));
  return Value();
}

Value ListMethod(const Value& obj, const std::string& name) {
  const Value l = obj;
  if (name == "index" || name == "count") {
    return Method("list", name, [l, name](const CallArgs& a) {
      if (a.positional.size() != 1 || !a.keyword.empty()) {
        Unsupported(absl::StrCat("list.", name, "() with other than one argument"));
      }
      int64_t n = 0;
      for (size_t i = 0; i < l.list().size(); ++i) {
        if (!l.list()[i].Equals(a.positional[0])) continue;
        if (name == "index") return Value::Int(static_cast<int64_t>(i));
        ++n;
      }
      if (name == "index") Fail("ValueError: list.index(x): x not in list");
      return Value::Int(n);
    });
  }
  if (name == "append" || name == "extend" || name == "insert" || name == "pop" ||
      name == "remove" || name == "reverse" || name == "sort" || name == "clear") {
    Unsafe(name, obj);
  }
  if (name == "copy") Unsupported("list.copy()");
  return Value::Undefined(absl::StrCat("'list object' has no attribute '", name, "'"));
}

// Python's index adjustment for obj[i]: -1 when out of range.
int64_t NormalizeIndex(int64_t i, int64_t n) {
  if (i < 0) i += n;
  return i < 0 || i >= n ? -1 : i;
}

}  // namespace

void RequireDefined(const Value& v) {
  if (!v.is_undefined()) return;
  Fail(absl::StrCat("UndefinedError: ", v.str().empty() ? "a value is undefined" : v.str()));
}

Value GetAttr(const Value& obj, const std::string& name) {
  RequireDefined(obj);
  if (obj.is_string()) return StrMethod(obj, name);
  if (obj.is_list()) return ListMethod(obj, name);
  if (obj.kind() == Value::Kind::kDict) {
    Value m = DictMethod(obj, name);
    if (!m.is_undefined()) return m;
  }
  if (obj.is_dict()) {
    if (const Value* v = obj.dict().Find(name)) return *v;
  }
  return Value::Undefined(absl::StrCat("'", obj.TypeName(), " object' has no attribute '", name, "'"));
}

Value GetItem(const Value& obj, const Value& key) {
  RequireDefined(obj);
  const bool int_key = key.kind() == Value::Kind::kInt || key.kind() == Value::Kind::kBool;
  if (obj.is_list() && int_key) {
    const int64_t i = NormalizeIndex(key.int_value(), static_cast<int64_t>(obj.list().size()));
    if (i >= 0) return obj.list()[i];
  } else if (obj.is_string() && int_key) {
    const std::vector<size_t> off = CodePointOffsets(obj.str());
    const int64_t i = NormalizeIndex(key.int_value(), static_cast<int64_t>(off.size()) - 1);
    if (i >= 0) return Value::String(obj.str().substr(off[i], off[i + 1] - off[i]));
  } else if (obj.kind() == Value::Kind::kDict && !key.is_undefined() && !key.is_list() && !key.is_dict()) {
    if (const Value* v = obj.dict().Find(DictKey(key))) return *v;
  }
  if (key.is_string()) return GetAttr(obj, key.str());
  return Value::Undefined(absl::StrCat("'", obj.TypeName(), " object' has no element ", key.Repr()));
}

Value Slice(const Value& obj, const Value* start, const Value* stop, const Value* step) {
  RequireDefined(obj);
  if (!obj.is_list() && !obj.is_string()) {
    Fail(absl::StrCat("TypeError: '", obj.TypeName(), "' object is not subscriptable"));
  }
  std::vector<size_t> off;
  int64_t n;
  if (obj.is_string()) {
    off = CodePointOffsets(obj.str());
    n = static_cast<int64_t>(off.size()) - 1;
  } else {
    n = static_cast<int64_t>(obj.list().size());
  }
  auto get = [](const Value* v, int64_t def) {
    if (v == nullptr || v->is_none()) return def;
    if (v->kind() != Value::Kind::kInt && v->kind() != Value::Kind::kBool) {
      Fail("TypeError: slice indices must be integers or None");
    }
    return v->int_value();
  };
  const int64_t st = get(step, 1);
  if (st == 0) Fail("ValueError: slice step cannot be zero");
  // CPython's PySlice_AdjustIndices.
  auto adjust = [&](const Value* v, int64_t def) {
    if (v == nullptr || v->is_none()) return def;
    int64_t i = get(v, 0);
    if (i < 0) {
      i += n;
      if (i < 0) i = st < 0 ? -1 : 0;
    } else if (i >= n) {
      i = st < 0 ? n - 1 : n;
    }
    return i;
  };
  const int64_t b = adjust(start, st < 0 ? n - 1 : 0);
  const int64_t e = adjust(stop, st < 0 ? -1 : n);
  std::vector<int64_t> idx;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) idx.push_back(i);
  if (obj.is_string()) {
    std::string out;
    for (int64_t i : idx) out.append(obj.str(), off[i], off[i + 1] - off[i]);
    return Value::String(std::move(out));
  }
  std::vector<Value> out;
  for (int64_t i : idx) out.push_back(obj.list()[i]);
  return Value::List(std::move(out), obj.is_tuple());
}

std::vector<Value> Iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return {};
    case Value::Kind::kList: return v.list();
    case Value::Kind::kDict: {
      std::vector<Value> keys;
      for (const auto& item : v.dict().items) keys.push_back(DictKeyValue(item.first));
      return keys;
    }
    case Value::Kind::kString: {
      const std::vector<size_t> off = CodePointOffsets(v.str());
      std::vector<Value> chars;
      for (size_t i = 0; i + 1 < off.size(); ++i) {
        chars.push_back(Value::String(v.str().substr(off[i], off[i + 1] - off[i])));
      }
      return chars;
    }
    default: Fail(absl::StrCat("TypeError: '", v.TypeName(), "' object is not iterable"));
  }
}

int64_t Length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return 0;
    case Value::Kind::kString: return CodePointCount(v.str());
    case Value::Kind::kList: return static_cast<int64_t>(v.list().size());
    case Value::Kind::kDict: return static_cast<int64_t>(v.dict().items.size());
    default: Fail(absl::StrCat("TypeError: object of type '", v.TypeName(), "' has no len()"));
  }
}

Value BinaryOp(const std::string& op, const Value& a, const Value& b) {
  RequireDefined(a);
  RequireDefined(b);
  const bool ints = (a.kind() == Value::Kind::kInt || a.kind() == Value::Kind::kBool) &&
                    (b.kind() == Value::Kind::kInt || b.kind() == Value::Kind::kBool);
  const bool nums = a.is_number() && b.is_number();
  auto type_error = [&]() {
    Fail(absl::StrCat("TypeError: unsupported operand type(s) for ", op, ": '", a.TypeName(),
                      "' and '", b.TypeName(), "'"));
  };
  // Arguments are evaluated in an unspecified order: the overflow check
  // (which writes r) runs before r is read.
  int64_t r = 0;
  auto checked = [&r](bool overflow) {
    if (overflow) Unsupported("integer arithmetic beyond 64 bits");
    return Value::Int(r);
  };
  if (op == "+") {
    if (ints) return checked(__builtin_add_overflow(a.int_value(), b.int_value(), &r));
    if (nums) return Value::Float(a.float_value() + b.float_value());
    if (a.is_markup() || b.is_markup()) {
      if (a.is_string() && b.is_string()) {
        // Markup.__add__ / __radd__: the plain side is escaped.
        return Value::Markup((a.is_markup() ? a.str() : HtmlEscape(a.str())) +
                             (b.is_markup() ? b.str() : HtmlEscape(b.str())));
      }
    }
    if (a.is_string() && b.is_string()) return Value::String(a.str() + b.str());
    if (a.is_list() && b.is_list()) {
      std::vector<Value> out = a.list();
      out.insert(out.end(), b.list().begin(), b.list().end());
      return Value::List(std::move(out), a.is_tuple());
    }
    if (a.is_string() || b.is_string()) {
      Fail(absl::StrCat("TypeError: can only concatenate str (not \"",
                        (a.is_string() ? b : a).TypeName(), "\") to str"));
    }
    type_error();
  }
  if (op == "-") {
    if (ints) return checked(__builtin_sub_overflow(a.int_value(), b.int_value(), &r));
    if (nums) return Value::Float(a.float_value() - b.float_value());
    type_error();
  }
  if (op == "*") {
    if (ints) return checked(__builtin_mul_overflow(a.int_value(), b.int_value(), &r));
    if (nums) return Value::Float(a.float_value() * b.float_value());
    const Value& seq = a.is_number() ? b : a;
    const Value& count = a.is_number() ? a : b;
    if ((seq.is_string() || seq.is_list()) &&
        (count.kind() == Value::Kind::kInt || count.kind() == Value::Kind::kBool)) {
      const int64_t times = count.int_value();
      if (times > 0 && Length(seq) * times > (1 << 24)) Unsupported("a repetition this long");
      if (seq.is_string()) {
        std::string out;
        for (int64_t i = 0; i < times; ++i) out += seq.str();
        return Value::String(std::move(out));
      }
      std::vector<Value> out;
      for (int64_t i = 0; i < times; ++i) out.insert(out.end(), seq.list().begin(), seq.list().end());
      return Value::List(std::move(out), seq.is_tuple());
    }
    type_error();
  }
  if (op == "%" && a.is_string()) Unsupported("printf-style '%' string formatting");
  if (!nums) type_error();
  if ((op == "/" || op == "//" || op == "%") && b.float_value() == 0) {
    Fail("ZeroDivisionError: division by zero");
  }
  if (op == "/") return Value::Float(a.float_value() / b.float_value());
  if (op == "//") {
    if (ints) {
      const int64_t x = a.int_value(), y = b.int_value();
      int64_t q = x / y;
      if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
      return Value::Int(q);
    }
    return Value::Float(std::floor(a.float_value() / b.float_value()));
  }
  if (op == "%") {
    if (ints) {
      const int64_t y = b.int_value();
      int64_t m = a.int_value() % y;
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value::Int(m);
    }
    const double y = b.float_value();
    double m = std::fmod(a.float_value(), y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    return Value::Float(m);
  }
  if (op == "**") {
    if (ints && b.int_value() >= 0) {
      int64_t acc = 1;
      for (int64_t i = 0; i < b.int_value(); ++i) {
        if (__builtin_mul_overflow(acc, a.int_value(), &acc)) Unsupported("integer arithmetic beyond 64 bits");
      }
      return Value::Int(acc);
    }
    return Value::Float(std::pow(a.float_value(), b.float_value()));
  }
  Fail(absl::StrCat("unknown operator ", op));
}

bool Compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return a.Equals(b);
  if (op == "!=") return !a.Equals(b);
  if (op == "in" || op == "not in") {
    bool found = false;
    if (b.is_string()) {
      if (!a.is_string()) {
        RequireDefined(a);
        Fail(absl::StrCat("TypeError: 'in <string>' requires string as left operand, not ", a.TypeName()));
      }
      found = b.str().find(a.str()) != std::string::npos;
    } else if (b.is_list()) {
      for (const Value& v : b.list()) found = found || v.Equals(a);
    } else if (b.kind() == Value::Kind::kDict) {
      found = !a.is_undefined() && !a.is_list() && !a.is_dict() && a.kind() != Value::Kind::kFunction &&
              b.dict().Find(DictKey(a)) != nullptr;
    } else if (!b.is_undefined()) {
      Fail(absl::StrCat("TypeError: argument of type '", b.TypeName(), "' is not iterable"));
    }
    return op == "in" ? found : !found;
  }
  RequireDefined(a);
  RequireDefined(b);
  int c = 0;
  if (a.is_number() && b.is_number()) {
    c = a.float_value() < b.float_value() ? -1 : a.float_value() > b.float_value() ? 1 : 0;
    if (a.kind() != Value::Kind::kFloat && b.kind() != Value::Kind::kFloat) {
      c = a.int_value() < b.int_value() ? -1 : a.int_value() > b.int_value() ? 1 : 0;
    }
  } else if (a.is_string() && b.is_string()) {
    c = a.str().compare(b.str());  // UTF-8 byte order is code point order.
  } else if (a.is_list() && b.is_list()) {
    const auto& x = a.list();
    const auto& y = b.list();
    size_t i = 0;
    while (i < x.size() && i < y.size() && x[i].Equals(y[i])) ++i;
    if (i < x.size() && i < y.size()) {
      c = Compare("<", x[i], y[i]) ? -1 : 1;
    } else {
      c = x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
    }
  } else {
    Fail(absl::StrCat("TypeError: '", op, "' not supported between instances of '", a.TypeName(),
                      "' and '", b.TypeName(), "'"));
  }
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  return c >= 0;
}

std::vector<std::pair<std::string, Value>> StandardGlobals() {
  std::vector<std::pair<std::string, Value>> g;
  g.emplace_back("range", Value::Func("range", [](const CallArgs& a) {
    if (a.positional.empty() || a.positional.size() > 3 || !a.keyword.empty()) {
      Fail("TypeError: range expected 1 to 3 integer arguments");
    }
    int64_t v[3] = {0, 0, 1};
    for (size_t i = 0; i < a.positional.size(); ++i) {
      v[a.positional.size() == 1 ? 1 : i] = IntArg(&a.positional[i], 0, "range");
    }
    if (v[2] == 0) Fail("ValueError: range() arg 3 must not be zero");
    std::vector<Value> out;
    for (int64_t i = v[0]; v[2] > 0 ? i < v[1] : i > v[1]; i += v[2]) {
      if (out.size() >= 100000) {
        Fail("OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
      }
      out.push_back(Value::Int(i));
    }
    return Value::List(std::move(out));
  }));
  auto make_dict = [](bool ns) {
    return [ns](const CallArgs& a) {
      std::vector<std::pair<std::string, Value>> items;
      for (const Value& p : a.positional) {
        if (p.kind() != Value::Kind::kDict) Unsupported("namespace()/dict() of a non-dict positional argument");
        items.insert(items.end(), p.dict().items.begin(), p.dict().items.end());
      }
      Value d = ns ? Value::Namespace(std::move(items)) : Value::Dict(std::move(items));
      for (const auto& [k, v] : a.keyword) d.dict().Set(k, v);
      return d;
    };
  };
  g.emplace_back("namespace", Value::Func("namespace", make_dict(true)));
  g.emplace_back("dict", Value::Func("dict", make_dict(false)));
  for (const char* name : {"cycler", "joiner", "lipsum"}) {
    g.emplace_back(name, Value::Func(name, [name](const CallArgs&) -> Value {
      Unsupported(absl::StrCat(name, "()"));
    }));
  }
  return g;
}

}  // namespace rill::tokenizer::jinja
