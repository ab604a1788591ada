#include "frontend/engine_client.h"

#include <errno.h>
#include <sys/random.h>

#include <random>
#include <vector>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "base/call_auth.h"
#include "base/engine_session.h"
#include "tokenizer/spec_proto.h"

namespace rill::frontend {

using rill::internal::EngineOutput;
using rill::internal::EngineRequest;

EngineClient::EngineClient(std::string address, std::string frontend_id,
                           GrpcTransportOptions transport,
                           std::shared_ptr<grpc::ChannelCredentials> credentials,
                           const std::string& tls_server_name,
                           const std::string& engine_secret)
    : address_(std::move(address)), frontend_id_(std::move(frontend_id)) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetMaxReceiveMessageSize(transport.max_receive_bytes);
  args.SetMaxSendMessageSize(transport.max_send_bytes);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, absl::ToInt64Milliseconds(transport.keepalive_time));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
              absl::ToInt64Milliseconds(transport.keepalive_timeout));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  if (!tls_server_name.empty()) args.SetSslTargetNameOverride(tls_server_name);
  channel_ = base::CreateChannelWithMetadata(
      address_, credentials != nullptr ? credentials : grpc::InsecureChannelCredentials(), args,
      base::EngineCallMetadata(engine_secret));
  stub_ = rill::internal::Engine::NewStub(channel_);
  std::random_device rd;
  session_salt_ = (uint64_t{rd()} << 32) ^ rd();
}

EngineClient::~EngineClient() { Shutdown(); }

absl::Status EngineClient::Start(absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  grpc::Status last;
  // A model loads for seconds to minutes: say why we wait when the reason
  // changes and every 10 s, not at every 200 ms retry.
  std::string logged_reason;
  absl::Time logged_at = absl::InfinitePast();
  while (true) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(5));
    ctx.set_wait_for_ready(true);
    last = stub_->GetTokenizer(&ctx, {}, &spec_);
    if (last.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
      // Waiting cannot fix a credential: say so at once.
      return absl::UnauthenticatedError(absl::StrCat(
          "the engine at ", address_, " refused this frontend (", last.error_message(),
          "): pass --engine_secret_file with the engine's secret, or a client certificate it "
          "trusts"));
    }
    if (last.ok() || absl::Now() > deadline) break;
    if (last.error_message() != logged_reason || absl::Now() - logged_at > absl::Seconds(10)) {
      LOG(INFO) << "waiting for the engine at " << address_ << ": " << last.error_message();
      logged_reason = last.error_message();
      logged_at = absl::Now();
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
  if (!last.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "cannot get the tokenizer from the engine at ", address_, ": ",
        last.error_message()));
  }
  if (spec_.model() == "wordpiece") {
    // An encoder (BERT): the spec carries its tokenizer.json.
    absl::StatusOr<base::json::JsonValue> json = base::json::ParseJson(spec_.wordpiece_json());
    if (!json.ok()) return json.status();
    auto wp = tokenizer::WordPieceTokenizer::FromJson(*json);
    if (!wp.ok()) return wp.status();
    wordpiece_ = std::move(*wp);
  } else {
    auto tok = tokenizer::Tokenizer::FromSpec(tokenizer::SpecFromProto(spec_));
    if (!tok.ok()) return tok.status();
    tokenizer_ = std::move(*tok);
  }
  stream_thread_ = std::thread([this] { StreamLoop(); });
  health_thread_ = std::thread([this] { HealthLoop(); });
  return absl::OkStatus();
}

void EngineClient::Shutdown() {
  if (shutdown_.exchange(true)) return;
  {
    absl::MutexLock l(&mu_);
    if (stream_ctx_ != nullptr) stream_ctx_->TryCancel();
    shutdown_cv_.SignalAll();
  }
  if (stream_thread_.joinable()) stream_thread_.join();
  if (health_thread_.joinable()) health_thread_.join();
  FailAll("frontend shutting down");
}

std::string EngineClient::NewRequestId() {
  uint64_t bits[2];
  size_t got = 0;
  while (got < sizeof(bits)) {
    // getrandom never returns short for <= 256 bytes once the pool is
    // initialised; the loop covers EINTR.
    ssize_t n = getrandom(reinterpret_cast<char*>(bits) + got, sizeof(bits) - got, 0);
    PCHECK(n >= 0 || errno == EINTR) << "getrandom";
    if (n > 0) got += static_cast<size_t>(n);
  }
  return absl::StrCat(frontend_id_, "-", absl::Hex(bits[0], absl::kZeroPad16),
                      absl::Hex(bits[1], absl::kZeroPad16));
}

std::string EngineClient::NewEngineId(const std::string& client_id) {
  return base::EngineRequestId(client_id, next_engine_id_.fetch_add(1));
}

void EngineClient::AddSessionMetadata(grpc::ClientContext* ctx) const {
  absl::MutexLock l(&mu_);
  if (!session_.empty()) ctx->AddMetadata(base::kEngineSessionMetadata, session_);
}

std::string EngineClient::unavailable_reason() const {
  absl::MutexLock l(&mu_);
  return reason_;
}

void EngineClient::SetServingCallback(std::function<void(bool)> cb) {
  {
    absl::MutexLock l(&mu_);
    serving_cb_ = std::move(cb);
  }
  UpdateServing();
}

void EngineClient::UpdateServing() {
  bool now = stream_up_.load() && engine_healthy_.load() && (tokenizer_ || wordpiece_);
  std::function<void(bool)> cb;
  {
    absl::MutexLock l(&mu_);
    cb = serving_cb_;
  }
  // The callback runs every time so a late-registered observer syncs up.
  bool before = serving_.exchange(now);
  if (before != now) LOG(INFO) << "engine serving: " << now;
  if (cb) cb(now);
}

bool EngineClient::Write(const EngineRequest& req) {
  absl::MutexLock l(&write_mu_);
  return stream_ != nullptr && stream_->Write(req);
}

absl::Status EngineClient::StartRequest(const rill::internal::EngineStart& start,
                                        Sink sink) {
  if (!stream_up_.load()) {
    return absl::UnavailableError(
        absl::StrCat("engine unavailable: ", unavailable_reason()));
  }
  {
    absl::MutexLock l(&mu_);
    if (!sinks_.emplace(start.request_id(), std::move(sink)).second) {
      return absl::AlreadyExistsError(
          absl::StrCat("engine request id ", start.request_id(), " is already in flight"));
    }
  }
  EngineRequest req;
  *req.mutable_start() = start;
  if (!Write(req)) {
    absl::MutexLock l(&mu_);
    sinks_.erase(start.request_id());
    return absl::UnavailableError("engine stream broke while starting");
  }
  return absl::OkStatus();
}

void EngineClient::AbortRequest(const std::string& request_id) {
  bool known;
  {
    absl::MutexLock l(&mu_);
    known = sinks_.erase(request_id) > 0;
  }
  if (!known) return;
  EngineRequest req;
  req.mutable_abort()->set_request_id(request_id);
  Write(req);
}

void EngineClient::FailAll(const std::string& reason) {
  absl::flat_hash_map<std::string, Sink> sinks;
  {
    absl::MutexLock l(&mu_);
    sinks.swap(sinks_);
  }
  for (auto& [id, sink] : sinks) {
    EngineOutput out;
    out.set_request_id(id);
    out.set_finished(true);
    out.mutable_status()->set_code(grpc::StatusCode::UNAVAILABLE);
    out.mutable_status()->set_message(
        absl::StrCat("engine unavailable: ", reason, "; retry later"));
    sink(out);
  }
}

void EngineClient::StreamLoop() {
  absl::Duration backoff = absl::Milliseconds(50);
  while (!shutdown_.load()) {
    grpc::ClientContext ctx;
    {
      absl::MutexLock l(&mu_);
      if (shutdown_.load()) break;
      stream_ctx_ = &ctx;
      session_ = absl::StrCat(absl::Hex(session_salt_, absl::kZeroPad16), ".", ++stream_generation_);
      ctx.AddMetadata(base::kEngineSessionMetadata, session_);
    }
    // Probe first so "stream up" means the engine really answered.
    rill::v1::CheckHealthResponse health;
    grpc::ClientContext probe;
    probe.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(2));
    grpc::Status ps = stub_->CheckHealth(&probe, {}, &health);
    std::string reason;
    // No answer in time counts as unreachable too: a stalled engine (or
    // network) accepts TCP connections but never speaks HTTP/2.
    const bool reachable = ps.ok() || (ps.error_code() != grpc::StatusCode::UNAVAILABLE &&
                                       ps.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED);
    if (reachable) {
      std::unique_ptr<grpc::ClientReaderWriter<EngineRequest, EngineOutput>>
          stream = stub_->Generate(&ctx);
      {
        absl::MutexLock l(&write_mu_);
        stream_ = stream.get();
      }
      stream_up_ = true;
      UpdateServing();
      backoff = absl::Milliseconds(50);
      EngineOutput out;
      while (stream->Read(&out)) {
        Sink sink;
        {
          absl::MutexLock l(&mu_);
          auto it = sinks_.find(out.request_id());
          if (it == sinks_.end()) continue;  // Aborted here already.
          if (out.finished()) {
            sink = std::move(it->second);
            sinks_.erase(it);
          } else {
            sink = it->second;
          }
        }
        sink(out);
      }
      stream_up_ = false;
      {
        absl::MutexLock l(&write_mu_);
        stream_ = nullptr;
      }
      grpc::Status st = stream->Finish();
      reason = absl::StrCat("engine stream ended: ", st.error_message());
    } else {
      reason = absl::StrCat("engine at ", address_,
                            " unreachable: ", ps.error_message());
    }
    {
      absl::MutexLock l(&mu_);
      stream_ctx_ = nullptr;
      reason_ = reason;
    }
    UpdateServing();
    FailAll(reason);
    if (shutdown_.load()) break;
    LOG(WARNING) << reason << "; reconnecting in " << backoff;
    absl::MutexLock l(&mu_);
    shutdown_cv_.WaitWithTimeout(&mu_, backoff);
    backoff = std::min(backoff * 2, absl::Seconds(1));
  }
}

void EngineClient::HealthLoop() {
  while (!shutdown_.load()) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(2));
    rill::v1::CheckHealthResponse resp;
    grpc::Status st = stub_->CheckHealth(&ctx, {}, &resp);
    bool healthy = st.ok() && resp.healthy();
    if (!healthy) {
      absl::MutexLock l(&mu_);
      if (stream_up_.load()) {
        reason_ = st.ok() ? absl::StrCat("engine not healthy: ", resp.message())
                          : absl::StrCat("engine health check failed: ",
                                         st.error_message());
      }
    }
    engine_healthy_ = healthy;
    UpdateServing();
    absl::MutexLock l(&mu_);
    shutdown_cv_.WaitWithTimeout(&mu_, absl::Milliseconds(500));
  }
}

}  // namespace rill::frontend
