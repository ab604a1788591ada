// Streaming detokenization: feed ids one at a time, get text deltas.
#ifndef RILL_TOKENIZER_INCREMENTAL_DETOKENIZER_H_
#define RILL_TOKENIZER_INCREMENTAL_DETOKENIZER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "tokenizer/bpe_tokenizer.h"

namespace rill::tokenizer {

// Invariants: every delta is valid UTF-8, and the concatenation of all
// Push deltas followed by Flush() equals tokenizer.Decode(all ids). Bytes of
// an incomplete UTF-8 sequence are held back until it completes (or becomes
// invalid, then it is emitted as U+FFFD exactly as Decode would).
// Not thread-safe; one instance per stream. The tokenizer must outlive it.
class IncrementalDetokenizer {
 public:
  IncrementalDetokenizer(const BpeTokenizer* tokenizer,
                         bool skip_special_tokens);

  // Returns the new text (possibly empty). Fails on an invalid id, leaving
  // the state unchanged.
  absl::StatusOr<std::string> Push(int32_t id);

  // Ends the stream: emits held-back bytes (as U+FFFD) and resets.
  std::string Flush();

  // Bytes currently held back (always < 4).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const BpeTokenizer* tokenizer_;
  bool skip_special_tokens_;
  bool at_start_ = true;  // No byte produced yet (leading-space strip).
  std::string pending_;
};

}  // namespace rill::tokenizer

#endif  // RILL_TOKENIZER_INCREMENTAL_DETOKENIZER_H_
