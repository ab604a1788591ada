// Streaming detokenization: feed ids one at a time, get text deltas.
#ifndef RILL_TOKENIZER_INCREMENTAL_DETOKENIZER_H_
#define RILL_TOKENIZER_INCREMENTAL_DETOKENIZER_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "tokenizer/bpe_tokenizer.h"

namespace rill::tokenizer {

// Invariants: every delta is valid UTF-8, and the concatenation of all
// Push deltas followed by Flush() equals tokenizer.Decode(all ids). Bytes of
// an incomplete UTF-8 sequence are held back until it completes (or becomes
// invalid, then it is emitted as U+FFFD exactly as Decode would). A run of
// SentencePiece byte-fallback tokens is held back whole until a token of
// another kind (or Flush) ends it: HF turns every byte of a run that is not
// valid UTF-8 as a whole into U+FFFD, so an early complete character of it
// could still become U+FFFD.
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

  // Bytes currently held back: < 4 of an incomplete UTF-8 sequence, plus
  // an unfinished run of byte-fallback tokens.
  size_t pending_bytes() const { return pending_.size() + run_.size(); }
  // The unfinished run's part of pending_bytes().
  size_t pending_run_bytes() const { return run_.size(); }

 private:
  // Appends bytes to the held-back ones (stripping Decode's leading space)
  // and returns what is complete UTF-8 (everything, lossy, when final).
  std::string Release(std::string_view bytes, bool final);

  const BpeTokenizer* tokenizer_;
  bool skip_special_tokens_;
  bool at_start_ = true;  // No byte produced yet (leading-space strip).
  std::string pending_;
  std::string run_;  // byte-fallback bytes of the current run
};

}  // namespace rill::tokenizer

#endif  // RILL_TOKENIZER_INCREMENTAL_DETOKENIZER_H_
