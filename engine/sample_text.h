// The engine core's view of a completion's text. The core is token-only: the
// text layer (AsyncLLMEngine, over the tokenizer) implements SampleText and
// hands the core a factory, so outputs can carry text and stop strings can
// end a sample without the core knowing a tokenizer. Without a factory (the
// rill-engine process) outputs carry token ids only.
#ifndef RILL_ENGINE_SAMPLE_TEXT_H_
#define RILL_ENGINE_SAMPLE_TEXT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "engine/sampling_params.h"

namespace rill::engine {

// One sample's text, fed its tokens in order on the engine loop thread.
class SampleText {
 public:
  virtual ~SampleText() = default;
  // Appends a token; true when a stop string (SamplingParams::stop) ended the
  // sample just now.
  virtual bool Push(int32_t token_id) = 0;
  // The sample ended otherwise: release any held-back text.
  virtual void Finish() = 0;
  // The text so far that can no longer change (never shrinks).
  virtual const std::string& text() const = 0;
  virtual const std::optional<std::string>& stop_string() const = 0;
};

using SampleTextFactory = std::function<std::unique_ptr<SampleText>(const SamplingParams&)>;

}  // namespace rill::engine

#endif  // RILL_ENGINE_SAMPLE_TEXT_H_
