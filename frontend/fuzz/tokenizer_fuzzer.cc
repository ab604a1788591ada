// libFuzzer target: the byte-level BPE tokenizer (Encode, Decode and the
// incremental detokenizer) on the default model's vocabulary, plus tokenizer
// construction from a small fuzzed vocabulary.
//
// The first input byte picks a mode; the rest is the payload:
//   0, 1 (mod 4): payload is text. Encode it (parse_special on and off) and
//         check Decode gives the text back, minus the bytes the vocabulary
//         lacks (byte-level BPE drops them; SmolLM2 lacks e.g. 0x04), with
//         invalid UTF-8 replaced by U+FFFD; then stream the ids.
//   2:    payload is little-endian uint16 token ids (0xFFF0.. map to invalid
//         ids). Decode must succeed iff all ids are valid; streaming must
//         reject invalid ids without changing state.
//   3:    payload is a tiny TokenizerSpec (see SpecFromPayload); building it
//         must return a Status, and a built tokenizer must keep the same
//         streaming invariants on the spec's own tokens and a text.
// Streaming invariants (IncrementalDetokenizer's contract): every delta is
// valid UTF-8, fewer than 4 bytes are held back, and the deltas plus Flush()
// equal Decode of the same ids.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <glog/logging.h>

#include "tokenizer/byte_level.h"
#include "tokenizer/test_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_data.h"

namespace {

using rill::tokenizer::Tokenizer;
using rill::tokenizer::TokenizerSpec;

const Tokenizer* g_tokenizer = nullptr;
bool g_present[256];  // Whether the vocabulary has byte b's byte-level token.

// Stand-in when the default model is not installed: the 256 byte tokens, a
// few merges and ChatML control tokens, with SmolLM2's pre-tokenizer.
TokenizerSpec BuiltinSpec() {
  TokenizerSpec spec;
  spec.model = "gpt2";
  spec.pre = "smollm";
  for (int b = 0; b < 256; ++b) {
    spec.tokens.push_back(rill::tokenizer::BytesToByteLevel(std::string(1, static_cast<char>(b))));
  }
  spec.token_types.assign(256, 1);
  for (const char* t : {"he", "\xc4\xa0t", "\xc4\xa0the", "in", "er"}) {
    spec.tokens.push_back(t);
    spec.token_types.push_back(1);
  }
  spec.merges = {"h e", "\xc4\xa0 t", "\xc4\xa0t he", "i n", "e r"};
  for (const char* t : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    spec.tokens.push_back(t);
    spec.token_types.push_back(3);
  }
  spec.eos_id = static_cast<int32_t>(spec.tokens.size()) - 1;
  return spec;
}

void CheckStream(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip_special) {
  std::unique_ptr<rill::tokenizer::IncrementalDetokenizer> detok = tok.CreateDetokenizer(skip_special);
  std::string streamed;
  std::vector<int32_t> valid;
  for (int32_t id : ids) {
    const size_t pending = detok->pending_bytes();
    absl::StatusOr<std::string> delta = detok->Push(id);
    if (!tok.bpe().IsValidId(id)) {
      CHECK(!delta.ok()) << "invalid id " << id << " accepted";
      CHECK_EQ(delta.status().code(), absl::StatusCode::kInvalidArgument);
      CHECK_EQ(detok->pending_bytes(), pending) << "a rejected id changed the state";
      continue;
    }
    CHECK(delta.ok()) << delta.status();
    CHECK(rill::tokenizer::IsValidUtf8(*delta)) << "invalid UTF-8 delta after id " << id;
    CHECK_LT(detok->pending_bytes() - detok->pending_run_bytes(), 4u);
    streamed += *delta;
    valid.push_back(id);
  }
  const std::string tail = detok->Flush();
  CHECK(rill::tokenizer::IsValidUtf8(tail));
  streamed += tail;
  CHECK_EQ(detok->pending_bytes(), 0u);
  absl::StatusOr<std::string> full = tok.Decode(valid, skip_special);
  CHECK(full.ok()) << full.status();
  CHECK_EQ(streamed, *full) << "streamed deltas differ from Decode (skip_special=" << skip_special
                            << ", " << valid.size() << " ids)";
}

void TextMode(std::string_view text) {
  const Tokenizer& tok = *g_tokenizer;
  // What Decode must return: the text minus bytes without a token, lossy.
  std::string kept;
  for (char c : text) {
    if (g_present[static_cast<uint8_t>(c)]) kept.push_back(c);
  }
  const std::string expected = rill::tokenizer::Utf8Lossy(kept);
  for (bool parse_special : {true, false}) {
    const std::vector<int32_t> ids = tok.Encode(text, /*add_special_tokens=*/false, parse_special);
    for (int32_t id : ids) CHECK(tok.bpe().IsValidId(id)) << "Encode produced id " << id;
    absl::StatusOr<std::string> decoded = tok.Decode(ids, /*skip_special_tokens=*/false);
    CHECK(decoded.ok()) << decoded.status();
    CHECK_EQ(*decoded, expected) << "decode(encode(text)) does not round-trip (parse_special="
                                 << parse_special << ")";
    CheckStream(tok, ids, /*skip_special=*/false);
    CheckStream(tok, ids, /*skip_special=*/true);
  }
  const std::vector<int32_t> with_special = tok.Encode(text, /*add_special_tokens=*/true);
  CHECK_EQ(tok.CountTokens(text), static_cast<int>(with_special.size()));
}

void IdsMode(std::string_view payload) {
  const Tokenizer& tok = *g_tokenizer;
  const int32_t n = tok.vocab_size();
  const int32_t kInvalid[] = {-1, n, n + 1, INT32_MIN, INT32_MAX, -2, n * 2, -n};
  std::vector<int32_t> ids;
  bool all_valid = true;
  for (size_t i = 0; i + 1 < payload.size(); i += 2) {
    const uint16_t v = static_cast<uint8_t>(payload[i]) | static_cast<uint8_t>(payload[i + 1]) << 8;
    if (v >= 0xFFF0) {
      ids.push_back(kInvalid[v & 7]);
      all_valid = false;
    } else {
      ids.push_back(v % n);
    }
  }
  for (bool skip : {false, true}) {
    absl::StatusOr<std::string> d = tok.Decode(ids, skip);
    CHECK_EQ(d.ok(), all_valid) << d.status();
    if (d.ok()) CHECK(rill::tokenizer::IsValidUtf8(*d));
    CheckStream(tok, ids, skip);
  }
}

// Payload layout: [flags][pre][bos][eos] then vocabulary lines ('\n'
// separated) up to the first "\0\0", then a text to encode. With flag 0x20
// a line's first byte is its token type; lines starting "#m " are merges.
bool SpecFromPayload(std::string_view p, TokenizerSpec* spec, std::string* text) {
  if (p.size() < 4) return false;
  const uint8_t flags = p[0];
  static const char* kPre[] = {"default", "gpt2", "smollm", "llama-bpe", "qwen2", "bogus"};
  spec->model = (flags & 1) ? "llama" : "gpt2";
  spec->pre = kPre[static_cast<uint8_t>(p[1]) % 6];
  spec->add_space_prefix = flags & 2;
  spec->byte_fallback = flags & 4;
  spec->add_bos = flags & 8;
  spec->add_eos = flags & 16;
  const bool typed = flags & 32;
  const bool scored = flags & 64;
  const int bos = static_cast<int8_t>(p[2]), eos = static_cast<int8_t>(p[3]);
  p.remove_prefix(4);
  const size_t split = p.find(std::string_view("\0\0", 2));
  std::string_view vocab = p.substr(0, split);
  *text = split == std::string_view::npos ? "" : std::string(p.substr(split + 2));
  while (!vocab.empty() && spec->tokens.size() < 512) {
    const size_t nl = vocab.find('\n');
    std::string_view line = vocab.substr(0, nl);
    vocab = nl == std::string_view::npos ? std::string_view() : vocab.substr(nl + 1);
    if (line.substr(0, 3) == "#m ") {
      spec->merges.emplace_back(line.substr(3));
      continue;
    }
    if (typed) {
      if (line.empty()) continue;
      spec->token_types.push_back(static_cast<uint8_t>(line[0]) % 8);
      line.remove_prefix(1);
    }
    spec->tokens.emplace_back(line);
    if (scored) spec->scores.push_back(-static_cast<float>(spec->tokens.size() % 7));
  }
  // Small signed bytes give -1 (none) and in-range ids; the rest fail Init.
  spec->bos_id = bos;
  spec->eos_id = eos;
  return true;
}

void SpecMode(std::string_view payload) {
  TokenizerSpec spec;
  std::string text;
  if (!SpecFromPayload(payload, &spec, &text)) return;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::FromSpec(spec);
  if (!tok.ok()) return;  // Any Status is fine; crashing is not.
  std::vector<int32_t> all;
  for (int32_t id = 0; id < (*tok)->vocab_size(); ++id) all.push_back(id);
  for (bool skip : {false, true}) CheckStream(**tok, all, skip);
  for (bool parse_special : {true, false}) {
    const std::vector<int32_t> ids = (*tok)->Encode(text, /*add_special_tokens=*/true, parse_special);
    for (int32_t id : ids) CHECK((*tok)->bpe().IsValidId(id)) << "Encode produced id " << id;
    for (bool skip : {false, true}) CheckStream(**tok, ids, skip);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  const std::string path = rill::tokenizer::testing::DefaultModelPath();
  TokenizerSpec spec;
  if (!path.empty()) {
    absl::StatusOr<TokenizerSpec> s = rill::tokenizer::testing::ReadGgufTokenizer(path);
    CHECK(s.ok()) << s.status();
    spec = *s;
    fprintf(stderr, "tokenizer_fuzzer: vocabulary of %s\n", path.c_str());
  } else {
    spec = BuiltinSpec();
    fprintf(stderr, "tokenizer_fuzzer: default model not found, using a built-in byte vocabulary\n");
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::FromSpec(spec);
  CHECK(tok.ok()) << tok.status();
  CHECK(spec.model == "gpt2") << "the round-trip check assumes a byte-level vocabulary";
  g_tokenizer = tok->release();
  for (int b = 0; b < 256; ++b) {
    g_present[b] = g_tokenizer->TokenToId(
                       rill::tokenizer::BytesToByteLevel(std::string(1, static_cast<char>(b))))
                       .has_value();
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view payload(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
    case 1:
      TextMode(payload);
      break;
    case 2:
      IdsMode(payload);
      break;
    case 3:
      SpecMode(payload);
      break;
  }
  return 0;
}
