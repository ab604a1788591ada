// The model's vocabulary as structured-output grammars see it, built once per
// engine from its tokenizer. Lives in engine/ (not structured_output/) because
// it is where tokenizers and the token-only core meet.
#ifndef RILL_ENGINE_GRAMMAR_VOCABULARY_H_
#define RILL_ENGINE_GRAMMAR_VOCABULARY_H_

#include <cstdint>
#include <vector>

#include "engine/structured_output/grammar_compiler.h"
#include "tokenizer/bpe_tokenizer.h"

namespace rill::engine {

// Each id's decoded bytes ("" for control and unknown tokens, which no
// grammar produces), padded with "" to `logits_width` (the model's vocab
// size), and `stop_token_ids` as the ids that end generation.
structured_output::GrammarVocabulary GrammarVocabularyOf(const tokenizer::BpeTokenizer& tokenizer,
                                                         int64_t logits_width,
                                                         std::vector<int32_t> stop_token_ids);

}  // namespace rill::engine

#endif  // RILL_ENGINE_GRAMMAR_VOCABULARY_H_
