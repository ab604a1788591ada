#include "tokenizer/jinja/parser.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <initializer_list>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tokenizer/jinja/lexer.h"

namespace rill::tokenizer::jinja {
namespace {

using T = Token::Type;

// jinja2 tags this engine does not render: named in the error, not reported as
// a syntax error.
const std::set<std::string>& UnsupportedTags() {
  static const auto* tags = new std::set<std::string>{
      "call", "filter", "include", "import", "from", "extends", "block",
      "with", "autoescape", "do", "trans", "pluralize"};
  return *tags;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  Program Run() {
    Program p;
    std::string stopped_at;
    p.body = ParseBody({}, &stopped_at);
    p.filters_used.assign(filters_.begin(), filters_.end());
    p.tests_used.assign(tests_.begin(), tests_.end());
    p.names_used = std::move(names_);
    return p;
  }

 private:
  const Token& Cur() const { return toks_[pos_]; }
  const Token& Peek(size_t k = 1) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  void Next() {
    if (pos_ + 1 < toks_.size()) ++pos_;
  }

  [[noreturn]] void SyntaxError(const std::string& what) const {
    throw RenderError(absl::StatusCode::kInvalidArgument,
                      absl::StrCat("chat template line ", Cur().line, ": ", what));
  }
  [[noreturn]] void NotSupported(const std::string& what) const {
    throw RenderError(absl::StatusCode::kUnimplemented,
                      absl::StrCat("chat template line ", Cur().line, ": ", what,
                                   " is not supported by Rill's template engine"));
  }

  bool IsOp(std::string_view op) const { return Cur().type == T::kOperator && Cur().value == op; }
  bool IsName(std::string_view n) const { return Cur().type == T::kName && Cur().value == n; }
  bool AcceptOp(std::string_view op) {
    if (!IsOp(op)) return false;
    Next();
    return true;
  }
  bool AcceptName(std::string_view n) {
    if (!IsName(n)) return false;
    Next();
    return true;
  }
  void ExpectOp(std::string_view op) {
    if (!AcceptOp(op)) SyntaxError(absl::StrCat("expected '", std::string(op), "', got '", Describe(), "'"));
  }
  std::string ExpectName() {
    if (Cur().type != T::kName) SyntaxError(absl::StrCat("expected a name, got '", Describe(), "'"));
    std::string n = Cur().value;
    Next();
    return n;
  }
  void ExpectBlockEnd() {
    if (Cur().type != T::kBlockEnd) SyntaxError(absl::StrCat("expected '%}', got '", Describe(), "'"));
    Next();
  }
  std::string Describe() const {
    switch (Cur().type) {
      case T::kEnd: return "end of template";
      case T::kBlockEnd: return "%}";
      case T::kVarEnd: return "}}";
      case T::kText: return "text";
      default: return Cur().value;
    }
  }

  ExprPtr Node(Expr::Type t) {
    auto e = std::make_unique<Expr>();
    e->type = t;
    e->line = Cur().line;
    return e;
  }

  // Statements until a block tag named in `stop` (left unconsumed except for
  // its name, returned in *stopped_at) or the end.
  Body ParseBody(const std::set<std::string>& stop, std::string* stopped_at) {
    Body body;
    while (true) {
      const Token& t = Cur();
      if (t.type == T::kEnd) {
        if (!stop.empty()) {
          SyntaxError(absl::StrCat("unexpected end of template; expected {% ", *stop.begin(), " %}"));
        }
        return body;
      }
      if (t.type == T::kText) {
        auto s = std::make_unique<Stmt>();
        s->type = Stmt::Type::kText;
        s->line = t.line;
        s->text = t.value;
        body.push_back(std::move(s));
        Next();
      } else if (t.type == T::kVarBegin) {
        auto s = std::make_unique<Stmt>();
        s->type = Stmt::Type::kOutput;
        s->line = t.line;
        Next();
        s->expr = ParseTuple();
        if (Cur().type != T::kVarEnd) SyntaxError(absl::StrCat("expected '}}', got '", Describe(), "'"));
        Next();
        body.push_back(std::move(s));
      } else if (t.type == T::kBlockBegin) {
        Next();
        if (Cur().type != T::kName) SyntaxError("expected a tag name after '{%'");
        const std::string name = Cur().value;
        if (stop.count(name)) {
          Next();
          *stopped_at = name;
          return body;
        }
        body.push_back(ParseStatement());
      } else {
        SyntaxError(absl::StrCat("unexpected '", Describe(), "'"));
      }
    }
  }

  StmtPtr ParseStatement() {
    auto s = std::make_unique<Stmt>();
    s->line = Cur().line;
    const std::string name = ExpectName();
    std::string end;
    if (name == "if") {
      s->type = Stmt::Type::kIf;
      ExprPtr cond = ParseTuple();
      while (true) {
        ExpectBlockEnd();
        Body b = ParseBody({"elif", "else", "endif"}, &end);
        s->branches.emplace_back(std::move(cond), std::move(b));
        if (end == "elif") {
          cond = ParseTuple();
        } else if (end == "else") {
          ExpectBlockEnd();
          s->branches.emplace_back(nullptr, ParseBody({"endif"}, &end));
          ExpectBlockEnd();
          break;
        } else {
          ExpectBlockEnd();
          break;
        }
      }
    } else if (name == "for") {
      s->type = Stmt::Type::kFor;
      s->targets = ParseTargets();
      if (!AcceptName("in")) SyntaxError("expected 'in' in {% for %}");
      s->expr = ParseTuple(/*with_condexpr=*/false);
      if (AcceptName("if")) s->filter = ParseExpression();
      if (IsName("recursive")) NotSupported("{% for ... recursive %}");
      ExpectBlockEnd();
      s->body = ParseBody({"else", "endfor"}, &end);
      ExpectBlockEnd();
      if (end == "else") {
        s->else_body = ParseBody({"endfor"}, &end);
        ExpectBlockEnd();
      }
    } else if (name == "set") {
      s->targets = ParseTargets();
      if (s->targets.size() == 1 && AcceptOp(".")) s->text = ExpectName();
      if (AcceptOp("=")) {
        s->type = Stmt::Type::kSet;
        s->expr = ParseTuple();
        ExpectBlockEnd();
      } else {
        if (IsOp("|")) NotSupported("{% set x | filter %} blocks");
        if (s->targets.size() != 1 || !s->text.empty()) SyntaxError("a {% set %} block takes one name");
        s->type = Stmt::Type::kSetBlock;
        ExpectBlockEnd();
        s->body = ParseBody({"endset"}, &end);
        ExpectBlockEnd();
      }
    } else if (name == "macro") {
      s->type = Stmt::Type::kMacro;
      s->text = ExpectName();
      ExpectOp("(");
      while (!AcceptOp(")")) {
        std::string param = ExpectName();
        ExprPtr def;
        if (AcceptOp("=")) def = ParseExpression();
        s->params.emplace_back(std::move(param), std::move(def));
        if (!IsOp(")")) ExpectOp(",");
      }
      ExpectBlockEnd();
      s->body = ParseBody({"endmacro"}, &end);
      ExpectBlockEnd();
    } else if (name == "break" || name == "continue") {
      s->type = name == "break" ? Stmt::Type::kBreak : Stmt::Type::kContinue;
      ExpectBlockEnd();
    } else if (name == "generation") {
      // transformers' AssistantTracker tag: renders its body unchanged.
      s->type = Stmt::Type::kScope;
      ExpectBlockEnd();
      s->body = ParseBody({"endgeneration"}, &end);
      ExpectBlockEnd();
    } else if (UnsupportedTags().count(name)) {
      NotSupported(absl::StrCat("{% ", name, " %}"));
    } else {
      pos_ -= 1;
      SyntaxError(absl::StrCat("unknown tag {% ", name, " %}"));
    }
    return s;
  }

  std::vector<std::string> ParseTargets() {
    std::vector<std::string> names;
    const bool paren = AcceptOp("(");
    do {
      names.push_back(ExpectName());
    } while (AcceptOp(","));
    if (paren) ExpectOp(")");
    return names;
  }

  // expr [, expr ...]: a tuple when a comma follows.
  ExprPtr ParseTuple(bool with_condexpr = true) {
    ExprPtr first = with_condexpr ? ParseExpression() : ParseOr();
    if (!IsOp(",")) return first;
    ExprPtr t = Node(Expr::Type::kTuple);
    t->items.push_back(std::move(first));
    while (AcceptOp(",")) {
      if (Cur().type == T::kVarEnd || Cur().type == T::kBlockEnd || IsOp(")")) break;
      t->items.push_back(with_condexpr ? ParseExpression() : ParseOr());
    }
    return t;
  }

  ExprPtr ParseExpression() {
    ExprPtr e = ParseOr();
    while (IsName("if")) {
      Next();
      ExprPtr c = Node(Expr::Type::kCondition);
      c->items.push_back(ParseOr());
      c->items.push_back(std::move(e));
      c->items.push_back(AcceptName("else") ? ParseExpression() : nullptr);
      e = std::move(c);
    }
    return e;
  }

  ExprPtr Binary(std::string op, ExprPtr l, ExprPtr r) {
    ExprPtr b = Node(Expr::Type::kBinary);
    b->name = std::move(op);
    b->items.push_back(std::move(l));
    b->items.push_back(std::move(r));
    return b;
  }

  // One left-associative precedence level: operand (op operand)*, the
  // operators being names (and, or) or operator tokens.
  ExprPtr LeftAssoc(ExprPtr (Parser::*operand)(), std::initializer_list<std::string_view> ops,
                    bool names) {
    ExprPtr e = (this->*operand)();
    while (true) {
      std::string op;
      for (std::string_view o : ops) {
        if (names ? IsName(o) : IsOp(o)) op = std::string(o);
      }
      if (op.empty()) return e;
      Next();
      e = Binary(op, std::move(e), (this->*operand)());
    }
  }

  ExprPtr ParseOr() { return LeftAssoc(&Parser::ParseAnd, {"or"}, true); }
  ExprPtr ParseAnd() { return LeftAssoc(&Parser::ParseNot, {"and"}, true); }

  ExprPtr ParseNot() {
    if (IsName("not")) {
      ExprPtr u = Node(Expr::Type::kUnary);
      Next();
      u->name = "not";
      u->items.push_back(ParseNot());
      return u;
    }
    return ParseCompare();
  }

  ExprPtr ParseCompare() {
    ExprPtr first = ParseMath1();
    ExprPtr c;
    while (true) {
      std::string op;
      if (Cur().type == T::kOperator &&
          (Cur().value == "==" || Cur().value == "!=" || Cur().value == "<" || Cur().value == ">" ||
           Cur().value == "<=" || Cur().value == ">=")) {
        op = Cur().value;
        Next();
      } else if (IsName("in")) {
        op = "in";
        Next();
      } else if (IsName("not") && Peek().type == T::kName && Peek().value == "in") {
        op = "not in";
        Next();
        Next();
      } else {
        break;
      }
      if (!c) {
        c = Node(Expr::Type::kCompare);
        c->items.push_back(std::move(first));
      }
      c->ops.push_back(op);
      c->items.push_back(ParseMath1());
    }
    return c ? std::move(c) : std::move(first);
  }

  // jinja2's precedence, loosest first: + -, then ~, then * / // %, then **.
  ExprPtr ParseMath1() { return LeftAssoc(&Parser::ParseConcat, {"+", "-"}, false); }
  ExprPtr ParseConcat() { return LeftAssoc(&Parser::ParseMath2, {"~"}, false); }
  ExprPtr ParseMath2() { return LeftAssoc(&Parser::ParsePow, {"*", "/", "//", "%"}, false); }
  ExprPtr ParsePow() { return LeftAssoc(&Parser::ParseUnaryWithFilters, {"**"}, false); }
  ExprPtr ParseUnaryWithFilters() { return ParseUnary(true); }

  ExprPtr ParseUnary(bool with_filter) {
    ExprPtr e;
    if (IsOp("-") || IsOp("+")) {
      e = Node(Expr::Type::kUnary);
      e->name = Cur().value;
      Next();
      e->items.push_back(ParseUnary(false));
    } else {
      e = ParsePrimary();
    }
    e = ParsePostfix(std::move(e));
    if (with_filter) e = ParseFilterExpr(std::move(e));
    return e;
  }

  ExprPtr ParsePrimary() {
    const Token& t = Cur();
    if (t.type == T::kName) {
      ExprPtr e = Node(Expr::Type::kLiteral);
      if (t.value == "true" || t.value == "True") {
        e->literal = Value::Bool(true);
      } else if (t.value == "false" || t.value == "False") {
        e->literal = Value::Bool(false);
      } else if (t.value == "none" || t.value == "None") {
        e->literal = Value::None();
      } else {
        e->type = Expr::Type::kName;
        e->name = t.value;
        names_.insert(t.value);
      }
      Next();
      return e;
    }
    if (t.type == T::kString) {
      ExprPtr e = Node(Expr::Type::kLiteral);
      std::string s;
      while (Cur().type == T::kString) {  // Adjacent literals concatenate.
        s += Cur().value;
        Next();
      }
      e->literal = Value::String(std::move(s));
      return e;
    }
    if (t.type == T::kInt || t.type == T::kFloat) {
      ExprPtr e = Node(Expr::Type::kLiteral);
      if (t.type == T::kInt) {
        errno = 0;
        const long long v = std::strtoll(t.value.c_str(), nullptr, 10);
        if (errno == ERANGE) NotSupported("an integer literal beyond 64 bits");
        e->literal = Value::Int(v);
      } else {
        e->literal = Value::Float(std::strtod(t.value.c_str(), nullptr));
      }
      Next();
      return e;
    }
    if (AcceptOp("(")) {
      if (AcceptOp(")")) return Node(Expr::Type::kTuple);
      ExprPtr first = ParseExpression();
      if (AcceptOp(")")) return first;
      ExprPtr tup = Node(Expr::Type::kTuple);
      tup->items.push_back(std::move(first));
      while (AcceptOp(",")) {
        if (IsOp(")")) break;
        tup->items.push_back(ParseExpression());
      }
      ExpectOp(")");
      return tup;
    }
    if (AcceptOp("[")) {
      ExprPtr list = Node(Expr::Type::kList);
      while (!AcceptOp("]")) {
        list->items.push_back(ParseExpression());
        if (!IsOp("]")) ExpectOp(",");
      }
      return list;
    }
    if (AcceptOp("{")) {
      ExprPtr dict = Node(Expr::Type::kDict);
      while (!AcceptOp("}")) {
        dict->items.push_back(ParseExpression());
        ExpectOp(":");
        dict->items.push_back(ParseExpression());
        if (!IsOp("}")) ExpectOp(",");
      }
      return dict;
    }
    SyntaxError(absl::StrCat("unexpected '", Describe(), "' in an expression"));
  }

  ExprPtr ParsePostfix(ExprPtr e) {
    while (true) {
      if (AcceptOp(".")) {
        if (Cur().type == T::kInt) {  // x.0 is x[0] in jinja2.
          ExprPtr s = Node(Expr::Type::kSubscript);
          s->items.push_back(std::move(e));
          ExprPtr idx = Node(Expr::Type::kLiteral);
          idx->literal = Value::Int(std::strtoll(Cur().value.c_str(), nullptr, 10));
          Next();
          s->items.push_back(std::move(idx));
          e = std::move(s);
          continue;
        }
        ExprPtr a = Node(Expr::Type::kAttr);
        a->name = ExpectName();
        a->items.push_back(std::move(e));
        e = std::move(a);
      } else if (AcceptOp("[")) {
        e = ParseSubscript(std::move(e));
      } else if (IsOp("(")) {
        e = ParseCall(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr ParseSubscript(ExprPtr obj) {
    ExprPtr parts[3];
    int colons = 0;
    while (!IsOp("]")) {
      if (AcceptOp(":")) {
        if (++colons > 2) SyntaxError("too many ':' in a slice");
        continue;
      }
      if (parts[colons]) SyntaxError("expected ']' or ':' in a subscript");
      parts[colons] = ParseExpression();
    }
    ExpectOp("]");
    if (colons == 0) {
      if (!parts[0]) SyntaxError("empty subscript []");
      ExprPtr s = Node(Expr::Type::kSubscript);
      s->items.push_back(std::move(obj));
      s->items.push_back(std::move(parts[0]));
      return s;
    }
    ExprPtr s = Node(Expr::Type::kSlice);
    s->items.push_back(std::move(obj));
    for (ExprPtr& p : parts) s->items.push_back(std::move(p));
    return s;
  }

  // callee( args ): the '(' is current.
  ExprPtr ParseCall(ExprPtr callee) {
    ExprPtr c = Node(Expr::Type::kCall);
    c->items.push_back(std::move(callee));
    ParseCallArgs(c.get());
    return c;
  }

  // ( args, name=value ... ) after the callee; the '(' is current.
  void ParseCallArgs(Expr* call) {
    ExpectOp("(");
    while (!AcceptOp(")")) {
      if (IsOp("*") || IsOp("**")) NotSupported("*args / **kwargs in a call");
      if (Cur().type == T::kName && Peek().type == T::kOperator && Peek().value == "=") {
        std::string key = Cur().value;
        Next();
        Next();
        call->kwargs.emplace_back(std::move(key), ParseExpression());
      } else {
        if (!call->kwargs.empty()) SyntaxError("a positional argument follows a keyword argument");
        call->args.push_back(ParseExpression());
      }
      if (!IsOp(")")) ExpectOp(",");
    }
  }

  std::string DottedName() {
    std::string n = ExpectName();
    while (IsOp(".") && Peek().type == T::kName) {
      Next();
      n += "." + ExpectName();
    }
    return n;
  }

  ExprPtr ParseFilterExpr(ExprPtr e) {
    while (true) {
      if (AcceptOp("|")) {
        ExprPtr f = Node(Expr::Type::kFilter);
        f->name = DottedName();
        filters_.insert(f->name);
        f->items.push_back(std::move(e));
        if (IsOp("(")) ParseCallArgs(f.get());
        e = std::move(f);
      } else if (IsName("is")) {
        Next();
        ExprPtr t = Node(Expr::Type::kTest);
        t->negated = AcceptName("not");
        t->name = DottedName();
        tests_.insert(t->name);
        t->items.push_back(std::move(e));
        if (IsOp("(")) {
          ParseCallArgs(t.get());
        } else if ((Cur().type == T::kName || Cur().type == T::kString || Cur().type == T::kInt ||
                    Cur().type == T::kFloat || IsOp("[") || IsOp("{") || IsOp("(")) &&
                   !IsName("else") && !IsName("or") && !IsName("and")) {
          // `x is divisibleby 3`: one argument without parentheses.
          t->args.push_back(ParsePostfix(ParsePrimary()));
        }
        e = std::move(t);
      } else if (IsOp("(")) {
        e = ParseCall(std::move(e));
      } else {
        return e;
      }
    }
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  std::set<std::string> filters_;
  std::set<std::string> tests_;
  absl::flat_hash_set<std::string> names_;
};

}  // namespace

absl::StatusOr<Program> Parse(std::string_view source) {
  absl::StatusOr<std::vector<Token>> tokens = Tokenize(source);
  if (!tokens.ok()) return tokens.status();
  try {
    return Parser(std::move(*tokens)).Run();
  } catch (const RenderError& e) {
    return e.ToStatus();
  }
}

}  // namespace rill::tokenizer::jinja
