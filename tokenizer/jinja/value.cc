#include "tokenizer/jinja/value.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tokenizer/unicode_data.h"

namespace rill::tokenizer::jinja {

const Value* DictData::Find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void DictData::Set(std::string key, Value v) {
  for (auto& [k, old] : items) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(v));
}

std::string DictKey(const Value& key) {
  switch (key.kind()) {
    case Value::Kind::kString: return key.str();
    case Value::Kind::kNone: return "\xffn";
    case Value::Kind::kBool:
    case Value::Kind::kInt: return absl::StrCat("\xffi", key.int_value());
    case Value::Kind::kFloat: {
      const double f = key.float_value();
      if (f == std::floor(f) && std::fabs(f) < 9e18) return absl::StrCat("\xffi", static_cast<int64_t>(f));
      return absl::StrCat("\xff" "f", absl::StrFormat("%.17g", f));
    }
    default: Fail(absl::StrCat("TypeError: unhashable type: '", key.TypeName(), "'"));
  }
}

Value DictKeyValue(const std::string& key) {
  if (key.empty() || key[0] != '\xff' || key.size() < 2) return Value::String(key);
  if (key[1] == 'n') return Value::None();
  if (key[1] == 'i') return Value::Int(std::strtoll(key.c_str() + 2, nullptr, 10));
  return Value::Float(std::strtod(key.c_str() + 2, nullptr));
}

Value Value::Undefined(std::string name) {
  Value v;
  v.s_ = std::move(name);
  return v;
}

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.b_ = b;
  return v;
}

Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.i_ = i;
  return v;
}

Value Value::Float(double f) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.f_ = f;
  return v;
}

Value Value::String(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.s_ = std::move(s);
  return v;
}

Value Value::Markup(std::string s) {
  Value v = String(std::move(s));
  v.markup_ = true;
  return v;
}

Value Value::Generator(std::vector<Value> items) {
  Value v = List(std::move(items));
  v.generator_ = true;
  return v;
}

Value Value::List(std::vector<Value> items, bool tuple) {
  Value v;
  v.kind_ = Kind::kList;
  v.tuple_ = tuple;
  v.list_ = std::make_shared<std::vector<Value>>(std::move(items));
  return v;
}

Value Value::Dict(std::vector<std::pair<std::string, Value>> items) {
  Value v;
  v.kind_ = Kind::kDict;
  v.dict_ = std::make_shared<DictData>();
  v.dict_->items = std::move(items);
  return v;
}

Value Value::Namespace(std::vector<std::pair<std::string, Value>> items) {
  Value v = Dict(std::move(items));
  v.kind_ = Kind::kNamespace;
  return v;
}

Value Value::Func(std::string name, Function f) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.s_ = std::move(name);
  v.func_ = std::make_shared<Function>(std::move(f));
  return v;
}

std::string Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return tuple_ ? "tuple" : "list";
    case Kind::kDict: return "dict";
    case Kind::kNamespace: return "Namespace";
    case Kind::kFunction: return "function";
  }
  return "?";
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return b_;
    case Kind::kInt: return i_ != 0;
    case Kind::kFloat: return f_ != 0;
    case Kind::kString: return !s_.empty();
    case Kind::kList: return !list_->empty();
    case Kind::kDict: return !dict_->items.empty();
    case Kind::kNamespace:
    case Kind::kFunction: return true;
  }
  return false;
}

std::string PythonFloatRepr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  if (f == 0) return std::signbit(f) ? "-0.0" : "0.0";
  // Shortest %e form that reads back exactly, then Python's layout: fixed
  // notation for decimal exponents in [-4, 16), else d.ddde+XX.
  std::string e_form;
  for (int precision = 0; precision <= 17; ++precision) {
    e_form = absl::StrFormat("%.*e", precision, f);
    if (std::strtod(e_form.c_str(), nullptr) == f) break;
  }
  const size_t e_at = e_form.find('e');
  const int exponent = std::atoi(e_form.c_str() + e_at + 1);
  std::string sign, digits;
  for (size_t i = 0; i < e_at; ++i) {
    if (e_form[i] == '-') sign = "-";
    if (e_form[i] >= '0' && e_form[i] <= '9') digits.push_back(e_form[i]);
  }
  if (exponent >= -4 && exponent < 16) {
    std::string out;
    if (exponent < 0) {
      out = "0." + std::string(-exponent - 1, '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exponent + 1) {
      out = digits + std::string(exponent + 1 - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, exponent + 1) + "." + digits.substr(exponent + 1);
    }
    return sign + out;
  }
  std::string mantissa = digits.substr(0, 1);
  if (digits.size() > 1) mantissa += "." + digits.substr(1);
  return absl::StrFormat("%s%se%c%02d", sign, mantissa, exponent < 0 ? '-' : '+',
                         std::abs(exponent));
}

namespace {

// Python's repr(str): quotes chosen as Python does, non-printable code
// points (controls, format characters, separators but the space) escaped.
std::string ReprString(const std::string& s) {
  const char quote = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, quote);
  std::vector<size_t> off;
  const std::vector<uint32_t> cps = DecodeUtf8(s, &off);
  for (size_t i = 0; i < cps.size(); ++i) {
    const uint32_t cp = cps[i];
    if (cp == static_cast<uint32_t>(quote) || cp == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (off[i + 1] - off[i] == 1 && static_cast<unsigned char>(s[off[i]]) >= 0x80) {
      out += absl::StrFormat("\\udc%02x", static_cast<unsigned char>(s[off[i]]));  // surrogateescape
    } else if (cp != ' ' && (cp < 0x20 || cp == 0x7f ||
                             (CodePointCategory(cp) & (kCategoryOther | kCategorySeparator)))) {
      out += cp < 0x100     ? absl::StrFormat("\\x%02x", cp)
             : cp < 0x10000 ? absl::StrFormat("\\u%04x", cp)
                            : absl::StrFormat("\\U%08x", cp);
    } else {
      out.append(s, off[i], off[i + 1] - off[i]);
    }
  }
  out.push_back(quote);
  return out;
}

}  // namespace

std::string Value::ToString() const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return b_ ? "True" : "False";
    case Kind::kInt: return absl::StrCat(i_);
    case Kind::kFloat: return PythonFloatRepr(f_);
    case Kind::kString: return s_;
    default: return Repr();
  }
}

std::string Value::Repr() const {
  switch (kind_) {
    case Kind::kString: return ReprString(s_);
    case Kind::kList: {
      std::string out = tuple_ ? "(" : "[";
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i > 0) out += ", ";
        out += (*list_)[i].Repr();
      }
      if (tuple_ && list_->size() == 1) out += ",";
      return out + (tuple_ ? ")" : "]");
    }
    case Kind::kDict:
    case Kind::kNamespace: {
      std::string out = kind_ == Kind::kNamespace ? "<Namespace {" : "{";
      for (size_t i = 0; i < dict_->items.size(); ++i) {
        if (i > 0) out += ", ";
        out += DictKeyValue(dict_->items[i].first).Repr() + ": " + dict_->items[i].second.Repr();
      }
      return out + (kind_ == Kind::kNamespace ? "}>" : "}");
    }
    case Kind::kFunction: return "<function " + s_ + ">";
    default: return ToString();
  }
}

bool Value::Equals(const Value& o) const {
  if (is_number() && o.is_number()) {
    if (kind_ == Kind::kFloat || o.kind_ == Kind::kFloat) {
      return float_value() == o.float_value();
    }
    return int_value() == o.int_value();
  }
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString: return s_ == o.s_;
    case Kind::kList: {
      if (list_->size() != o.list_->size()) return false;
      for (size_t i = 0; i < list_->size(); ++i) {
        if (!(*list_)[i].Equals((*o.list_)[i])) return false;
      }
      return true;
    }
    case Kind::kDict: {
      if (dict_->items.size() != o.dict_->items.size()) return false;
      for (const auto& [k, v] : dict_->items) {
        const Value* other = o.dict_->Find(k);
        if (other == nullptr || !v.Equals(*other)) return false;
      }
      return true;
    }
    default: return dict_ == o.dict_ && func_ == o.func_;
  }
}

void Fail(std::string message) {
  throw RenderError(absl::StatusCode::kInvalidArgument, std::move(message));
}

void Unsupported(std::string what) {
  throw RenderError(absl::StatusCode::kUnimplemented,
                    absl::StrCat(what, " is not supported by Rill's template engine"));
}

}  // namespace rill::tokenizer::jinja
