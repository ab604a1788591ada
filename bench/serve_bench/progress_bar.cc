#include "bench/serve_bench/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace rill::bench {
namespace {

double NowS() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

bool StderrIsTerminal() { return isatty(STDERR_FILENO) == 1; }

ProgressBar::ProgressBar(std::string label, int64_t total, bool interactive)
    : label_(std::move(label)), total_(std::max<int64_t>(total, 1)), interactive_(interactive),
      start_s_(NowS()) {}

std::string ProgressBar::Render() const {
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * std::min(done_, total_) / total_);
  const double elapsed = NowS() - start_s_;
  return absl::StrFormat("%s [%s%s] %d/%d req, %d err, %.1f out tok/s, %.0fs", label_,
                         std::string(filled, '#'), std::string(kWidth - filled, '.'), done_, total_,
                         errors_, elapsed > 0 ? tokens_ / elapsed : 0.0, elapsed);
}

void ProgressBar::Add(bool ok, int64_t output_tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  ++done_;
  if (!ok) ++errors_;
  tokens_ += output_tokens;
  if (interactive_) {
    std::fprintf(stderr, "\r%s", Render().c_str());
    std::fflush(stderr);
    return;
  }
  const int decile = static_cast<int>(10 * std::min(done_, total_) / total_);
  if (decile != last_decile_) {
    last_decile_ = decile;
    std::fprintf(stderr, "%s\n", Render().c_str());
  }
}

void ProgressBar::Finish() {
  std::lock_guard<std::mutex> lock(mu_);
  if (interactive_) std::fprintf(stderr, "\r%s\n", Render().c_str());
}

}  // namespace rill::bench
