#include "tests/integration/service_stack.h"

#include <dirent.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/util/subprocess.h"

namespace rill::tests::integration {

absl::Status ServiceStack::Start(const StackOptions& options) {
  char tmpl[4096];
  snprintf(tmpl, sizeof(tmpl), "%s/stack.XXXXXX", util::TestTempDir().c_str());
  if (mkdtemp(tmpl) == nullptr) return absl::InternalError("mkdtemp failed");
  run_dir_ = tmpl;
  client_tls_ = options.client_tls;
  cli::LaunchOptions lo;
  lo.host = "127.0.0.1";
  lo.port = 0;
  lo.num_frontends = options.frontends;
  lo.engine_binary = util::RunfilePath("engine/service/rill-engine");
  lo.frontend_binary = util::RunfilePath("frontend/rill-frontend");
  lo.engine_flags = {"--model=default", "--threads=2",
                     absl::StrCat("--tensor_parallel_size=", options.tensor_parallel_size),
                     absl::StrCat("--worker_binary=", util::RunfilePath("worker/rill-worker"))};
  for (const std::string& f : options.engine_flags) lo.engine_flags.push_back(f);
  lo.frontend_flags = options.frontend_flags;
  lo.admin_token = options.admin_token;
  lo.run_dir = run_dir_;
  lo.log_to_files = true;
  lo.restart = options.restart;
  // Teardown drains like `rill serve`; what a test leaves running ends
  // (ABORT) after 2 s instead of the 30 s default.
  lo.shutdown_grace = absl::Seconds(2);
  launcher_ = std::make_unique<cli::ServerLauncher>(lo);
  if (absl::Status s = launcher_->Start(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(s.message(), " (logs in ", run_dir_, ")"));
  }
  return WaitForHealth(NewChannel(), true, absl::Seconds(120));
}

void ServiceStack::Stop() {
  if (launcher_ != nullptr) launcher_->Stop();
  launcher_.reset();
}

int ServiceStack::ChildPid(const std::string& name) const {
  // The launcher passes --port_file=<run_dir>/<name>.port to each child.
  const std::string flag = absl::StrCat("--port_file=", run_dir_, "/", name, ".port");
  int found = -1;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return found;
  while (dirent* e = readdir(proc)) {
    int pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
    std::ifstream in(absl::StrCat("/proc/", pid, "/cmdline"), std::ios::binary);
    std::stringstream cmd;
    cmd << in.rdbuf();
    for (const absl::string_view arg : absl::StrSplit(cmd.str(), '\0')) {
      if (arg == flag) found = pid;
    }
  }
  closedir(proc);
  return found;
}

std::string ServiceStack::engine_address() const {
  return launcher_ ? absl::StrCat("127.0.0.1:", launcher_->engine_port()) : "";
}

std::shared_ptr<grpc::Channel> ServiceStack::NewChannel(int tag) const {
  return NewChannel(tag, client_tls_);
}

std::shared_ptr<grpc::Channel> ServiceStack::NewChannel(int tag, const base::TlsFiles& tls) const {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds =
      base::MakeChannelCredentials(tls);
  if (!creds.ok()) {
    // A bug in the test itself (bad file names): stop with the reason.
    std::fprintf(stderr, "ServiceStack::NewChannel: %s\n", creds.status().ToString().c_str());
    std::abort();
  }
  grpc::ChannelArguments args;
  // A private subchannel pool plus a distinct argument: a new connection.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("rill.test.channel_tag", tag);
  args.SetMaxReceiveMessageSize(64 << 20);
  return grpc::CreateCustomChannel(address(), *creds, args);
}

absl::StatusOr<bool> IsServing(const std::shared_ptr<grpc::Channel>& channel,
                               const std::string& service) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::health::v1::HealthCheckRequest req;
  req.set_service(service);
  grpc::health::v1::HealthCheckResponse resp;
  grpc::Status s = stub->Check(&ctx, req, &resp);
  if (!s.ok()) return absl::UnavailableError(s.error_message());
  return resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
}

absl::Status WaitForHealth(const std::shared_ptr<grpc::Channel>& channel, bool want,
                           absl::Duration timeout, const std::string& service) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::StatusOr<bool> last = false;
  while (absl::Now() < deadline) {
    last = IsServing(channel, service);
    if (last.ok() && *last == want) return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "health of '", service, "' did not become ", want ? "SERVING" : "NOT_SERVING", " within ",
      absl::FormatDuration(timeout), "; last: ",
      last.ok() ? (*last ? "SERVING" : "NOT_SERVING") : last.status().ToString()));
}

v1::StartRequest GreedyText(const std::string& prompt, int max_tokens,
                            const std::string& request_id) {
  v1::StartRequest start;
  start.set_request_id(request_id);
  start.set_text(prompt);
  start.mutable_sampling()->set_temperature(0.0f);
  start.mutable_sampling()->set_max_tokens(max_tokens);
  start.mutable_sampling()->set_ignore_eos(true);
  start.set_output_mode(v1::OUTPUT_MODE_DELTA);
  return start;
}

absl::StatusOr<Collected> GenerateOnce(v1::Inference::Stub* stub, const v1::StartRequest& start,
                                       absl::Duration timeout) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  auto stream = stub->Generate(&ctx);
  v1::GenerateRequest req;
  *req.mutable_start() = start;
  if (!stream->Write(req)) return absl::UnavailableError("stream closed before the request was sent");
  stream->WritesDone();
  Collected c;
  v1::GenerateResponse resp;
  while (stream->Read(&resp)) {
    ++c.num_responses;
    c.request_id = resp.request_id();
    if (resp.has_status() && resp.status().code() != 0) c.status = resp.status();
    for (const v1::Completion& o : resp.outputs()) {
      if (o.index() != 0) continue;
      c.text += o.text();
      c.token_ids.insert(c.token_ids.end(), o.token_ids().begin(), o.token_ids().end());
      if (o.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) c.finish_reason = o.finish_reason();
    }
    if (resp.finished()) ++c.num_finished;
  }
  grpc::Status s = stream->Finish();
  if (!s.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                        absl::StrCat("Generate: ", s.error_message()));
  }
  return c;
}

}  // namespace rill::tests::integration
