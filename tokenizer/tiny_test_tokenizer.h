// A tiny byte-level BPE vocabulary for engine tests: 0 = <eos> (control),
// then a-z, A-Z, 0-9 and 'Ġ' (space), one character per token.
#ifndef RILL_TOKENIZER_TINY_TEST_TOKENIZER_H_
#define RILL_TOKENIZER_TINY_TEST_TOKENIZER_H_

#include <memory>

#include "tokenizer/bpe_tokenizer.h"

namespace rill::tokenizer {

std::unique_ptr<BpeTokenizer> TinyTestTokenizer();

}  // namespace rill::tokenizer

#endif  // RILL_TOKENIZER_TINY_TEST_TOKENIZER_H_
