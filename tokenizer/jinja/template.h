// A Jinja template engine for chat templates: renders what jinja2 renders,
// byte for byte, under the settings transformers' apply_chat_template uses
// (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols,
// its tojson and {% generation %}). What it does not implement is refused by
// name (UNIMPLEMENTED), at parse time for tags and when rendering reaches it
// otherwise (a filter, test or str method, an argument form), never rendered
// differently. Rendering-time refusal is deliberate: as in jinja2, which
// checks filters only when an {% if %} branch runs, a template whose tool-call
// branch uses something missing still renders plain chats.
//
// Immutable after Parse; Render may run on many threads at once.
#ifndef RILL_TOKENIZER_JINJA_TEMPLATE_H_
#define RILL_TOKENIZER_JINJA_TEMPLATE_H_

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "tokenizer/jinja/value.h"

namespace rill::tokenizer::jinja {

struct Program;

class Template {
 public:
  // INVALID_ARGUMENT: not valid jinja2 (syntax); UNIMPLEMENTED: a tag this
  // engine does not render. Messages name the construct and its line.
  static absl::StatusOr<Template> Parse(std::string_view source);

  // The filters and tests the template names that this engine lacks ("filter
  // 'wordwrap'"): rendering fails with UNIMPLEMENTED if it reaches one.
  std::vector<std::string> UnsupportedFeatures() const;

  // Whether the template reads a variable of this name anywhere: a global it
  // never names cannot change its output (what vLLM filters
  // chat_template_kwargs by).
  bool ReadsName(std::string_view name) const;

  // Whether the template iterates a message's content ({% for part in
  // message['content'] %}), found as vLLM detects its "openai" content
  // format (content_format.cc): such a template is given a message's parts
  // as a list of {"type": "text", "text": ...} rather than one string.
  bool LoopsOverMessageContent() const;

  // Renders with `globals` as the template's variables (besides range,
  // namespace and dict). INVALID_ARGUMENT where jinja2 would raise (the
  // template's own raise_exception included, with its message);
  // UNIMPLEMENTED where rendering needs what this engine lacks.
  absl::StatusOr<std::string> Render(std::vector<std::pair<std::string, Value>> globals) const;

 private:
  explicit Template(std::shared_ptr<const Program> p) : program_(std::move(p)) {}
  std::shared_ptr<const Program> program_;
};

}  // namespace rill::tokenizer::jinja

#endif  // RILL_TOKENIZER_JINJA_TEMPLATE_H_
