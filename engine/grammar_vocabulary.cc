#include "engine/grammar_vocabulary.h"

#include <algorithm>

namespace rill::engine {

structured_output::GrammarVocabulary GrammarVocabularyOf(const tokenizer::BpeTokenizer& tokenizer,
                                                         int64_t logits_width,
                                                         std::vector<int32_t> stop_token_ids) {
  structured_output::GrammarVocabulary v;
  const int64_t size = std::max<int64_t>(logits_width, tokenizer.vocab_size());
  v.token_bytes.resize(size);
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    // skip_special_tokens drops control / unknown tokens: they stay "".
    tokenizer.AppendTokenBytes(id, /*skip_special_tokens=*/true, &v.token_bytes[id]);
  }
  v.stop_token_ids = std::move(stop_token_ids);
  return v;
}

}  // namespace rill::engine
