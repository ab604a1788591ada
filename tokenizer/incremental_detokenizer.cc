#include "tokenizer/incremental_detokenizer.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tokenizer/unicode_data.h"

namespace rill::tokenizer {

IncrementalDetokenizer::IncrementalDetokenizer(const BpeTokenizer* tokenizer,
                                               bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

absl::StatusOr<std::string> IncrementalDetokenizer::Push(int32_t id) {
  if (!tokenizer_->IsValidId(id)) {
    return absl::InvalidArgumentError(absl::StrCat("token id ", id,
                                                   " out of range"));
  }
  std::string bytes;
  tokenizer_->AppendDecodedToken(id, skip_special_tokens_, &run_, &bytes);
  return Release(bytes, /*final=*/false);
}

std::string IncrementalDetokenizer::Release(std::string_view bytes, bool final) {
  const size_t before = pending_.size();
  pending_.append(bytes);
  if (at_start_ && pending_.size() > before) {
    // Decode strips one ' ' from the very start of the whole output only.
    at_start_ = false;
    if (tokenizer_->strips_leading_space() && pending_[0] == ' ') {
      pending_.erase(0, 1);
    }
  }
  size_t consumed = 0;
  std::string delta = Utf8Lossy(pending_, final, &consumed);
  pending_.erase(0, final ? pending_.size() : consumed);
  return delta;
}

std::string IncrementalDetokenizer::Flush() {
  std::string bytes;
  BpeTokenizer::EndByteRun(&run_, &bytes);
  std::string out = Release(bytes, /*final=*/true);
  pending_.clear();
  at_start_ = true;
  return out;
}

}  // namespace rill::tokenizer
