// A tiny byte-level BPE vocabulary for engine tests: 0 = <eos> (control),
// then a-z, A-Z, 0-9 and 'Ġ' (space), one character per token.
#ifndef RILL_ENGINE_TEST_TOKENIZER_H_
#define RILL_ENGINE_TEST_TOKENIZER_H_

#include <memory>

#include "tokenizer/bpe_tokenizer.h"

namespace rill::engine {

std::unique_ptr<tokenizer::BpeTokenizer> TinyTestTokenizer();

}  // namespace rill::engine

#endif  // RILL_ENGINE_TEST_TOKENIZER_H_
