#include "engine/step_profiler.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace rill::engine {

absl::Status StepProfiler::Start(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("profile directory must not be empty");
  if (access(dir.c_str(), W_OK) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("profile directory '", dir, "' is not writable: ", strerror(errno)));
  }
  absl::MutexLock lock(&mu_);
  if (active_) return absl::FailedPreconditionError("a profile is already running");
  active_ = true;
  dir_ = dir;
  started_ = absl::Now();
  steps_.clear();
  return absl::OkStatus();
}

bool StepProfiler::active() const {
  absl::MutexLock lock(&mu_);
  return active_;
}

void StepProfiler::RecordStep(absl::Time start, absl::Duration duration, int num_seqs,
                              int64_t num_tokens) {
  absl::MutexLock lock(&mu_);
  if (!active_) return;
  steps_.push_back({start, duration, num_seqs, num_tokens});
}

absl::StatusOr<std::string> StepProfiler::Stop() {
  absl::MutexLock lock(&mu_);
  if (!active_) return absl::FailedPreconditionError("no profile is running");
  active_ = false;
  const std::string path =
      absl::StrCat(dir_, "/rill-engine-trace-", getpid(), "-", traces_written_++, ".json");
  std::ofstream out(path);
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  // Chrome trace event format: complete events ("ph":"X"), microseconds.
  out << "{\"traceEvents\":[";
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step& s = steps_[i];
    out << (i ? "," : "")
        << absl::StrFormat(
               "{\"name\":\"step\",\"ph\":\"X\",\"pid\":%d,\"tid\":1,\"ts\":%.3f,\"dur\":%.3f,"
               "\"args\":{\"num_seqs\":%d,\"num_tokens\":%d}}",
               getpid(), absl::ToDoubleMicroseconds(s.start - started_),
               absl::ToDoubleMicroseconds(s.duration), s.num_seqs, s.num_tokens);
  }
  out << "],\"displayTimeUnit\":\"ms\"}\n";
  steps_.clear();
  if (!out.good()) return absl::InternalError(absl::StrCat("write failed: ", path));
  return path;
}

}  // namespace rill::engine
