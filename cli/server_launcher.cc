#include "cli/server_launcher.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include <glog/logging.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace rill::cli {
namespace {

constexpr int kMaxRestartsPerMinute = 5;

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

absl::StatusOr<int> ServerLauncher::WaitForPort(Child* child) {
  const absl::Time deadline = absl::Now() + options_.start_timeout;
  while (absl::Now() < deadline) {
    const std::string text(absl::StripAsciiWhitespace(ReadFile(child->port_file)));
    int port = 0;
    if (!text.empty() && absl::SimpleAtoi(text, &port) && port > 0) return port;
    absl::StatusOr<int> exited = child->process->Wait(absl::ZeroDuration());
    if (exited.ok()) {
      return absl::UnavailableError(absl::StrCat(child->name, " exited (",
                                                 base::DescribeExitCode(*exited),
                                                 ") before it was listening"));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError(
      absl::StrCat(child->name, " did not listen within ", absl::FormatDuration(options_.start_timeout)));
}

absl::Status ServerLauncher::Start() {
  if (options_.num_frontends < 1) return absl::InvalidArgumentError("--frontends must be >= 1");
  if (options_.engine_binary.empty() || options_.frontend_binary.empty()) {
    return absl::NotFoundError("rill-engine / rill-frontend binaries not found (build them, or "
                               "pass --engine_binary / --frontend_binary)");
  }
  started_ = true;
  engine_.name = "engine";
  engine_.port_file = absl::StrCat(options_.run_dir, "/engine.port");
  engine_.argv = {options_.engine_binary, "--host=127.0.0.1", "--port=0",
                  "--port_file=" + engine_.port_file};
  for (const std::string& f : options_.engine_flags) engine_.argv.push_back(f);
  absl::Status s = StartChild(&engine_);
  absl::StatusOr<int> engine_port = s.ok() ? WaitForPort(&engine_) : absl::StatusOr<int>(s);
  if (!engine_port.ok()) {
    Stop();
    return engine_port.status();
  }
  engine_port_ = *engine_port;
  // Restarts reuse the same port so frontends reconnect to the same address.
  engine_.argv[2] = absl::StrCat("--port=", engine_port_);

  client_port_ = options_.port;
  for (int i = 0; i < options_.num_frontends; ++i) {
    Child& fe = frontends_.emplace_back();
    fe.name = absl::StrCat("frontend-", i);
    fe.port_file = absl::StrCat(options_.run_dir, "/", fe.name, ".port");
    fe.argv = {options_.frontend_binary,
               "--host=" + options_.host,
               absl::StrCat("--port=", client_port_),
               "--port_file=" + fe.port_file,
               absl::StrCat("--engine=127.0.0.1:", engine_port_),
               absl::StrCat("--frontend_id=", i)};
    for (const std::string& f : options_.frontend_flags) fe.argv.push_back(f);
    s = StartChild(&fe);
    absl::StatusOr<int> port = s.ok() ? WaitForPort(&fe) : absl::StatusOr<int>(s);
    if (!port.ok()) {
      Stop();
      return port.status();
    }
    // The first frontend may have picked the port (--port=0); the rest share it.
    client_port_ = *port;
    fe.argv[2] = absl::StrCat("--port=", client_port_);
  }
  return absl::OkStatus();
}

absl::Status ServerLauncher::Supervise() {
  std::vector<Child*> all = {&engine_};
  for (Child& fe : frontends_) all.push_back(&fe);
  for (Child* c : all) {
    if (c->process == nullptr || !c->process->running()) continue;
    absl::StatusOr<int> exited = c->process->Wait(absl::ZeroDuration());
    if (!exited.ok()) continue;
    LOG(WARNING) << c->name << " exited unexpectedly (" << base::DescribeExitCode(*exited) << ")";
    if (!options_.restart) {
      return absl::UnavailableError(
          absl::StrCat(c->name, " exited (", base::DescribeExitCode(*exited), ")"));
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

void ServerLauncher::Stop(absl::Duration grace) {
  if (!started_) return;
  started_ = false;
  auto stop = [grace](Child* c) {
    if (c->process == nullptr || !c->process->running()) return;
    const pid_t group = c->process->pid();
    absl::StatusOr<int> code = c->process->Stop(SIGTERM, grace);
    if (!code.ok()) {
      LOG(WARNING) << c->name << " ignored SIGTERM for " << absl::FormatDuration(grace)
                   << "; killing it";
      c->process->SignalGroup(SIGKILL);
      (void)c->process->Wait(absl::Seconds(5));
    } else {
      LOG(INFO) << c->name << " stopped (" << base::DescribeExitCode(*code) << ")";
    }
    // Whatever it started in its own group goes with it.
    kill(-group, SIGKILL);
  };
  stop(&engine_);
  for (Child& fe : frontends_) stop(&fe);
}

}  // namespace rill::cli
