// The values a Jinja template computes with, modelled on the Python objects
// jinja2 sees when transformers renders a chat template: None, bool, int,
// float, str (UTF-8, indexed by code point), list (tuples too), dict with
// string keys in insertion order, jinja2's namespace and Undefined, and
// callables (builtins, macros, bound methods). Lists and dicts are shared by
// reference, as in Python.
#ifndef RILL_TOKENIZER_JINJA_VALUE_H_
#define RILL_TOKENIZER_JINJA_VALUE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace rill::tokenizer::jinja {

class Value;

// Arguments of a call: positional, then keyword, as written.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

using Function = std::function<Value(const CallArgs&)>;

// A dict's key as stored: a str key is itself; None, bool, int and float
// keys (as in {512: 128}) are tagged with a leading 0xFF byte, which no
// UTF-8 text starts with. 1, 1.0 and True are one key, as in Python.
std::string DictKey(const Value& key);
// The key as a template sees it (what iterating over the dict yields).
Value DictKeyValue(const std::string& key);

struct DictData {
  std::vector<std::pair<std::string, Value>> items;  // DictKey, value; insertion order.
  const Value* Find(std::string_view key) const;
  void Set(std::string key, Value v);
};

class Value {
 public:
  enum class Kind {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kNamespace,  // jinja2's namespace(): a dict whose attributes `set` may assign.
    kFunction,
  };

  Value() = default;  // Undefined.
  static Value Undefined(std::string name);
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double f);
  static Value String(std::string s);
  // A str that |safe made jinja2's Markup: `+` HTML-escapes the plain str
  // joined to it (other operations treat it as a plain str).
  static Value Markup(std::string s);
  static Value List(std::vector<Value> items, bool tuple = false);
  // What jinja2 holds as a generator (map, select, reject, ...), a list here
  // except that json.dumps (tojson) refuses it, as in Python.
  static Value Generator(std::vector<Value> items);
  static Value Dict(std::vector<std::pair<std::string, Value>> items = {});
  static Value Namespace(std::vector<std::pair<std::string, Value>> items);
  static Value Func(std::string name, Function f);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict || kind_ == Kind::kNamespace; }
  bool is_number() const {
    return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool;
  }
  bool is_tuple() const { return tuple_; }
  bool is_markup() const { return markup_; }
  bool is_generator() const { return generator_; }

  bool bool_value() const { return b_; }
  int64_t int_value() const { return kind_ == Kind::kBool ? b_ : i_; }
  double float_value() const {
    return kind_ == Kind::kFloat ? f_ : static_cast<double>(int_value());
  }
  // kString: the text; kUndefined: the name that was undefined (messages).
  const std::string& str() const { return s_; }
  std::vector<Value>& list() const { return *list_; }
  DictData& dict() const { return *dict_; }
  const std::string& func_name() const { return s_; }
  const Function& func() const { return *func_; }

  // Python's type name ("str", "list", "dict", "NoneType", ...).
  std::string TypeName() const;
  // Python truthiness (Undefined is false).
  bool Truthy() const;
  // What `{{ v }}` prints: str(v) (Undefined prints nothing).
  std::string ToString() const;
  // repr(v), as Python prints list and dict items.
  std::string Repr() const;
  // Python ==: 1 == 1.0 == True; lists and dicts element-wise.
  bool Equals(const Value& other) const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool tuple_ = false;
  bool markup_ = false;
  bool generator_ = false;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  std::shared_ptr<std::vector<Value>> list_;
  std::shared_ptr<DictData> dict_;
  std::shared_ptr<Function> func_;
};

// repr(float) in Python: the shortest form that reads back to the same double.
std::string PythonFloatRepr(double f);

// An error while rendering. The renderer stops at the first one and hands its
// status (INVALID_ARGUMENT: the template rejected these inputs or failed on
// them, as jinja2 would; UNIMPLEMENTED: the template uses something this
// engine does not render) to the caller of Template::Render. Thrown inside
// tokenizer/jinja only; it never crosses the module's interface.
class RenderError {
 public:
  RenderError(absl::StatusCode code, std::string message)
      : code_(code), message_(std::move(message)) {}
  absl::Status ToStatus() const { return absl::Status(code_, message_); }

 private:
  absl::StatusCode code_;
  std::string message_;
};

// jinja2 would raise (TypeError, UndefinedError, ...): INVALID_ARGUMENT.
[[noreturn]] void Fail(std::string message);
// Something jinja2 renders that this engine does not: UNIMPLEMENTED.
[[noreturn]] void Unsupported(std::string what);

}  // namespace rill::tokenizer::jinja

#endif  // RILL_TOKENIZER_JINJA_VALUE_H_
