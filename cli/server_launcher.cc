#include "cli/server_launcher.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include <glog/logging.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "cli/engine_restarts_flag.h"
#include "base/exit_message.h"
#include "base/secret_file.h"

namespace rill::cli {
namespace {

constexpr int kMaxRestartsPerMinute = 5;
// What a draining frontend needs beyond the grace: ending the rest with
// ABORT, delivering that (1 s) and exiting.
constexpr absl::Duration kDrainSlack = absl::Seconds(5);
// How long the engine may take to abort what runs and exit on SIGTERM.
constexpr absl::Duration kEngineStopTimeout = absl::Seconds(15);

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Dirname(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace

std::string FindRillBinary(const std::string& name, const std::string& bazel_package) {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  buf[n] = '\0';
  const std::string dir = Dirname(buf);
  // Installed layout (container images): all binaries in one folder.
  std::string candidate = absl::StrCat(dir, "/", name);
  if (access(candidate.c_str(), X_OK) == 0) return candidate;
  // Bazel layout: this binary is bazel-bin/cli/rill.
  candidate = absl::StrCat(Dirname(dir), "/", bazel_package, "/", name);
  if (access(candidate.c_str(), X_OK) == 0) return candidate;
  return "";
}

ServerLauncher::~ServerLauncher() {
  if (started_) Stop();
}

std::string ServerLauncher::address() const {
  return absl::StrCat(options_.host, ":", client_port_);
}

absl::Status ServerLauncher::StartChild(Child* child, const std::string& restart_reason) {
  std::remove(child->port_file.c_str());
  if (!child->exit_message_file.empty()) std::remove(child->exit_message_file.c_str());
  child->process = std::make_unique<base::ChildProcess>();
  base::ChildOptions opts;
  if (options_.log_to_files) {
    opts.log_path = absl::StrCat(options_.run_dir, "/", child->name, ".log");
    if (!restart_reason.empty()) {
      // The log of the process that died is the one worth reading: keep it.
      opts.append_log = true;
      std::ofstream(opts.log_path, std::ios::app)
          << "\n==== rill serve: restarting " << child->name << " at "
          << absl::FormatTime(absl::Now(), absl::UTCTimeZone()) << " UTC: " << restart_reason
          << " ====\n";
    }
  }
  if (absl::Status s = child->process->Start(child->argv, opts); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("starting ", child->name, ": ", s.message()));
  }
  LOG(INFO) << "started " << child->name << " (pid " << child->process->pid() << ")";
  return absl::OkStatus();
}

absl::Status ServerLauncher::ExitError(const Child& child, int code,
                                       const std::string& when) const {
  if (code == base::kExitBadConfiguration) {
    std::string reason;
    if (!child.exit_message_file.empty()) reason = base::ReadExitMessage(child.exit_message_file);
    if (reason.empty()) reason = "bad flag or file (exit code 2)";
    return absl::FailedPreconditionError(absl::StrCat(child.name, " cannot start: ", reason));
  }
  std::string logs = options_.log_to_files
                         ? absl::StrCat("; see ", options_.run_dir, "/", child.name, ".log")
                         : "; see its log above";
  return absl::UnavailableError(
      absl::StrCat(child.name, " exited (", base::DescribeExitCode(code), ") ", when, logs));
}

absl::StatusOr<int> ServerLauncher::WaitForPort(Child* child,
                                                const std::function<bool()>& interrupted) {
  const absl::Time deadline = absl::Now() + options_.start_timeout;
  while (absl::Now() < deadline) {
    const std::string text(absl::StripAsciiWhitespace(ReadFile(child->port_file)));
    int port = 0;
    if (!text.empty() && absl::SimpleAtoi(text, &port) && port > 0) return port;
    absl::StatusOr<int> exited = child->process->Wait(absl::ZeroDuration());
    if (exited.ok()) return ExitError(*child, *exited, "before it was listening");
    // A frontend listens only once the engine has loaded the model: when the
    // engine fails, its reason is the one to report.
    if (child != &engine_ && engine_.process != nullptr) {
      exited = engine_.process->Wait(absl::ZeroDuration());
      if (exited.ok()) return ExitError(engine_, *exited, "while the frontends were starting");
    }
    if (interrupted && interrupted()) return absl::CancelledError("interrupted during start-up");
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      child->name, " did not listen within ", absl::FormatDuration(options_.start_timeout),
      child == &engine_ ? "" : " (the engine may still be loading the model)"));
}

absl::Status ServerLauncher::WriteCredentials(std::vector<std::string>* engine_argv,
                                              std::vector<std::string>* frontend_argv) {
  absl::StatusOr<std::string> secret = base::NewRandomSecret();
  if (!secret.ok()) return secret.status();
  struct Credential {
    const char* flag;
    const char* file;
    std::string value;
  };
  std::vector<Credential> credentials = {{"engine_secret_file", "engine.secret", *secret}};
  if (!options_.admin_token.empty()) {
    credentials.push_back({"admin_token_file", "admin.token", options_.admin_token});
  }
  for (const auto& [flag, file, value] : credentials) {
    const std::string path = absl::StrCat(options_.run_dir, "/", file);
    if (absl::Status s = base::WriteSecretFile(path, value); !s.ok()) return s;
    credential_files_.push_back(path);
    engine_argv->push_back(absl::StrCat("--", flag, "=", path));
    frontend_argv->push_back(absl::StrCat("--", flag, "=", path));
  }
  return absl::OkStatus();
}

absl::Status ServerLauncher::Start(const std::function<bool()>& interrupted) {
  if (options_.num_frontends < 1) return absl::InvalidArgumentError("--frontends must be >= 1");
  if (options_.engine_binary.empty() || options_.frontend_binary.empty()) {
    return absl::NotFoundError("rill-engine / rill-frontend binaries not found (build them, or "
                               "pass --engine_binary / --frontend_binary)");
  }
  // First, so a second server on this port fails before loading anything.
  absl::StatusOr<base::PortReservation> reservation =
      base::PortReservation::Reserve(options_.host, options_.port);
  if (!reservation.ok()) return reservation.status();
  client_port_reservation_ = std::move(*reservation);
  client_port_ = client_port_reservation_.port();

  started_ = true;
  engine_.name = "engine";
  engine_.port_file = absl::StrCat(options_.run_dir, "/engine.port");
  engine_.exit_message_file = absl::StrCat(options_.run_dir, "/engine.exit");
  engine_.argv = {options_.engine_binary, "--host=127.0.0.1", "--port=0",
                  "--port_file=" + engine_.port_file,
                  "--termination_message_path=" + engine_.exit_message_file};
  std::vector<std::string> frontend_credentials;
  absl::Status s = WriteCredentials(&engine_.argv, &frontend_credentials);
  if (!s.ok()) {
    Stop(/*immediately=*/true);
    return s;
  }
  if (options_.metrics_port > 0) {
    engine_.argv.push_back(absl::StrCat("--metrics_port=", options_.metrics_port));
  }
  for (const std::string& f : options_.engine_flags) engine_.argv.push_back(f);
  s = StartChild(&engine_);
  absl::StatusOr<int> engine_port = s.ok() ? WaitForPort(&engine_, interrupted)
                                           : absl::StatusOr<int>(s);
  if (!engine_port.ok()) {
    Stop(/*immediately=*/true);
    return engine_port.status();
  }
  engine_port_ = *engine_port;
  // Restarts reuse the same port so frontends reconnect to the same address.
  engine_.argv[2] = absl::StrCat("--port=", engine_port_);

  for (int i = 0; i < options_.num_frontends; ++i) {
    Child& fe = frontends_.emplace_back();
    fe.name = absl::StrCat("frontend-", i);
    fe.port_file = absl::StrCat(options_.run_dir, "/", fe.name, ".port");
    fe.argv = {options_.frontend_binary,
               "--host=" + options_.host,
               absl::StrCat("--port=", client_port_),
               "--reuse_port",
               "--port_file=" + fe.port_file,
               absl::StrCat("--engine=127.0.0.1:", engine_port_),
               absl::StrCat("--frontend_id=", i),
               absl::StrCat("--shutdown_grace_ms=",
                            absl::ToInt64Milliseconds(options_.shutdown_grace))};
    for (const std::string& f : frontend_credentials) fe.argv.push_back(f);
    if (options_.metrics_port > 0) {
      fe.argv.push_back(absl::StrCat("--metrics_port=", options_.metrics_port + 1 + i));
    }
    for (const std::string& f : options_.frontend_flags) fe.argv.push_back(f);
    s = StartChild(&fe);
    absl::StatusOr<int> port = s.ok() ? WaitForPort(&fe, interrupted) : absl::StatusOr<int>(s);
    if (!port.ok()) {
      Stop(/*immediately=*/true);
      return port.status();
    }
  }
  return absl::OkStatus();
}

absl::Status ServerLauncher::Supervise() {
  if (draining_) return absl::OkStatus();  // Frontends exit on purpose now.
  std::vector<Child*> all = {&engine_};
  for (Child& fe : frontends_) all.push_back(&fe);
  for (Child* c : all) {
    if (c->process == nullptr || !c->process->running()) continue;
    absl::StatusOr<int> exited = c->process->Wait(absl::ZeroDuration());
    if (!exited.ok()) continue;
    LOG(WARNING) << c->name << " exited unexpectedly (" << base::DescribeExitCode(*exited) << ")";
    if (!options_.restart || *exited == base::kExitBadConfiguration) {
      return ExitError(*c, *exited, "while serving");
    }
    const absl::Time now = absl::Now();
    std::vector<absl::Time> recent;
    for (absl::Time t : c->restarts) {
      if (now - t < absl::Minutes(1)) recent.push_back(t);
    }
    if (static_cast<int>(recent.size()) >= kMaxRestartsPerMinute) {
      return absl::UnavailableError(absl::StrCat(c->name, " died ", kMaxRestartsPerMinute,
                                                 " times within a minute; giving up"));
    }
    recent.push_back(now);
    c->restarts = std::move(recent);
    if (c == &engine_) SetEngineRestartsFlag(++engine_restarts_, &engine_.argv);
    absl::SleepFor(absl::Milliseconds(200) * static_cast<int>(c->restarts.size()));
    if (absl::Status s = StartChild(
            c, absl::StrCat("the previous one exited (", base::DescribeExitCode(*exited), ")"));
        !s.ok()) {
      return s;
    }
    LOG(INFO) << "restarted " << c->name;
  }
  return absl::OkStatus();
}

void ServerLauncher::BeginDrain() {
  if (draining_) return;
  draining_ = true;
  drain_deadline_ = absl::Now() + options_.shutdown_grace + kDrainSlack;
  for (Child& fe : frontends_) {
    if (fe.process == nullptr || !fe.process->running()) continue;
    // One that is not listening yet has no clients, and takes SIGTERM only
    // once it is (it blocks the signal while waiting for the engine).
    const bool listening = !ReadFile(fe.port_file).empty();
    kill(fe.process->pid(), listening ? SIGTERM : SIGKILL);
  }
}

bool ServerLauncher::Drained() {
  for (Child& fe : frontends_) {
    if (fe.process == nullptr || !fe.process->running()) continue;
    if (!fe.process->Wait(absl::ZeroDuration()).ok()) return false;
    LOG(INFO) << fe.name << " stopped (" << base::DescribeExitCode(fe.process->exit_code()) << ")";
  }
  return true;
}

void ServerLauncher::StopChild(Child* c, bool send_sigterm, absl::Duration wait) {
  if (c->process == nullptr) return;
  const pid_t group = c->process->pid();
  if (c->process->running()) {
    absl::StatusOr<int> code = send_sigterm ? c->process->Stop(SIGTERM, wait)
                                            : c->process->Wait(wait);
    if (!code.ok()) {
      LOG(WARNING) << c->name << " still running after " << absl::FormatDuration(wait)
                   << "; killing it";
      c->process->SignalGroup(SIGKILL);
      (void)c->process->Wait(absl::Seconds(5));
    } else {
      LOG(INFO) << c->name << " stopped (" << base::DescribeExitCode(*code) << ")";
    }
  }
  // Whatever it started in its own group goes with it.
  if (group > 0) kill(-group, SIGKILL);
}

void ServerLauncher::Stop(bool immediately) {
  if (!started_) return;
  started_ = false;
  BeginDrain();
  if (!immediately) {
    while (!Drained() && absl::Now() < drain_deadline_) absl::SleepFor(absl::Milliseconds(20));
  }
  // What still runs now ends with finish_reason ABORT (the frontends that
  // still drain forward it, then exit).
  StopChild(&engine_, /*send_sigterm=*/true, kEngineStopTimeout);
  for (Child& fe : frontends_) StopChild(&fe, /*send_sigterm=*/false, kDrainSlack);
  client_port_reservation_.Release();
  for (const std::string& path : credential_files_) std::remove(path.c_str());
  credential_files_.clear();
}

}  // namespace rill::cli
