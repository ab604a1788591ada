// The text of one completion as its tokens arrive: incremental
// detokenization plus stop strings, written once for every place that turns
// generated token ids into text (the frontend's responses and the in-process
// AsyncLLMEngine's outputs).
#ifndef RILL_TOKENIZER_COMPLETION_TEXT_H_
#define RILL_TOKENIZER_COMPLETION_TEXT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/incremental_detokenizer.h"

namespace rill::tokenizer {

struct StopStringOptions {
  // Empty strings are ignored.
  std::vector<std::string> stop;
  // Keep the matched stop string at the end of the text (else cut before it).
  bool include_stop_str_in_output = false;
  // Stop strings are not honoured until more than this many tokens were
  // pushed (vLLM's min_tokens): a match must end in the text of a later
  // token. The engine likewise masks EOS and stop token ids until then.
  int min_tokens = 0;
};

// Invariants: text() only grows; it never holds a byte that could still turn
// out to start a stop string (that tail waits in the hold-back until the
// next token decides or Finish releases it), so a streamed prefix of the text
// is never taken back. The first (earliest-starting) stop-string match ends
// the completion; a match that ended in an earlier token's text (possible
// only within the first min_tokens tokens) never counts. Not thread-safe: one per completion. The tokenizer must
// outlive it.
class CompletionText {
 public:
  CompletionText(const BpeTokenizer* tokenizer, bool skip_special_tokens,
                 StopStringOptions stop);

  // Appends one token's text. Returns true when a stop string matched just
  // now: the completion is then finished and text() ends where the options
  // say. A token id the tokenizer does not know adds no text. No-op once
  // finished.
  bool Push(int32_t token_id);

  // Ends the completion without a stop string (EOS, length, abort, error):
  // releases the held-back bytes, incomplete UTF-8 as U+FFFD.
  void Finish();

  const std::string& text() const { return text_; }
  bool finished() const { return finished_; }
  // The stop string that ended the completion, if one did.
  const std::optional<std::string>& stop_string() const { return stop_string_; }

 private:
  // Moves the part of held_ that cannot be the start of a stop string into text_.
  void Release();

  IncrementalDetokenizer detokenizer_;
  const StopStringOptions stop_;
  std::string text_;
  std::string held_;
  int num_tokens_ = 0;  // Pushed so far, text or not.
  bool finished_ = false;
  std::optional<std::string> stop_string_;
};

}  // namespace rill::tokenizer

#endif  // RILL_TOKENIZER_COMPLETION_TEXT_H_
