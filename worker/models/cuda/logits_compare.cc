#include "worker/models/cuda/logits_compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "glog/logging.h"

namespace rill::worker {

double LogitStats::Mean() const {
  double s = 0;
  for (double e : rel_l2) s += e;
  return rel_l2.empty() ? 0 : s / rel_l2.size();
}

double LogitStats::Max() const {
  return rel_l2.empty() ? 0 : *std::max_element(rel_l2.begin(), rel_l2.end());
}

double LogitStats::Top1() const {
  return rel_l2.empty() ? 0 : static_cast<double>(agree) / rel_l2.size();
}

bool LogitStats::Pass() const {
  return finite && !rel_l2.empty() && Mean() < kMaxMeanRelL2 && Top1() >= kMinTop1;
}

int ArgMax(const float* x, int n) { return static_cast<int>(std::max_element(x, x + n) - x); }

void CompareLogits(const std::vector<float>& got, const std::vector<float>& want, int vocab,
                   LogitStats* stats) {
  CHECK_EQ(got.size(), want.size());
  for (size_t r = 0; r * vocab < want.size(); ++r) {
    const float* g = got.data() + r * vocab;
    const float* c = want.data() + r * vocab;
    double num = 0, den = 0;
    for (int i = 0; i < vocab; ++i) {
      if (!std::isfinite(g[i])) stats->finite = false;
      num += (static_cast<double>(g[i]) - c[i]) * (static_cast<double>(g[i]) - c[i]);
      den += static_cast<double>(c[i]) * c[i];
    }
    stats->rel_l2.push_back(std::sqrt(num / std::max(den, 1e-30)));
    if (ArgMax(g, vocab) == ArgMax(c, vocab)) ++stats->agree;
  }
}

void PrintLogitStats(const char* what, const LogitStats& s) {
  printf("%-8s %4zu rows  rel L2 mean %.3e  max %.3e  top-1 agreement %5.1f%%  %s%s\n", what,
         s.rel_l2.size(), s.Mean(), s.Max(), 100 * s.Top1(), s.Pass() ? "PASS" : "FAIL",
         s.finite ? "" : " (non-finite GPU logits)");
}

}  // namespace rill::worker
