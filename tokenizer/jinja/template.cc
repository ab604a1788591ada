#include "tokenizer/jinja/template.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/parser.h"

namespace rill::tokenizer::jinja {
namespace {

// Bounds no real chat template comes near; they turn a runaway template
// (nested loops over large ranges, deep macro recursion) into an error
// instead of a hung or crashed request.
constexpr int64_t kMaxSteps = 1'000'000;
constexpr int kMaxMacroDepth = 64;
constexpr size_t kMaxOutputBytes = 64 << 20;

// Variables: each for-loop iteration and macro call gets a scope over its
// parent's, so a `set` inside stays inside (jinja2's scoping; namespace()
// objects are how templates carry values out).
struct Scope {
  std::shared_ptr<Scope> parent;
  DictData vars;

  const Value* Find(const std::string& name) const {
    for (const Scope* s = this; s != nullptr; s = s->parent.get()) {
      if (const Value* v = s->vars.Find(name)) return v;
    }
    return nullptr;
  }
};
using ScopePtr = std::shared_ptr<Scope>;

ScopePtr Child(const ScopePtr& parent) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  return s;
}

enum class Flow { kNormal, kBreak, kContinue };

class Renderer {
 public:
  Flow Exec(const Body& body, const ScopePtr& scope, std::string* out) {
    for (const StmtPtr& s : body) {
      const Flow f = ExecOne(*s, scope, out);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

 private:
  void Step() {
    if (++steps_ > kMaxSteps) Fail("the template did not finish within its step budget");
  }

  Flow ExecOne(const Stmt& s, const ScopePtr& scope, std::string* out) {
    Step();
    switch (s.type) {
      case Stmt::Type::kText:
        out->append(s.text);
        break;
      case Stmt::Type::kOutput:
        out->append(Eval(*s.expr, scope).ToString());
        break;
      case Stmt::Type::kIf:
        for (const auto& [cond, body] : s.branches) {
          if (cond == nullptr || Eval(*cond, scope).Truthy()) return Exec(body, scope, out);
        }
        break;
      case Stmt::Type::kFor:
        For(s, scope, out);
        break;
      case Stmt::Type::kSet:
        Assign(s, Eval(*s.expr, scope), scope);
        break;
      case Stmt::Type::kSetBlock: {
        std::string text;
        Exec(s.body, scope, &text);
        Assign(s, Value::String(std::move(text)), scope);
        break;
      }
      case Stmt::Type::kMacro: {
        // The macro lives in the scope it closes over: a weak reference
        // keeps that from being a cycle.
        const Stmt* macro = &s;
        std::weak_ptr<Scope> def_scope = scope;
        scope->vars.Set(s.text, Value::Func(s.text, [this, macro, def_scope](const CallArgs& a) {
          ScopePtr defined_in = def_scope.lock();
          if (defined_in == nullptr) Unsupported("calling a macro after its scope ended");
          return CallMacro(*macro, defined_in, a);
        }));
        break;
      }
      case Stmt::Type::kBreak: return Flow::kBreak;
      case Stmt::Type::kContinue: return Flow::kContinue;
      case Stmt::Type::kScope: return Exec(s.body, scope, out);
    }
    if (out->size() > kMaxOutputBytes) Fail("the rendered template exceeds 64 MiB");
    return Flow::kNormal;
  }

  void Bind(const std::vector<std::string>& targets, const Value& v, Scope* scope) {
    if (targets.size() == 1) {
      scope->vars.Set(targets[0], v);
      return;
    }
    if (!v.is_list() && !v.is_string()) {
      Fail(absl::StrCat("TypeError: cannot unpack non-iterable ", v.TypeName(), " object"));
    }
    const std::vector<Value> items = Iterate(v);
    if (items.size() != targets.size()) {
      Fail(absl::StrCat("ValueError: expected ", targets.size(), " values to unpack, got ", items.size()));
    }
    for (size_t i = 0; i < items.size(); ++i) scope->vars.Set(targets[i], items[i]);
  }

  void Assign(const Stmt& s, const Value& v, const ScopePtr& scope) {
    if (s.text.empty() || s.type == Stmt::Type::kSetBlock) {
      Bind(s.targets, v, scope.get());
      return;
    }
    const Value* ns = scope->Find(s.targets[0]);
    if (ns == nullptr || ns->kind() != Value::Kind::kNamespace) {
      Fail("TemplateRuntimeError: cannot assign attribute on non-namespace object");
    }
    ns->dict().Set(s.text, v);
  }

  void For(const Stmt& s, const ScopePtr& scope, std::string* out) {
    std::vector<Value> items = Iterate(Eval(*s.expr, scope));
    if (s.filter != nullptr) {
      std::vector<Value> kept;
      for (const Value& item : items) {
        ScopePtr probe = Child(scope);
        Bind(s.targets, item, probe.get());
        if (Eval(*s.filter, probe).Truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      Exec(s.else_body, scope, out);
      return;
    }
    const int64_t n = static_cast<int64_t>(items.size());
    // loop.cycle and loop.changed are made once per loop; cycle reads the
    // current index through `index`.
    auto index = std::make_shared<int64_t>(0);
    const Value cycle = Value::Func("loop.cycle", [index](const CallArgs& a) {
      if (a.positional.empty()) Fail("TypeError: no items for cycling given");
      return a.positional[*index % a.positional.size()];
    });
    const Value changed = Value::Func("loop.changed", [](const CallArgs&) -> Value {
      Unsupported("loop.changed()");
    });
    for (int64_t i = 0; i < n; ++i) {
      *index = i;
      Step();
      ScopePtr iter = Child(scope);
      Bind(s.targets, items[i], iter.get());
      Value loop = Value::Dict({
          {"index", Value::Int(i + 1)},
          {"index0", Value::Int(i)},
          {"revindex", Value::Int(n - i)},
          {"revindex0", Value::Int(n - i - 1)},
          {"first", Value::Bool(i == 0)},
          {"last", Value::Bool(i == n - 1)},
          {"length", Value::Int(n)},
          {"depth", Value::Int(1)},
          {"depth0", Value::Int(0)},
          {"previtem", i > 0 ? items[i - 1] : Value::Undefined("there is no previous item")},
          {"nextitem", i + 1 < n ? items[i + 1] : Value::Undefined("there is no next item")},
          {"cycle", cycle},
          {"changed", changed},
      });
      iter->vars.Set("loop", loop);
      if (Exec(s.body, iter, out) == Flow::kBreak) break;
    }
  }

  Value CallMacro(const Stmt& m, const ScopePtr& def_scope, const CallArgs& a) {
    if (++depth_ > kMaxMacroDepth) Fail("RecursionError: macro calls nest too deep");
    if (a.positional.size() > m.params.size()) {
      Fail(absl::StrCat("TypeError: macro '", m.text, "' takes not more than ", m.params.size(),
                        " argument(s)"));
    }
    for (const auto& [k, v] : a.keyword) {
      bool known = false;
      for (const auto& p : m.params) known = known || p.first == k;
      if (!known) Fail(absl::StrCat("TypeError: macro '", m.text, "' takes no keyword argument '", k, "'"));
    }
    ScopePtr scope = Child(def_scope);
    for (size_t i = 0; i < m.params.size(); ++i) {
      const auto& [name, def] = m.params[i];
      const Value* given = Arg(a, i, name);
      scope->vars.Set(name, given ? *given
                            : def ? Eval(*def, scope)
                                  : Value::Undefined(absl::StrCat("parameter '", name, "' was not provided")));
    }
    std::string out;
    Exec(m.body, scope, &out);
    --depth_;
    return Value::String(std::move(out));
  }

  CallArgs EvalArgs(const Expr& e, const ScopePtr& scope) {
    CallArgs a;
    for (const ExprPtr& arg : e.args) a.positional.push_back(Eval(*arg, scope));
    for (const auto& [k, v] : e.kwargs) a.keyword.emplace_back(k, Eval(*v, scope));
    return a;
  }

  Value Eval(const Expr& e, const ScopePtr& scope) {
    switch (e.type) {
      case Expr::Type::kLiteral: return e.literal;
      case Expr::Type::kName: {
        const Value* v = scope->Find(e.name);
        return v ? *v : Value::Undefined(absl::StrCat("'", e.name, "' is undefined"));
      }
      case Expr::Type::kList:
      case Expr::Type::kTuple: {
        std::vector<Value> items;
        for (const ExprPtr& item : e.items) items.push_back(Eval(*item, scope));
        return Value::List(std::move(items), e.type == Expr::Type::kTuple);
      }
      case Expr::Type::kDict: {
        Value d = Value::Dict();
        for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
          const Value k = Eval(*e.items[i], scope);
          d.dict().Set(DictKey(k), Eval(*e.items[i + 1], scope));
        }
        return d;
      }
      case Expr::Type::kAttr: return GetAttr(Eval(*e.items[0], scope), e.name);
      case Expr::Type::kSubscript: return GetItem(Eval(*e.items[0], scope), Eval(*e.items[1], scope));
      case Expr::Type::kSlice: {
        Value parts[3];
        const Value* ptrs[3] = {nullptr, nullptr, nullptr};
        for (int i = 0; i < 3; ++i) {
          if (e.items[i + 1]) {
            parts[i] = Eval(*e.items[i + 1], scope);
            ptrs[i] = &parts[i];
          }
        }
        return Slice(Eval(*e.items[0], scope), ptrs[0], ptrs[1], ptrs[2]);
      }
      case Expr::Type::kCall: {
        const Value callee = Eval(*e.items[0], scope);
        RequireDefined(callee);
        if (callee.kind() != Value::Kind::kFunction) {
          Fail(absl::StrCat("TypeError: '", callee.TypeName(), "' object is not callable"));
        }
        return callee.func()(EvalArgs(e, scope));
      }
      case Expr::Type::kFilter: {
        const Value in = Eval(*e.items[0], scope);
        return CallFilter(e.name, in, EvalArgs(e, scope));
      }
      case Expr::Type::kTest: {
        const Value v = Eval(*e.items[0], scope);
        return Value::Bool(CallTest(e.name, v, EvalArgs(e, scope)) != e.negated);
      }
      case Expr::Type::kUnary: {
        const Value v = Eval(*e.items[0], scope);
        if (e.name == "not") return Value::Bool(!v.Truthy());
        RequireDefined(v);
        if (!v.is_number()) {
          Fail(absl::StrCat("TypeError: bad operand type for unary ", e.name, ": '", v.TypeName(), "'"));
        }
        if (e.name == "+") return v.kind() == Value::Kind::kFloat ? v : Value::Int(v.int_value());
        return v.kind() == Value::Kind::kFloat ? Value::Float(-v.float_value()) : Value::Int(-v.int_value());
      }
      case Expr::Type::kBinary: {
        const Value l = Eval(*e.items[0], scope);
        if (e.name == "and") return l.Truthy() ? Eval(*e.items[1], scope) : l;
        if (e.name == "or") return l.Truthy() ? l : Eval(*e.items[1], scope);
        const Value r = Eval(*e.items[1], scope);
        if (e.name == "~") return Value::String(l.ToString() + r.ToString());
        return BinaryOp(e.name, l, r);
      }
      case Expr::Type::kCompare: {
        Value left = Eval(*e.items[0], scope);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value right = Eval(*e.items[i + 1], scope);
          if (!Compare(e.ops[i], left, right)) return Value::Bool(false);
          left = std::move(right);
        }
        return Value::Bool(true);
      }
      case Expr::Type::kCondition:
        if (Eval(*e.items[0], scope).Truthy()) return Eval(*e.items[1], scope);
        return e.items[2] ? Eval(*e.items[2], scope) : Value::Undefined("the condition was false and has no else");
    }
    Fail("unknown expression");
  }

  int64_t steps_ = 0;
  int depth_ = 0;
};

}  // namespace

absl::StatusOr<Template> Template::Parse(std::string_view source) {
  absl::StatusOr<Program> p = jinja::Parse(source);
  if (!p.ok()) return p.status();
  return Template(std::make_shared<const Program>(std::move(*p)));
}

std::vector<std::string> Template::UnsupportedFeatures() const {
  std::vector<std::string> out;
  for (const std::string& f : program_->filters_used) {
    if (!HasFilter(f)) out.push_back(absl::StrCat("filter '", f, "'"));
  }
  for (const std::string& t : program_->tests_used) {
    if (!HasTest(t)) out.push_back(absl::StrCat("test '", t, "'"));
  }
  return out;
}

bool Template::ReadsName(std::string_view name) const {
  return program_->names_used.contains(absl::string_view(name.data(), name.size()));
}

absl::StatusOr<std::string> Template::Render(std::vector<std::pair<std::string, Value>> globals) const {
  auto root = std::make_shared<Scope>();
  for (auto& [k, v] : StandardGlobals()) root->vars.Set(std::move(k), std::move(v));
  for (auto& [k, v] : globals) root->vars.Set(std::move(k), std::move(v));
  std::string out;
  try {
    Renderer().Exec(program_->body, root, &out);
  } catch (const RenderError& e) {
    return e.ToStatus();
  }
  return out;
}

}  // namespace rill::tokenizer::jinja
