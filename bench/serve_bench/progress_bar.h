// A progress bar on stderr while a run goes: redrawn in place on a terminal,
// one line per 10% otherwise (so CI logs stay short). Thread-safe.
#ifndef RILL_BENCH_SERVE_BENCH_PROGRESS_BAR_H_
#define RILL_BENCH_SERVE_BENCH_PROGRESS_BAR_H_

#include <cstdint>
#include <mutex>
#include <string>

namespace rill::bench {

class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total, bool interactive);
  void Add(bool ok, int64_t output_tokens);
  void Finish();
  // The line as it would be drawn (for tests).
  std::string Render() const;

 private:
  mutable std::mutex mu_;
  std::string label_;
  int64_t total_;
  bool interactive_;
  int64_t done_ = 0, errors_ = 0, tokens_ = 0;
  int last_decile_ = -1;
  double start_s_;
};

// True when stderr is a terminal.
bool StderrIsTerminal();

}  // namespace rill::bench

#endif  // RILL_BENCH_SERVE_BENCH_PROGRESS_BAR_H_
