#include "tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <queue>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/unicode_data.h"

namespace rill::tokenizer {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581 '▁'

// The system absl predates std::string_view interop.
absl::string_view A(std::string_view s) { return {s.data(), s.size()}; }

uint64_t PairKey(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) |
         static_cast<uint32_t>(b);
}

// Splits text into UTF-8 characters (invalid bytes are single "chars").
std::vector<std::string_view> SplitChars(std::string_view text) {
  std::vector<std::string_view> chars;
  size_t i = 0;
  while (i < text.size()) {
    const int n = Utf8SequenceLength(text.substr(i));
    const size_t len = n > 0 ? n : 1;
    chars.push_back(text.substr(i, len));
    i += len;
  }
  return chars;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The byte of a SentencePiece byte-fallback token "<0xXX>" (exactly two hex
// digits), else -1. Not sscanf("%2x"): that also takes "-1" or " 1", so a
// vocabulary token "<0x-1>" indexed byte_ids_[-1] (UBSan, through
// frontend/fuzz/tokenizer_fuzzer.cc on corpus/tokenizer/regress-byte-token-sign).
int ByteTokenValue(std::string_view tok) {
  if (tok.size() != 6 || tok.substr(0, 3) != "<0x" || tok[5] != '>') return -1;
  const int hi = HexDigit(tok[3]), lo = HexDigit(tok[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

bool IsSpecialType(TokenType t) {
  return t == TokenType::kControl || t == TokenType::kUserDefined ||
         t == TokenType::kUnknown;
}

}  // namespace

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::Create(
    const TokenizerSpec& spec) {
  std::unique_ptr<BpeTokenizer> t(new BpeTokenizer);
  absl::Status s = t->Init(spec);
  if (!s.ok()) return s;
  return t;
}

absl::Status BpeTokenizer::Init(const TokenizerSpec& spec) {
  if (spec.model == "gpt2") {
    byte_level_ = true;
    absl::StatusOr<PreTokenizerType> pre = PreTokenizerFromName(spec.pre);
    if (!pre.ok()) return pre.status();
    pre_ = *pre;
    ignore_merges_ = PreTokenizerIgnoresMerges(pre_);
  } else if (spec.model == "llama" || spec.model == "gemma4") {
    byte_level_ = false;
    pre_ = PreTokenizerType::kNone;
    strip_leading_space_ = spec.add_space_prefix;
    // Gemma 4 (llama.cpp's pre-tokenizer "gemma4"): BPE by merge rank over
    // raw UTF-8 with '\u2581' for spaces, where runs of newlines never merge
    // with other characters.
    split_newline_runs_ = spec.model == "gemma4";
    if (split_newline_runs_ && spec.merges.empty()) {
      return absl::InvalidArgumentError("gemma4 tokenizer without merges");
    }
  } else {
    return absl::UnimplementedError(absl::StrCat(
        "tokenizer model '", spec.model, "' is not supported by the BPE "
        "tokenizer; supported: gpt2 (byte-level BPE), llama (SentencePiece "
        "BPE), gemma4 (BPE over UTF-8 with byte fallback)"));
  }
  if (spec.tokens.empty()) return absl::InvalidArgumentError("empty vocab");
  if (!spec.token_types.empty() &&
      spec.token_types.size() != spec.tokens.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("token_types has %d entries, vocab %d",
                        spec.token_types.size(), spec.tokens.size()));
  }
  if (!spec.scores.empty() && spec.scores.size() != spec.tokens.size()) {
    return absl::InvalidArgumentError("scores size != vocab size");
  }
  const int32_t n = static_cast<int32_t>(spec.tokens.size());
  for (int32_t id : {spec.bos_id, spec.eos_id, spec.pad_id, spec.unk_id}) {
    if (id < -1 || id >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat("special id ", id, " out of range"));
    }
  }
  tokens_ = spec.tokens;
  scores_ = spec.scores;
  types_.resize(n, TokenType::kNormal);
  token_to_id_.reserve(n);
  std::fill(std::begin(byte_ids_), std::end(byte_ids_), -1);
  for (int32_t i = 0; i < n; ++i) {
    if (!spec.token_types.empty()) {
      const int32_t t = spec.token_types[i];
      if (t < 1 || t > 6) {
        return absl::InvalidArgumentError(
            absl::StrCat("token ", i, " has invalid type ", t));
      }
      types_[i] = static_cast<TokenType>(t);
    }
    // First occurrence wins, like HF when a vocab has duplicates.
    token_to_id_.emplace(tokens_[i], i);
    const std::string& tok = tokens_[i];
    const int b = ByteTokenValue(tok);
    if (b >= 0 && byte_ids_[b] < 0) byte_ids_[b] = i;
    if (IsSpecialType(types_[i]) && !tok.empty()) {
      specials_.push_back({tok, i});
      first_byte_has_special_[static_cast<uint8_t>(tok[0])] = true;
    }
  }
  std::stable_sort(specials_.begin(), specials_.end(),
                   [](const SpecialToken& a, const SpecialToken& b) {
                     return a.text.size() > b.text.size();
                   });
  merges_.reserve(spec.merges.size());
  for (size_t r = 0; r < spec.merges.size(); ++r) {
    const std::string& m = spec.merges[r];
    // Search from 1 so a left part that starts with ' ' still splits right.
    const size_t sp = m.find(' ', 1);
    if (sp == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("bad merge '", m, "'"));
    }
    auto l = token_to_id_.find(A(std::string_view(m).substr(0, sp)));
    auto rt = token_to_id_.find(A(std::string_view(m).substr(sp + 1)));
    auto merged = token_to_id_.find(
        absl::StrCat(m.substr(0, sp), m.substr(sp + 1)));
    if (l == token_to_id_.end() || rt == token_to_id_.end() ||
        merged == token_to_id_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("merge ", r, " '", m, "' uses unknown tokens"));
    }
    merges_.emplace(PairKey(l->second, rt->second),
                    MergeInfo{static_cast<int32_t>(r), merged->second});
  }
  if (byte_level_ && merges_.empty() && n > 256) {
    return absl::InvalidArgumentError("byte-level BPE without merges");
  }
  spec_ = spec;
  spec_.tokens.clear();
  spec_.token_types.clear();
  spec_.merges.clear();
  spec_.scores.clear();
  return absl::OkStatus();
}

std::optional<int32_t> BpeTokenizer::TokenToId(std::string_view token) const {
  auto it = token_to_id_.find(A(token));
  if (it == token_to_id_.end()) return std::nullopt;
  return it->second;
}

template <typename TextFn, typename SpecialFn>
void BpeTokenizer::SplitSpecial(std::string_view text, TextFn on_text,
                                SpecialFn on_special) const {
  size_t start = 0;  // Beginning of the pending plain run.
  size_t i = 0;
  while (i < text.size()) {
    if (first_byte_has_special_[static_cast<uint8_t>(text[i])]) {
      const SpecialToken* hit = nullptr;
      for (const SpecialToken& s : specials_) {
        if (text.compare(i, s.text.size(), s.text) == 0) {
          hit = &s;
          break;  // Longest first.
        }
      }
      if (hit != nullptr) {
        if (i > start) on_text(text.substr(start, i - start));
        on_special(hit->id);
        i += hit->text.size();
        start = i;
        continue;
      }
    }
    ++i;
  }
  if (start < text.size()) on_text(text.substr(start));
}

std::vector<int32_t> BpeTokenizer::Encode(std::string_view text,
                                          bool add_special_tokens,
                                          bool parse_special) const {
  std::vector<int32_t> ids;
  if (add_special_tokens && spec_.add_bos && spec_.bos_id >= 0) {
    ids.push_back(spec_.bos_id);
  }
  auto on_text = [&](std::string_view run) {
    if (byte_level_) {
      for (std::string_view word : PreTokenize(pre_, run)) {
        EncodeByteLevelWord(word, &ids);
      }
    } else {
      EncodeSentencePiece(run, &ids);
    }
  };
  if (parse_special) {
    SplitSpecial(text, on_text, [&](int32_t id) { ids.push_back(id); });
  } else if (!text.empty()) {
    on_text(text);
  }
  if (add_special_tokens && spec_.add_eos && spec_.eos_id >= 0) {
    ids.push_back(spec_.eos_id);
  }
  return ids;
}

void BpeTokenizer::MergeByRank(std::vector<int32_t>* symbols) const {
  std::vector<int32_t>& sym = *symbols;
  const int n = static_cast<int>(sym.size());
  if (n < 2) return;
  // Doubly linked list over positions; merged-away positions get id -1.
  std::vector<int> prev(n), next(n);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Cand {
    int32_t rank;
    int pos;
    int32_t left, right;  // Ids at push time, to detect stale entries.
    bool operator>(const Cand& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto push = [&](int pos) {
    if (pos < 0 || next[pos] < 0) return;
    auto it = merges_.find(PairKey(sym[pos], sym[next[pos]]));
    if (it != merges_.end()) {
      heap.push({it->second.rank, pos, sym[pos], sym[next[pos]]});
    }
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    const int r = next[c.pos];
    if (sym[c.pos] != c.left || r < 0 || sym[r] != c.right) continue;
    sym[c.pos] = merges_.find(PairKey(c.left, c.right))->second.merged_id;
    sym[r] = -1;
    next[c.pos] = next[r];
    if (next[r] >= 0) prev[next[r]] = c.pos;
    push(prev[c.pos]);
    push(c.pos);
  }
  int w = 0;
  for (int i = 0; i < n; ++i) {
    if (sym[i] >= 0) sym[w++] = sym[i];
  }
  sym.resize(w);
}

void BpeTokenizer::EncodeByteLevelWord(std::string_view word,
                                       std::vector<int32_t>* out) const {
  if (ignore_merges_) {
    auto it = token_to_id_.find(BytesToByteLevel(word));
    if (it != token_to_id_.end()) {
      out->push_back(it->second);
      return;
    }
  }
  std::vector<int32_t> sym;
  sym.reserve(word.size());
  std::string ch;
  for (char c : word) {
    ch.clear();
    AppendUtf8(ByteToCodePoint(static_cast<uint8_t>(c)), &ch);
    auto it = token_to_id_.find(A(ch));
    // Bytes missing from the vocab (SmolLM2 lacks e.g. 0x04) are dropped,
    // as HF byte-level BPE does (it has no unk token); so such text does not
    // round-trip.
    if (it != token_to_id_.end()) sym.push_back(it->second);
  }
  MergeByRank(&sym);
  out->insert(out->end(), sym.begin(), sym.end());
}

void BpeTokenizer::AppendCharOrFallback(std::string_view ch,
                                        std::vector<int32_t>* out) const {
  auto it = token_to_id_.find(A(ch));
  if (it != token_to_id_.end()) {
    out->push_back(it->second);
    return;
  }
  if (spec_.byte_fallback) {
    bool all = true;
    for (char c : ch) all = all && byte_ids_[static_cast<uint8_t>(c)] >= 0;
    if (all) {
      for (char c : ch) out->push_back(byte_ids_[static_cast<uint8_t>(c)]);
      return;
    }
  }
  if (spec_.unk_id >= 0) out->push_back(spec_.unk_id);
}

void BpeTokenizer::EncodeSentencePiece(std::string_view text,
                                       std::vector<int32_t>* out) const {
  std::string norm;
  norm.reserve(text.size() + 8);
  if (spec_.add_space_prefix) norm += kSpaceMarker;
  for (char c : text) {
    if (c == ' ') {
      norm += kSpaceMarker;
    } else {
      norm.push_back(c);
    }
  }
  if (!split_newline_runs_) {
    EncodeSentencePieceWord(norm, out);
    return;
  }
  // [^\n]+|[\n]+ ; a newline run that is a token is taken whole.
  std::string_view rest = norm;
  while (!rest.empty()) {
    const bool newlines = rest[0] == '\n';
    size_t len = 1;
    while (len < rest.size() && (rest[len] == '\n') == newlines) ++len;
    const std::string_view piece = rest.substr(0, len);
    rest.remove_prefix(len);
    if (newlines) {
      auto it = token_to_id_.find(A(piece));
      if (it != token_to_id_.end()) {
        out->push_back(it->second);
        continue;
      }
    }
    EncodeSentencePieceWord(piece, out);
  }
}

void BpeTokenizer::EncodeSentencePieceWord(std::string_view word,
                                           std::vector<int32_t>* out) const {
  const std::vector<std::string_view> chars = SplitChars(word);
  if (merges_.empty()) {
    EncodeSentencePieceByScore({chars.begin(), chars.end()}, out);
    return;
  }
  // HF BPE: unknown chars become byte-fallback symbols before merging.
  std::vector<int32_t> sym;
  sym.reserve(chars.size());
  for (std::string_view ch : chars) AppendCharOrFallback(ch, &sym);
  MergeByRank(&sym);
  out->insert(out->end(), sym.begin(), sym.end());
}

void BpeTokenizer::EncodeSentencePieceByScore(
    const std::vector<std::string>& chars, std::vector<int32_t>* out) const {
  // llama.cpp / SentencePiece BPE: repeatedly merge the adjacent pair whose
  // concatenation is in the vocab with the highest score (leftmost on ties).
  const int n = static_cast<int>(chars.size());
  std::vector<std::string> sym(chars.begin(), chars.end());
  std::vector<int> next(n), prev(n);
  std::vector<bool> alive(n, true);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Cand {
    float score;
    int pos;
    size_t len;  // Length of the concatenation at push time.
    bool operator<(const Cand& o) const {
      return score != o.score ? score < o.score : pos > o.pos;
    }
  };
  std::priority_queue<Cand> heap;
  auto push = [&](int pos) {
    if (pos < 0 || next[pos] < 0) return;
    auto it = token_to_id_.find(sym[pos] + sym[next[pos]]);
    if (it == token_to_id_.end()) return;
    const float score = scores_.empty() ? 0.f : scores_[it->second];
    heap.push({score, pos, sym[pos].size() + sym[next[pos]].size()});
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    const int r = next[c.pos];
    // Symbols only grow, so an unchanged combined length means unchanged.
    if (!alive[c.pos] || r < 0 || sym[c.pos].size() + sym[r].size() != c.len) {
      continue;
    }
    sym[c.pos] += sym[r];
    alive[r] = false;
    next[c.pos] = next[r];
    if (next[r] >= 0) prev[next[r]] = c.pos;
    push(prev[c.pos]);
    push(c.pos);
  }
  for (int i = 0; i < n; ++i) {
    if (!alive[i]) continue;
    auto it = token_to_id_.find(sym[i]);
    if (it != token_to_id_.end()) {
      out->push_back(it->second);
    } else {
      for (std::string_view ch : SplitChars(sym[i])) {
        AppendCharOrFallback(ch, out);
      }
    }
  }
}

bool BpeTokenizer::IsSkipped(int32_t id, bool skip_special_tokens) const {
  return skip_special_tokens &&
         (types_[id] == TokenType::kControl || types_[id] == TokenType::kUnknown);
}

void BpeTokenizer::AppendTokenBytes(int32_t id, bool skip_special_tokens,
                                    std::string* out) const {
  const TokenType type = types_[id];
  if (IsSkipped(id, skip_special_tokens)) return;
  const std::string& tok = tokens_[id];
  if (type == TokenType::kControl || type == TokenType::kUserDefined ||
      type == TokenType::kUnknown) {
    *out += tok;  // Added tokens decode to their literal text.
    return;
  }
  if (byte_level_) {
    if (!ByteLevelToBytes(tok, out)) *out += tok;
    return;
  }
  if (const int b = ByteTokenValue(tok); b >= 0 && byte_ids_[b] == id) {
    out->push_back(static_cast<char>(b));
    return;
  }
  size_t pos = 0;
  while (pos < tok.size()) {
    const size_t hit = tok.find(kSpaceMarker, pos);
    if (hit == std::string::npos) {
      out->append(tok, pos, std::string::npos);
      break;
    }
    out->append(tok, pos, hit - pos);
    out->push_back(' ');
    pos = hit + kSpaceMarker.size();
  }
}

int BpeTokenizer::FallbackByte(int32_t id) const {
  if (byte_level_) return -1;
  const int b = ByteTokenValue(tokens_[id]);
  return b >= 0 && byte_ids_[b] == id ? b : -1;
}

void BpeTokenizer::EndByteRun(std::string* run, std::string* out) {
  if (IsValidUtf8(*run)) {
    out->append(*run);
  } else {
    for (size_t i = 0; i < run->size(); ++i) out->append("\xEF\xBF\xBD");
  }
  run->clear();
}

void BpeTokenizer::AppendDecodedToken(int32_t id, bool skip_special_tokens, std::string* run,
                                      std::string* out) const {
  if (IsSkipped(id, skip_special_tokens)) return;
  if (const int b = FallbackByte(id); b >= 0) {
    run->push_back(static_cast<char>(b));
    return;
  }
  EndByteRun(run, out);
  AppendTokenBytes(id, skip_special_tokens, out);
}

absl::StatusOr<std::string> BpeTokenizer::Decode(
    absl::Span<const int32_t> ids, bool skip_special_tokens) const {
  std::string bytes;
  std::string run;  // consecutive byte-fallback bytes not yet appended
  for (int32_t id : ids) {
    if (!IsValidId(id)) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", id, " out of range [0, ", vocab_size(),
                       ")"));
    }
    AppendDecodedToken(id, skip_special_tokens, &run, &bytes);
  }
  EndByteRun(&run, &bytes);
  std::string_view view = bytes;
  if (strip_leading_space_ && !view.empty() && view[0] == ' ') {
    view.remove_prefix(1);
  }
  return Utf8Lossy(view);
}

}  // namespace rill::tokenizer
