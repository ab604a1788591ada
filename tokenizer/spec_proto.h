// The tokenizer spec on the wire (rill.internal.TokenizerSpec): the engine
// sends it in its handshake, and every frontend builds its tokenizer from it.
// Both directions live here so the two ends cannot drift apart.
#ifndef RILL_TOKENIZER_SPEC_PROTO_H_
#define RILL_TOKENIZER_SPEC_PROTO_H_

#include <cstdint>

#include "tokenizer/tokenizer_spec.h"
#include "rill/internal/engine.pb.h"

namespace rill::tokenizer {

rill::internal::TokenizerSpec SpecToProto(const TokenizerSpec& spec, int64_t max_model_len);

// An empty `pre` keeps the struct's default pre-tokenizer.
TokenizerSpec SpecFromProto(const rill::internal::TokenizerSpec& proto);

}  // namespace rill::tokenizer

#endif  // RILL_TOKENIZER_SPEC_PROTO_H_
