// JSON a client sent (chat_template_kwargs, tools, documents, tool_calls) as
// the template values jinja2 sees after Python's json.loads: null -> None,
// true/false -> bool, an integer literal -> int, any other number -> float,
// string -> str, array -> list, object -> dict in document order (a repeated
// key keeps its first position and its last value, as json.loads does).
#ifndef RILL_TOKENIZER_JINJA_FROM_JSON_H_
#define RILL_TOKENIZER_JINJA_FROM_JSON_H_

#include "base/json.h"
#include "tokenizer/jinja/value.h"

namespace rill::tokenizer::jinja {

// An integer literal beyond int64 (Python would keep it exact) becomes the
// nearest float; nothing else is lossy.
Value FromJson(const base::json::JsonValue& json);

}  // namespace rill::tokenizer::jinja

#endif  // RILL_TOKENIZER_JINJA_FROM_JSON_H_
