#include "engine/spec_decode/draft_length.h"

#include <algorithm>

namespace rill::engine::spec_decode {

int NextDraftLength(int current, int proposed, int accepted, int max_k) {
  const int next = accepted >= proposed ? 2 * current : accepted + 1;
  return std::clamp(next, 1, std::max(max_k, 1));
}

}  // namespace rill::engine::spec_decode
