#include "cli/engine_replicas.h"

#include <signal.h>

#include <algorithm>
#include <fstream>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "cli/engine_restarts_flag.h"
#include "base/exit_message.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include <grpcpp/grpcpp.h>

namespace rill::cli {
namespace {

// Restarts further back than this no longer lengthen the backoff.
constexpr absl::Duration kBackoffMemory = absl::Minutes(10);

// The replica's overall grpc.health.v1 status is SERVING (model loaded).
bool Serving(const std::string& address) {
  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  grpc::health::v1::HealthCheckResponse resp;
  return stub->Check(&ctx, grpc::health::v1::HealthCheckRequest(), &resp).ok() &&
         resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
}

}  // namespace

absl::Status EngineReplicas::Launch(Replica* r, bool restart) {
  base::ChildOptions child;
  child.log_path = r->log;
  if (restart && !r->log.empty()) {
    // The log of the process that died is the one worth reading: keep it.
    child.append_log = true;
    std::ofstream(r->log, std::ios::app)
        << "\n==== rill serve: restarting engine replica " << r->index << " at "
        << absl::FormatTime(absl::Now(), absl::UTCTimeZone()) << " UTC ====\n";
  }
  r->process = std::make_unique<base::ChildProcess>();
  return r->process->Start(r->argv, child);
}

absl::Status EngineReplicas::Start(const EngineReplicaOptions& options) {
  options_ = options;
  for (int i = 1; i <= options.count; ++i) {
    Replica& r = replicas_.emplace_back();
    r.index = i;
    r.port_file = absl::StrCat(options.run_dir, "/engine-", i, ".port");
    std::remove(r.port_file.c_str());
    r.argv = {options.engine_binary, "--host=127.0.0.1", "--port=0", "--port_file=" + r.port_file,
              "--engine_secret_file=" + options.secret_file};
    for (const std::string& f : options.engine_flags) r.argv.push_back(f);
    if (options.log_to_files) r.log = absl::StrCat(options.run_dir, "/engine-", i, ".log");
    if (absl::Status s = Launch(&r, /*restart=*/false); !s.ok()) return s;
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  for (Replica& r : replicas_) {
    int port = 0;
    while (port == 0) {
      std::ifstream in(r.port_file);
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &port)) port = 0;
      if (port != 0) break;
      if (r.process->Wait(absl::ZeroDuration()).ok()) {
        return absl::FailedPreconditionError(
            absl::StrCat("engine replica ", r.index, " exited before it listened"));
      }
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat("engine replica ", r.index, " did not listen within 60s"));
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
    addresses_.push_back(absl::StrCat("127.0.0.1:", port));
    // A restart listens where the gateway already sends this replica's requests.
    r.argv[2] = absl::StrCat("--port=", port);
  }
  // The gateway reads each engine's model (name, tokenizer) when it
  // registers it: a replica still loading would be registered without one.
  const absl::Time loaded_by = absl::Now() + absl::Seconds(120);
  for (size_t i = 0; i < replicas_.size(); ++i) {
    while (!Serving(addresses_[i])) {
      if (replicas_[i].process->Wait(absl::ZeroDuration()).ok()) {
        return absl::FailedPreconditionError(
            absl::StrCat("engine replica ", i + 1, " exited while loading the model"));
      }
      if (absl::Now() > loaded_by) {
        return absl::DeadlineExceededError(
            absl::StrCat("engine replica ", i + 1, " did not load the model within 120s"));
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
  }
  return absl::OkStatus();
}

void EngineReplicas::OnExit(Replica* r, int code) {
  const std::string& address = addresses_[r->index - 1];
  if (code == base::kExitBadConfiguration) {
    r->state = State::kGivenUp;
    std::cerr << "rill serve: engine replica " << r->index << " (" << address
              << ") cannot start with this configuration (exit code 2); left out" << std::endl;
    return;
  }
  const absl::Time now = absl::Now();
  r->restarts.erase(std::remove_if(r->restarts.begin(), r->restarts.end(),
                                   [now](absl::Time t) { return now - t > kBackoffMemory; }),
                    r->restarts.end());
  absl::Duration backoff = options_.first_backoff;
  for (size_t k = 0; k < r->restarts.size() && backoff < options_.max_backoff; ++k) backoff *= 2;
  backoff = std::min(backoff, options_.max_backoff);
  r->state = State::kWaitingToRestart;
  r->restart_at = now + backoff;
  std::cerr << "rill serve: engine replica " << r->index << " (" << address << ") exited ("
            << base::DescribeExitCode(code) << "); the gateway routes around it; restarting in "
            << absl::FormatDuration(backoff) << std::endl;
}

void EngineReplicas::Supervise() {
  const absl::Time now = absl::Now();
  for (Replica& r : replicas_) {
    const std::string& address = addresses_[r.index - 1];
    if (r.state == State::kServing || r.state == State::kLoading) {
      absl::StatusOr<int> code = r.process->Wait(absl::ZeroDuration());
      if (code.ok()) {
        OnExit(&r, *code);
        continue;
      }
    }
    if (r.state == State::kWaitingToRestart && now >= r.restart_at) {
      r.restarts.push_back(now);
      SetEngineRestartsFlag(++r.total_restarts, &r.argv);
      if (absl::Status s = Launch(&r, /*restart=*/true); !s.ok()) {
        std::cerr << "rill serve: restarting engine replica " << r.index << ": " << s.message()
                  << std::endl;
        OnExit(&r, 1);
        continue;
      }
      r.state = State::kLoading;
      std::cerr << "rill serve: restarted engine replica " << r.index << " (pid "
                << r.process->pid() << ") on " << address << std::endl;
    } else if (r.state == State::kLoading && Serving(address)) {
      r.state = State::kServing;
      std::cerr << "rill serve: engine replica " << r.index << " is serving again" << std::endl;
    }
  }
}

void EngineReplicas::Stop() {
  for (Replica& r : replicas_) {
    if (r.process != nullptr && r.process->running()) (void)r.process->Stop(SIGTERM, absl::Seconds(10));
  }
}

}  // namespace rill::cli
