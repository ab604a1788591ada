// The syntax tree of a parsed Jinja template (tokenizer/jinja/parser.h builds
// it, tokenizer/jinja/template.cc walks it). Plain structs: one node type per
// kind of expression or statement, children owned by their parent.
#ifndef RILL_TOKENIZER_JINJA_AST_H_
#define RILL_TOKENIZER_JINJA_AST_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"

#include "tokenizer/jinja/value.h"

namespace rill::tokenizer::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Type {
    kLiteral,    // literal
    kName,       // name
    kList,       // items
    kTuple,      // items
    kDict,       // items: key, value, key, value, ...
    kAttr,       // items[0].name
    kSubscript,  // items[0][items[1]]
    kSlice,      // items[0][items[1]:items[2]:items[3]] (null: omitted)
    kCall,       // items[0](args, kwargs)
    kFilter,     // items[0] | name(args, kwargs)
    kTest,       // items[0] is [not] name(args)
    kUnary,      // name ("-", "+", "not") items[0]
    kBinary,     // items[0] name items[1]: arithmetic, ~, and, or
    kCompare,    // items[0] ops[0] items[1] ops[1] items[2] ... (chained)
    kCondition,  // items[1] if items[0] else items[2] (null: no else)
  };
  Type type;
  int line = 0;
  Value literal;
  std::string name;
  std::vector<ExprPtr> items;
  std::vector<std::string> ops;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;  // kTest: `is not`.
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Type {
    kText,      // text, verbatim
    kOutput,    // {{ expr }}
    kIf,        // branches: (condition, body)...; else: (null, body)
    kFor,       // for targets in expr [if filter]: body [else: else_body]
    kSet,       // set targets = expr, or set targets[0].attr = expr
    kSetBlock,  // set targets[0] %}body{% endset
    kMacro,     // macro name(params): body
    kBreak,
    kContinue,
    kScope,     // body rendered in place ({% generation %})
  };
  Type type;
  int line = 0;
  std::string text;  // kText; kMacro: the macro's name; kSet: attr of a namespace.
  ExprPtr expr;
  ExprPtr filter;
  std::vector<std::string> targets;
  std::vector<std::pair<ExprPtr, Body>> branches;
  std::vector<std::pair<std::string, ExprPtr>> params;  // kMacro: name, default (may be null).
  Body body;
  Body else_body;
};

// A parsed template plus what it names, for checks at load time.
struct Program {
  Body body;
  std::vector<std::string> filters_used;
  std::vector<std::string> tests_used;
  // Every variable name the template reads (a global unless assigned).
  absl::flat_hash_set<std::string> names_used;
};

}  // namespace rill::tokenizer::jinja

#endif  // RILL_TOKENIZER_JINJA_AST_H_
