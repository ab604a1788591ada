#include "engine/service/vllm_engine_service.h"

#include <glog/logging.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/call_auth.h"
#include "base/engine_session.h"
#include "base/message_text.h"
#include "base/request_id.h"
#include "engine/model_path.h"
#include "engine/service/hf_tokenizer_files.h"
#include "engine/service/status_convert.h"
#include "engine/service/tokenizer_zip.h"
#include "engine/service/vllm_convert.h"

namespace rill::engine::service {
namespace {

namespace common = ::smg::grpc::common;

// GetTokenizer's chunk size: well under gRPC's 4 MiB message limit.
constexpr size_t kTokenizerChunkBytes = 1 << 20;

}  // namespace

VllmEngineServiceImpl::VllmEngineServiceImpl(EngineHost* host, std::string secret,
                                             std::string profile_dir)
    : host_(host), secret_(std::move(secret)), profile_dir_(std::move(profile_dir)) {}

VllmEngineServiceImpl::~VllmEngineServiceImpl() {
  if (feed_ != nullptr) feed_->Close();
}

grpc::Status VllmEngineServiceImpl::Authorize(const grpc::ServerContext& context) const {
  if (secret_.empty()) return grpc::Status::OK;  // Mutual TLS authenticated the peer.
  if (base::CheckEngineSecret(context, secret_).ok()) return grpc::Status::OK;
  grpc::Status bearer = base::CheckAdminToken(context, secret_);
  if (bearer.ok()) return bearer;
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      "missing or wrong engine credential (rill-engine-secret or authorization: "
                      "Bearer)");
}

const tokenizer::BpeTokenizer* VllmEngineServiceImpl::Tokenizer() {
  absl::call_once(tokenizer_once_, [this] {
    const tokenizer::TokenizerSpec* spec = host_->tokenizer_spec();
    if (spec == nullptr) return;
    absl::StatusOr<std::unique_ptr<tokenizer::BpeTokenizer>> tok =
        tokenizer::BpeTokenizer::Create(*spec);
    if (tok.ok()) {
      tokenizer_ = std::move(*tok);
    } else {
      LOG(WARNING) << "VllmEngine: no tokenizer for stop strings: " << tok.status();
    }
  });
  return tokenizer_.get();
}

KvEventFeed* VllmEngineServiceImpl::Feed() {
  absl::call_once(feed_once_, [this] {
    engine::AsyncEngine* e = host_->engine();
    absl::StatusOr<std::unique_ptr<KvEventFeed>> feed = KvEventFeed::Attach(e, [e] {
      const engine::EngineStats stats = e->GetStats();
      common::EngineLoad load;
      load.set_running_requests(stats.num_running);
      load.set_waiting_requests(stats.num_waiting);
      load.set_token_usage(stats.kv_usage);
      load.set_max_running_requests(e->GetEngineConfig().scheduler.max_num_seqs);
      load.set_cache_hit_rate(stats.prefix_cache_hit_rate);
      return load;
    });
    if (feed.ok()) {
      feed_ = std::move(*feed);
    } else {
      LOG(WARNING) << "VllmEngine: KV events unavailable: " << feed.status();
    }
  });
  return feed_.get();
}

grpc::Status VllmEngineServiceImpl::Generate(grpc::ServerContext* context,
                                             const vllm_pb::GenerateRequest* request,
                                             GenerateWriter* writer) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  if (absl::Status s = host_->Serving(); !s.ok()) return ToGrpcStatus(s);
  return ServeVllmGenerate(host_, Tokenizer(), &live_, context, *request, writer);
}

grpc::Status VllmEngineServiceImpl::Embed(grpc::ServerContext* context,
                                          const vllm_pb::EmbedRequest* request,
                                          vllm_pb::EmbedResponse* response) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  if (absl::Status s = host_->Usable(); !s.ok()) return ToGrpcStatus(s);
  if (request->request_id().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "request_id is empty");
  }
  if (absl::Status s = ValidateRequestIdLength(request->request_id()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  engine::AsyncEngine* e = host_->engine();
  if (!e->SupportsEncode()) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                        "Embed: this model is not an embedding model (it cannot pool hidden "
                        "states)");
  }
  std::vector<int32_t> ids;
  for (uint32_t id : request->tokenized().input_ids()) ids.push_back(static_cast<int32_t>(id));
  absl::StatusOr<engine::EmbeddingOutput> out = e->Encode(
      std::move(ids), engine::PoolingParams{},
      base::ScopedRequestId("vllm-engine-api", request->request_id()));
  if (!out.ok()) return ToGrpcStatus(out.status());
  *response->mutable_embedding() = {out->embedding.begin(), out->embedding.end()};
  response->set_prompt_tokens(static_cast<uint32_t>(out->num_prompt_tokens));
  response->set_embedding_dim(static_cast<uint32_t>(out->embedding.size()));
  return grpc::Status::OK;
}

grpc::Status VllmEngineServiceImpl::HealthCheck(grpc::ServerContext* context,
                                                const vllm_pb::HealthCheckRequest*,
                                                vllm_pb::HealthCheckResponse* response) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  absl::Status s = host_->Serving();
  response->set_healthy(s.ok());
  response->set_message(s.ok() ? "serving" : std::string(s.message()));
  return grpc::Status::OK;
}

grpc::Status VllmEngineServiceImpl::FlushCache(grpc::ServerContext* context,
                                               const common::FlushCacheRequest*,
                                               common::FlushCacheResponse* response) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  if (absl::Status s = host_->Usable(); !s.ok()) return ToGrpcStatus(s);
  // Running requests keep their blocks; only the sharing is dropped, so
  // there is nothing to wait for (timeout_s is not needed).
  absl::Status s = host_->engine()->ResetPrefixCache();
  response->set_success(s.ok());
  response->set_message(s.ok() ? "dropped every cached prefix block" : std::string(s.message()));
  return grpc::Status::OK;
}

grpc::Status VllmEngineServiceImpl::StartProfile(grpc::ServerContext* context,
                                                 const common::StartProfileRequest* request,
                                                 common::ProfileResponse* response) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  if (absl::Status s = host_->Usable(); !s.ok()) return ToGrpcStatus(s);
  // The trace directory is the engine's (--profile_dir): a caller holding
  // the engine credential does not pick paths on the engine's disk.
  if (request->has_output_dir() && request->output_dir() != profile_dir_) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "output_dir: traces go to the engine's --profile_dir only");
  }
  if (request->has_start_step() || request->has_num_steps()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "start_step/num_steps are not supported: the profile runs from "
                        "StartProfile to StopProfile");
  }
  absl::Status s = host_->engine()->StartProfile(profile_dir_);
  response->set_success(s.ok());
  response->set_message(s.ok() ? absl::StrCat("profiling into ", profile_dir_)
                               : std::string(s.message()));
  return grpc::Status::OK;
}

grpc::Status VllmEngineServiceImpl::StopProfile(grpc::ServerContext* context,
                                                const common::StopProfileRequest*,
                                                common::ProfileResponse* response) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  if (absl::Status s = host_->Usable(); !s.ok()) return ToGrpcStatus(s);
  absl::StatusOr<std::string> path = host_->engine()->StopProfile();
  response->set_success(path.ok());
  response->set_message(path.ok() ? *path : std::string(path.status().message()));
  return grpc::Status::OK;
}

grpc::Status VllmEngineServiceImpl::Abort(grpc::ServerContext* context,
                                          const vllm_pb::AbortRequest* request,
                                          vllm_pb::AbortResponse*) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  if (absl::Status s = host_->Usable(); !s.ok()) return ToGrpcStatus(s);
  // Unknown or finished ids are ignored, as vLLM does.
  for (const std::string& id : request->request_ids()) {
    for (const std::string& engine_id : live_.EngineIds(id)) {
      (void)host_->engine()->Abort(engine_id);
    }
  }
  return grpc::Status::OK;
}

grpc::Status VllmEngineServiceImpl::GetModelInfo(grpc::ServerContext* context,
                                                 const vllm_pb::GetModelInfoRequest*,
                                                 vllm_pb::GetModelInfoResponse* response) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  if (host_->engine() == nullptr) return ToGrpcStatus(host_->Usable());
  engine::AsyncEngine* e = host_->engine();
  const engine::EngineConfig& c = e->GetEngineConfig();
  response->set_model_path(c.model.path);
  response->set_is_generation(e->SupportsGenerate());
  response->set_max_context_length(static_cast<uint32_t>(c.model.max_model_len));
  response->set_vocab_size(static_cast<uint32_t>(c.model.config.vocab_size));
  response->set_supports_vision(false);
  response->set_served_model_name(host_->options().model_name);
  // smg loads a tokenizer_path that exists on its machine from disk (else it
  // asks GetTokenizer). A model directory's own tokenizer.json may pad every
  // text (sentence-transformers: 128 [PAD]), so rill serve points this at
  // the unpadded copy it wrote.
  const std::string& tokenizer_dir = host_->options().vllm_tokenizer_path;
  response->set_tokenizer_path(tokenizer_dir.empty() ? c.model.path : tokenizer_dir);
  response->set_model_type(c.model.config.architecture);
  response->add_architectures(c.model.config.architecture);
  for (int32_t id : c.decoding.eos_token_ids) response->add_eos_token_ids(id);
  const tokenizer::TokenizerSpec* spec = host_->tokenizer_spec();
  response->set_pad_token_id(spec != nullptr ? spec->pad_id : -1);
  response->set_bos_token_id(spec != nullptr ? spec->bos_id : -1);
  response->set_max_req_input_len(static_cast<int32_t>(c.model.max_model_len - 1));
  return grpc::Status::OK;
}

grpc::Status VllmEngineServiceImpl::GetServerInfo(grpc::ServerContext* context,
                                                  const vllm_pb::GetServerInfoRequest*,
                                                  vllm_pb::GetServerInfoResponse* response) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  if (host_->engine() == nullptr) return ToGrpcStatus(host_->Usable());
  engine::AsyncEngine* e = host_->engine();
  const engine::EngineConfig& c = e->GetEngineConfig();
  response->set_active_requests(static_cast<uint32_t>(e->GetNumUnfinishedRequests()));
  response->set_is_paused(e->IsSleeping());
  response->set_uptime_seconds(absl::ToDoubleSeconds(absl::Now() - started_));
  response->set_server_type("vllm-grpc");
  response->set_data_parallel_size(1);
  response->set_kv_cache_dtype(c.cache.kv_cache_dtype);
  response->set_block_size(c.cache.block_size);
  response->set_max_num_seqs(c.scheduler.max_num_seqs);
  return grpc::Status::OK;
}

grpc::Status VllmEngineServiceImpl::GetLoads(grpc::ServerContext* context,
                                             const vllm_pb::GetLoadsRequest* request,
                                             vllm_pb::GetLoadsResponse* response) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  if (host_->engine() == nullptr) return ToGrpcStatus(host_->Usable());
  engine::AsyncEngine* e = host_->engine();
  response->set_timestamp(absl::FormatTime(absl::RFC3339_full, absl::Now(), absl::UTCTimeZone()));
  response->set_version("rill");
  response->set_dp_rank_count(1);
  if (request->has_dp_rank() && request->dp_rank() != 0) return grpc::Status::OK;
  *response->add_loads() =
      ToSchedulerLoad(e->GetStats(), e->GetNumUnfinishedRequests(), e->GetEngineConfig());
  return grpc::Status::OK;
}

grpc::Status VllmEngineServiceImpl::GetTokenizer(
    grpc::ServerContext* context, const common::GetTokenizerRequest*,
    grpc::ServerWriter<common::GetTokenizerChunk>* writer) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  if (host_->engine() == nullptr) return ToGrpcStatus(host_->Usable());
  // An HF checkpoint ships its own files; a GGUF file's are written from the
  // tokenizer spec in its metadata.
  const std::string model_path = engine::ResolveModelPath(host_->options().args.model);
  std::error_code ec;
  const tokenizer::TokenizerSpec* spec = host_->tokenizer_spec();
  absl::StatusOr<std::vector<ZipEntry>> files;
  if (std::filesystem::is_directory(model_path, ec)) {
    files = TokenizerArtifacts(model_path);
  } else if (!host_->gguf_encoder_tokenizer_files().empty()) {
    files = host_->gguf_encoder_tokenizer_files();  // a GGUF encoder (BERT)
  } else if (spec != nullptr) {
    files = HfTokenizerFilesFromSpec(*spec, host_->engine()->GetEngineConfig().model.max_model_len);
  } else {
    files = TokenizerArtifacts(model_path);
  }
  if (!files.ok()) return ToGrpcStatus(files.status());
  const std::string zip = ZipStored(*files);
  const std::string sha = Sha256Hex(zip);
  for (size_t at = 0; at < zip.size(); at += kTokenizerChunkBytes) {
    common::GetTokenizerChunk chunk;
    chunk.set_data(zip.substr(at, kTokenizerChunkBytes));
    if (at + kTokenizerChunkBytes >= zip.size()) chunk.set_sha256(sha);
    if (!writer->Write(chunk)) return grpc::Status(grpc::StatusCode::CANCELLED, "client gone");
  }
  return grpc::Status::OK;
}

grpc::Status VllmEngineServiceImpl::SubscribeKvEvents(
    grpc::ServerContext* context, const common::SubscribeKvEventsRequest* request,
    grpc::ServerWriter<common::KvEventBatch>* writer) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  if (absl::Status s = host_->Usable(); !s.ok()) return ToGrpcStatus(s);
  if (!host_->engine()->GetEngineConfig().cache.enable_prefix_caching) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "prefix caching is off (--enable_prefix_caching=false): no KV events");
  }
  KvEventFeed* feed = Feed();
  if (feed == nullptr) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "KV events are unavailable");
  }
  return feed->Serve(context, request->start_sequence_number(), writer);
}

}  // namespace rill::engine::service
