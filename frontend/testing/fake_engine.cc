#include "frontend/testing/fake_engine.h"

#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/engine_session.h"
#include "tokenizer/test_util.h"

namespace rill::frontend::testing {

using rill::internal::EngineOutput;
using rill::internal::EngineRequest;

absl::StatusOr<rill::internal::TokenizerSpec> DefaultModelSpec() {
  std::string path = tokenizer::testing::DefaultModelPath();
  if (path.empty()) return absl::NotFoundError("default model not installed");
  absl::StatusOr<tokenizer::TokenizerSpec> s = tokenizer::testing::ReadGgufTokenizer(path);
  if (!s.ok()) return s.status();
  rill::internal::TokenizerSpec p;
  p.set_model(s->model);
  for (const auto& t : s->tokens) p.add_tokens(t);
  for (int32_t t : s->token_types) p.add_token_types(t);
  for (const auto& m : s->merges) p.add_merges(m);
  for (float f : s->scores) p.add_scores(f);
  p.set_pre(s->pre);
  p.set_bos_id(s->bos_id);
  p.set_eos_id(s->eos_id);
  p.set_pad_id(s->pad_id);
  p.set_unk_id(s->unk_id);
  p.set_add_bos(s->add_bos);
  p.set_add_eos(s->add_eos);
  p.set_add_space_prefix(s->add_space_prefix);
  p.set_byte_fallback(s->byte_fallback);
  p.set_chat_template(s->chat_template);
  p.set_max_model_len(2048);
  return p;
}

absl::Status FakeEngine::Start(int port) {
  if (port == 0) port = port_;
  grpc::ServerBuilder b;
  int bound = 0;
  b.AddListeningPort(absl::StrCat("127.0.0.1:", port), grpc::InsecureServerCredentials(), &bound);
  b.RegisterService(this);
  server_ = b.BuildAndStart();
  if (!server_ || bound == 0) return absl::UnavailableError("fake engine cannot listen");
  port_ = bound;
  return absl::OkStatus();
}

void FakeEngine::Stop() {
  if (!server_) return;
  DropStreams();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server_->Wait();
  server_.reset();
}

void FakeEngine::DropStreams() { ++drop_epoch_; }

std::vector<std::string> FakeEngine::aborted() const {
  absl::MutexLock l(&mu_);
  return aborted_;
}

std::vector<rill::internal::EngineStart> FakeEngine::started() const {
  absl::MutexLock l(&mu_);
  return started_;
}

bool FakeEngine::WaitForAbort(const std::string& id, absl::Duration timeout) const {
  absl::Time end = absl::Now() + timeout;
  while (absl::Now() < end) {
    {
      absl::MutexLock l(&mu_);
      for (const auto& a : aborted_) {
        if (a == id) return true;
      }
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  return false;
}

grpc::Status FakeEngine::Generate(
    grpc::ServerContext* ctx, grpc::ServerReaderWriter<EngineOutput, EngineRequest>* stream) {
  ++open_streams_;
  const uint64_t epoch = drop_epoch_.load();
  absl::Mutex write_mu;
  std::vector<std::thread> workers;
  std::vector<std::string> mine;
  std::atomic<bool> stream_dead{false};
  // Reads on their own thread so a drop can end the handler while Read blocks.
  std::atomic<bool> reader_done{false};
  std::thread reader([&] {
    EngineRequest req;
    while (stream->Read(&req)) {
      if (req.has_abort()) {
        absl::MutexLock l(&mu_);
        aborted_.push_back(base::ClientRequestIdOf(req.abort().request_id()));
        abort_flags_.insert(req.abort().request_id());
        continue;
      }
      const rill::internal::EngineStart start = req.start();
      std::vector<int32_t> script;
      {
        absl::MutexLock l(&mu_);
        started_.push_back(start);
        started_.back().set_request_id(base::ClientRequestIdOf(start.request_id()));
        script = script_;
        mine.push_back(start.request_id());
      }
      if (fail_code_.load() > 0) {
        EngineOutput out;
        out.set_request_id(start.request_id());
        out.set_finished(true);
        out.mutable_status()->set_code(fail_code_.load());
        out.mutable_status()->set_message("fake engine: scripted failure");
        absl::MutexLock l(&write_mu);
        stream->Write(out);
        continue;
      }
      workers.emplace_back([&, start, script] {
        int max_tokens = start.sampling().has_max_tokens() ? start.sampling().max_tokens() : 16;
        int n = start.sampling().has_n() ? std::max<int>(1, start.sampling().n()) : 1;
        bool aborted = false;
        for (int i = 0; i < max_tokens && !stream_dead.load(); ++i) {
          if (token_delay_ms_.load() > 0) absl::SleepFor(absl::Milliseconds(token_delay_ms_.load()));
          {
            absl::MutexLock l(&mu_);
            aborted = abort_flags_.contains(start.request_id());
          }
          if (aborted) break;
          bool last = i + 1 == max_tokens;  // The script repeats.
          EngineOutput out;
          out.set_request_id(start.request_id());
          for (int c = 0; c < n; ++c) {
            auto* d = out.add_outputs();
            d->set_index(c);
            int32_t id = script.empty() ? 0 : script[i % script.size()];
            d->add_token_ids(id);
            if (start.sampling().logprobs() > 0) {
              auto* lp = d->add_logprobs();
              lp->mutable_chosen()->set_token_id(id);
              lp->mutable_chosen()->set_logprob(-0.5f);
              for (int k = 0; k < start.sampling().logprobs(); ++k) {
                auto* t = lp->add_top();
                t->set_token_id(id + k);
                t->set_logprob(-0.5f - k);
              }
            }
            d->set_cumulative_logprob(-0.5 * (i + 1));
            if (last) {
              d->set_finish_reason(rill::v1::FINISH_REASON_LENGTH);
            }
          }
          if (last) {
            out.set_finished(true);
            out.mutable_metrics()->set_num_prompt_tokens(start.prompt_token_ids_size());
            out.mutable_metrics()->set_num_generated_tokens((i + 1) * n);
          }
          absl::MutexLock l(&write_mu);
          if (!stream->Write(out)) break;
          if (last) break;
        }
        if (aborted) {
          EngineOutput out;
          out.set_request_id(start.request_id());
          out.set_finished(true);
          for (int c = 0; c < n; ++c) {
            auto* d = out.add_outputs();
            d->set_index(c);
            d->set_finish_reason(rill::v1::FINISH_REASON_ABORT);
          }
          absl::MutexLock l(&write_mu);
          stream->Write(out);
        }
      });
    }
    reader_done = true;
  });
  while (!reader_done.load() && drop_epoch_.load() == epoch && !ctx->IsCancelled()) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  bool dropped = drop_epoch_.load() != epoch;
  stream_dead = true;
  if (dropped) ctx->TryCancel();
  reader.join();
  for (auto& w : workers) w.join();
  {
    // The stream ended: the engine aborts everything started on it.
    absl::MutexLock l(&mu_);
    for (const auto& id : mine) abort_flags_.insert(id);
  }
  --open_streams_;
  return dropped ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake engine dropped the stream")
                 : grpc::Status::OK;
}

grpc::Status FakeEngine::Abort(grpc::ServerContext*, const rill::v1::AbortRequest* req,
                               rill::v1::AbortResponse*) {
  absl::MutexLock l(&mu_);
  bool known = false;
  for (const auto& s : started_) known |= s.request_id() == req->request_id();
  if (!known) return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such request");
  aborted_.push_back(req->request_id());
  abort_flags_.insert(req->request_id());
  return grpc::Status::OK;
}

grpc::Status FakeEngine::GetRequestStatus(grpc::ServerContext*,
                                          const rill::v1::GetRequestStatusRequest* req,
                                          rill::v1::GetRequestStatusResponse* resp) {
  absl::MutexLock l(&mu_);
  for (const auto& s : started_) {
    if (s.request_id() == req->request_id()) {
      resp->set_request_id(req->request_id());
      resp->set_state(abort_flags_.contains(req->request_id()) ? rill::v1::REQUEST_STATE_CANCELLED
                                                               : rill::v1::REQUEST_STATE_RUNNING);
      return grpc::Status::OK;
    }
  }
  return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such request");
}

grpc::Status FakeEngine::Encode(grpc::ServerContext*, const rill::internal::EngineEncodeRequest*,
                                rill::v1::EncodeResponse*) {
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "fake engine: the model has no pooling");
}

grpc::Status FakeEngine::GetTokenizer(grpc::ServerContext*, const rill::internal::GetTokenizerRequest*,
                                      rill::internal::TokenizerSpec* resp) {
  *resp = spec_;
  return grpc::Status::OK;
}

grpc::Status FakeEngine::GetModelConfig(grpc::ServerContext*, const rill::v1::GetModelConfigRequest*,
                                        rill::v1::ModelConfig* resp) {
  resp->set_model("fake");
  resp->set_architecture("llama");
  resp->set_vocab_size(spec_.tokens_size());
  resp->set_max_model_len(spec_.max_model_len());
  resp->set_bos_token_id(spec_.bos_id());
  resp->add_eos_token_ids(spec_.eos_id());
  resp->set_has_chat_template(!spec_.chat_template().empty());
  return grpc::Status::OK;
}

grpc::Status FakeEngine::GetServerConfig(grpc::ServerContext*, const rill::v1::GetServerConfigRequest*,
                                         rill::v1::ServerConfig* resp) {
  resp->mutable_engine()->set_backend("fake");
  resp->mutable_scheduler()->set_max_model_len(spec_.max_model_len());
  return grpc::Status::OK;
}

grpc::Status FakeEngine::GetLoad(grpc::ServerContext*, const rill::v1::GetLoadRequest*,
                                 rill::v1::Load* resp) {
  absl::MutexLock l(&mu_);
  resp->set_num_unfinished_requests(0);
  return grpc::Status::OK;
}

grpc::Status FakeEngine::CheckHealth(grpc::ServerContext*, const rill::v1::CheckHealthRequest*,
                                     rill::v1::CheckHealthResponse* resp) {
  resp->set_healthy(healthy_.load());
  resp->set_message(healthy_.load() ? "ok" : "fake engine: not healthy");
  return grpc::Status::OK;
}

}  // namespace rill::frontend::testing
