#include "cli/engine_replicas.h"

#include <signal.h>

#include <fstream>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include <grpcpp/grpcpp.h>

namespace rill::cli {
namespace {

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

absl::Status EngineReplicas::Start(const EngineReplicaOptions& options) {
  std::vector<std::string> port_files;
  for (int i = 1; i <= options.count; ++i) {
    const std::string port_file = absl::StrCat(options.run_dir, "/engine-", i, ".port");
    std::remove(port_file.c_str());
    std::vector<std::string> argv = {options.engine_binary, "--host=127.0.0.1", "--port=0",
                                     "--port_file=" + port_file,
                                     "--engine_secret_file=" + options.secret_file};
    for (const std::string& f : options.engine_flags) argv.push_back(f);
    auto process = std::make_unique<base::ChildProcess>();
    const std::string log =
        options.log_to_files ? absl::StrCat(options.run_dir, "/engine-", i, ".log") : "";
    if (absl::Status s = process->Start(argv, log); !s.ok()) return s;
    processes_.push_back(std::move(process));
    port_files.push_back(port_file);
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  for (size_t i = 0; i < port_files.size(); ++i) {
    int port = 0;
    while (port == 0) {
      std::ifstream in(port_files[i]);
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &port)) port = 0;
      if (port != 0) break;
      if (processes_[i]->Wait(absl::ZeroDuration()).ok()) {
        return absl::FailedPreconditionError(
            absl::StrCat("engine replica ", i + 1, " exited before it listened"));
      }
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat("engine replica ", i + 1, " did not listen within 60s"));
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
    addresses_.push_back(absl::StrCat("127.0.0.1:", port));
  }
  // The gateway reads each engine's model (name, tokenizer) when it
  // registers it: a replica still loading would be registered without one.
  const absl::Time loaded_by = absl::Now() + absl::Seconds(120);
  for (size_t i = 0; i < addresses_.size(); ++i) {
    while (!Serving(addresses_[i])) {
      if (processes_[i]->Wait(absl::ZeroDuration()).ok()) {
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

void EngineReplicas::Check() {
  for (size_t i = 0; i < processes_.size(); ++i) {
    base::ChildProcess& p = *processes_[i];
    if (!p.running()) continue;
    absl::StatusOr<int> code = p.Wait(absl::ZeroDuration());
    if (code.ok()) {
      std::cerr << "rill serve: engine replica " << i + 1 << " (" << addresses_[i]
                << ") exited with code " << *code
                << "; the gateway routes around it" << std::endl;
    }
  }
}

void EngineReplicas::Stop() {
  for (auto& p : processes_) {
    if (p->running()) (void)p->Stop(SIGTERM, absl::Seconds(10));
  }
}

}  // namespace rill::cli
