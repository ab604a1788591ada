// Python str methods over UTF-8 text, counted in code points as Python does
// (strip, split, splitlines, find, case mapping); chat_template cuts a
// continued final message with PyStrip as transformers does with str.strip.
#ifndef RILL_TOKENIZER_JINJA_PY_STR_H_
#define RILL_TOKENIZER_JINJA_PY_STR_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rill::tokenizer::jinja {

// Byte offset of each code point of s, plus s.size() at the end. Invalid
// bytes count as one code point each (they pass through unchanged).
std::vector<size_t> CodePointOffsets(std::string_view s);
int64_t CodePointCount(std::string_view s);

// str.strip / lstrip / rstrip: whitespace, or any code point of `chars`.
std::string PyStrip(std::string_view s, const std::optional<std::string>& chars, bool left,
                    bool right);
// str.split(sep, maxsplit): sep unset splits on whitespace runs.
std::vector<std::string> PySplit(std::string_view s, const std::optional<std::string>& sep,
                                 int64_t maxsplit);
// str.rsplit(sep, maxsplit).
std::vector<std::string> PyRSplit(std::string_view s, const std::optional<std::string>& sep,
                                  int64_t maxsplit);
// str.splitlines() (without keepends).
std::vector<std::string> PySplitLines(std::string_view s);
// str.replace(old, new, count); count < 0: all.
std::string PyReplace(std::string_view s, std::string_view old, std::string_view repl,
                      int64_t count);
// str.find / str.rfind: a code point index or -1.
int64_t PyFind(std::string_view s, std::string_view sub, bool reverse);

// Case mapping. Only ASCII letters change; text with other letters is
// refused (Unsupported), since Python maps them by the Unicode tables.
std::string PyUpper(std::string_view s);
std::string PyLower(std::string_view s);
std::string PyTitle(std::string_view s);
std::string PyCapitalize(std::string_view s);

}  // namespace rill::tokenizer::jinja

#endif  // RILL_TOKENIZER_JINJA_PY_STR_H_
