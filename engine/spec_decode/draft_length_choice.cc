#include "engine/spec_decode/draft_length_choice.h"

#include <algorithm>
#include <cstddef>

namespace rill::engine::spec_decode {

std::vector<int> ChooseDraftLengths(const std::vector<std::vector<double>>& accept,
                                    double base_tokens,
                                    const std::function<double(int)>& step_seconds,
                                    double rate) {
  struct Candidate {
    double gain;  // Expected tokens it adds: the chance it and those before are accepted.
    size_t proposal;
    int position;
  };
  std::vector<Candidate> all;
  for (size_t i = 0; i < accept.size(); ++i) {
    double reach = 1.0;
    for (size_t j = 0; j < accept[i].size(); ++j) {
      reach *= accept[i][j];
      all.push_back({reach, i, static_cast<int>(j)});
    }
  }
  // Likeliest first; on a tie the earlier position, so a draft's tokens come
  // in order (its gains never rise along it).
  std::stable_sort(all.begin(), all.end(), [](const Candidate& a, const Candidate& b) {
    if (a.gain != b.gain) return a.gain > b.gain;
    return a.position < b.position;
  });
  const double base_seconds = step_seconds(0);
  if (rate <= 0.0) rate = base_tokens / std::max(base_seconds, 1e-12);
  // Expected tokens gained minus what the extra seconds would have given at
  // the long-run rate.
  double gained = 0.0, best_value = 0.0;
  size_t best_m = 0;
  for (size_t m = 1; m <= all.size(); ++m) {
    gained += all[m - 1].gain;
    const double value = gained - rate * (step_seconds(static_cast<int>(m)) - base_seconds);
    if (value > best_value) {
      best_value = value;
      best_m = m;
    }
  }
  std::vector<int> lengths(accept.size(), 0);
  for (size_t m = 0; m < best_m; ++m) {
    lengths[all[m].proposal] = std::max(lengths[all[m].proposal], all[m].position + 1);
  }
  return lengths;
}

}  // namespace rill::engine::spec_decode
