// The output modes of one request's n completions, written once for the
// frontend (GenerateResponse) and the in-process engine API (RequestOutput):
// which completions an output lists, which part of each (DELTA: only what was
// not sent before; CUMULATIVE and FINAL_ONLY: all of it), whether a finish is
// reported, and that FINAL_ONLY sends nothing before the end. It knows no
// tokenizer and no message type: callers pass each completion's text and
// token count and slice their own token ids and logprobs with the positions
// it returns.
#ifndef RILL_TOKENIZER_OUTPUT_SHAPER_H_
#define RILL_TOKENIZER_OUTPUT_SHAPER_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace rill::tokenizer {

enum class OutputMode { kDelta, kCumulative, kFinalOnly };

// What one output carries of one completion.
struct CompletionSlice {
  int index = 0;
  std::string text;  // DELTA: the text not sent before; otherwise all of it.
  // Its token ids (and their logprobs) are positions [token_begin, token_end)
  // of the completion's tokens.
  size_t token_begin = 0;
  size_t token_end = 0;
  bool finished = false;  // The completion has ended: report how.
};

// Not thread-safe: one per request.
class OutputShaper {
 public:
  // Which completions a CUMULATIVE output lists: the frontend's stream sends
  // the ones that changed; the in-process API lists every sample, as vLLM's
  // RequestOutput does. DELTA lists the changed ones and FINAL_ONLY all, either way.
  enum class CumulativeListing { kChanged, kEvery };

  OutputShaper(OutputMode mode, int n, CumulativeListing listing);

  OutputMode mode() const { return mode_; }
  int size() const { return static_cast<int>(completions_.size()); }

  // Completion `index` has ended (its text must be final by the next Take).
  void Finish(int index);
  bool finished(int index) const { return completions_[index].finished; }
  bool all_finished() const { return num_finished_ == size(); }

  // Whether an output goes out now: FINAL_ONLY waits for every completion.
  bool Emits() const { return mode_ != OutputMode::kFinalOnly || all_finished(); }

  // What the next output carries of completion `index`, whose text so far is
  // `text` (the part that can no longer change) and which has `num_tokens`
  // tokens; nothing when the output does not list it. Marks what it returns
  // as sent.
  std::optional<CompletionSlice> Take(int index, const std::string& text, size_t num_tokens);

 private:
  struct Completion {
    size_t sent_text = 0;  // Bytes of text already sent.
    size_t sent_tokens = 0;
    bool finished = false;
    bool reported_finished = false;
  };

  const OutputMode mode_;
  const CumulativeListing listing_;
  std::vector<Completion> completions_;
  int num_finished_ = 0;
};

}  // namespace rill::tokenizer

#endif  // RILL_TOKENIZER_OUTPUT_SHAPER_H_
