// Template::LoopsOverMessageContent: how vLLM decides a chat template's
// content format ("openai" when it iterates a message's content, else
// "string"), on this engine's syntax tree. Followed as vLLM does it: the
// names `messages` reaches through {% set %} (a slice, filter or test of it
// counts), the loop variables of {% for %} over those, and a {% for %} over
// one of them's "content" (m.content or m['content'], filtered, tested or
// sliced).
#include <deque>
#include <string>
#include <vector>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/template.h"

namespace rill::tokenizer::jinja {
namespace {

bool IsVar(const Expr* e, const std::string& var) {
  return e != nullptr && e->type == Expr::Type::kName && e->name == var;
}

// var.key or var['key'].
bool IsKeyOf(const Expr* e, const std::string& var, const std::string& key) {
  if (e == nullptr || e->items.empty()) return false;
  if (e->type == Expr::Type::kAttr) return e->name == key && IsVar(e->items[0].get(), var);
  if (e->type == Expr::Type::kSubscript && e->items.size() == 2) {
    const Expr* k = e->items[1].get();
    return k != nullptr && k->type == Expr::Type::kLiteral && k->literal.is_string() &&
           k->literal.str() == key && IsVar(e->items[0].get(), var);
  }
  return false;
}

// `var` (or var's `key` when key is not empty), possibly filtered, tested or
// sliced.
bool IsVarOrElems(const Expr* e, const std::string& var, const std::string& key = "") {
  if (e == nullptr) return false;
  if ((e->type == Expr::Type::kFilter || e->type == Expr::Type::kTest ||
       e->type == Expr::Type::kSlice) &&
      !e->items.empty()) {
    return IsVarOrElems(e->items[0].get(), var, key);
  }
  return key.empty() ? IsVar(e, var) : IsKeyOf(e, var, key);
}

void Collect(const Body& body, std::vector<const Stmt*>* sets, std::vector<const Stmt*>* fors) {
  for (const StmtPtr& s : body) {
    if (s->type == Stmt::Type::kSet && s->text.empty() && s->targets.size() == 1) {
      sets->push_back(s.get());
    }
    if (s->type == Stmt::Type::kFor) fors->push_back(s.get());
    Collect(s->body, sets, fors);
    Collect(s->else_body, sets, fors);
    for (const auto& branch : s->branches) Collect(branch.second, sets, fors);
  }
}

}  // namespace

bool Template::LoopsOverMessageContent() const {
  std::vector<const Stmt*> sets, fors;
  Collect(program_->body, &sets, &fors);
  // Names that hold the messages (or a slice or filter of them).
  std::vector<std::string> lists = {"messages"};
  std::deque<std::string> pending = {"messages"};
  while (!pending.empty()) {
    const std::string name = pending.front();
    pending.pop_front();
    for (const Stmt* s : sets) {
      if (!IsVarOrElems(s->expr.get(), name)) continue;
      const std::string& target = s->targets[0];
      bool known = false;
      for (const std::string& l : lists) known = known || l == target;
      if (known) continue;
      lists.push_back(target);
      pending.push_back(target);
    }
  }
  // Loop variables that hold one message.
  std::vector<std::string> messages;
  for (const Stmt* f : fors) {
    if (f->targets.size() != 1) continue;
    for (const std::string& l : lists) {
      if (IsVarOrElems(f->expr.get(), l)) {
        messages.push_back(f->targets[0]);
        break;
      }
    }
  }
  for (const Stmt* f : fors) {
    for (const std::string& m : messages) {
      if (IsVarOrElems(f->expr.get(), m, "content")) return true;
    }
  }
  return false;
}

}  // namespace rill::tokenizer::jinja
