#include "engine/service/engine_host.h"

#include <glog/logging.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/engine_factory.h"
#include "engine/model_path.h"
#include "engine/service/hf_tokenizer_files.h"
#include "engine/tokenizer_loader.h"
#include "worker/loader/checkpoint.h"

namespace rill::engine::service {

EngineHost::EngineHost(HostOptions options, Factory factory)
    : options_(std::move(options)), factory_(std::move(factory)) {}

EngineHost::~EngineHost() {
  if (loader_.joinable()) loader_.join();
  Shutdown();
}

namespace {

// A GGUF encoder's HF tokenizer files, written from its WordPiece
// vocabulary; none for a checkpoint without a GGUF.
absl::StatusOr<std::vector<ZipEntry>> GgufEncoderFiles(const worker::loader::Checkpoint& c) {
  if (c.tokenizer().gguf == nullptr) return std::vector<ZipEntry>();
  absl::StatusOr<tokenizer::WordPieceSpec> spec = engine::WordPieceSpecFromGguf(*c.tokenizer().gguf);
  if (!spec.ok()) return spec.status();
  return HfTokenizerFilesFromWordPieceSpec(*spec, c.config().max_position_embeddings);
}

// What an encoder's frontends rebuild their WordPiece tokenizer from: a
// directory's tokenizer.json as it is, or the one written from a GGUF's
// vocabulary (`gguf_files`). Empty when the checkpoint has neither.
std::string WordPieceJsonFor(const worker::loader::Checkpoint& c,
                             const std::vector<ZipEntry>& gguf_files) {
  if (!c.tokenizer().tokenizer_json.empty()) {
    std::ifstream in(c.tokenizer().tokenizer_json, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }
  for (const ZipEntry& f : gguf_files) {
    if (f.name == "tokenizer.json") return f.data;
  }
  return std::string();
}

}  // namespace

void EngineHost::StartLoading() { loader_ = std::thread([this] { Load(); }); }

void EngineHost::Load() {
  LOG(INFO) << "loading model " << engine::ResolveModelPath(options_.args.model);
  absl::SleepFor(options_.load_delay);
  absl::StatusOr<std::unique_ptr<engine::AsyncEngine>> created =
      factory_ ? factory_() : engine::CreateAsyncEngine(options_.args);
  absl::Status status = created.status();
  if (status.ok() && !factory_) {
    // The engine's tokenizer keeps no vocabulary copy, so the spec that
    // frontends rebuild from is read again from the checkpoint metadata.
    absl::StatusOr<std::unique_ptr<worker::loader::Checkpoint>> ckpt =
        worker::loader::LoadCheckpoint(engine::ResolveModelPath(options_.args.model));
    if (ckpt.ok() && (*created)->IsEncoderModel()) {
      absl::StatusOr<std::vector<ZipEntry>> files = GgufEncoderFiles(**ckpt);
      if (files.ok()) {
        gguf_encoder_files_ = std::move(*files);
        wordpiece_json_ = WordPieceJsonFor(**ckpt, gguf_encoder_files_);
      } else {
        status = files.status();
      }
    } else if (ckpt.ok()) {
      absl::StatusOr<tokenizer::TokenizerSpec> spec = engine::TokenizerSpecFromCheckpoint(**ckpt);
      if (spec.ok()) {
        spec_ = std::make_unique<tokenizer::TokenizerSpec>(std::move(*spec));
      } else {
        status = spec.status();
      }
    } else {
      status = ckpt.status();
    }
    // Frontends cannot start without a tokenizer (e.g. an encoder directory
    // without tokenizer.json): a load failure, not an engine they wait for.
    if (status.ok() && spec_ == nullptr && wordpiece_json_.empty()) {
      status = absl::FailedPreconditionError(
          absl::StrCat(engine::ResolveModelPath(options_.args.model),
                       ": no tokenizer for the frontends (tokenizer.json missing?)"));
    }
    if (!status.ok()) (*created)->Stop();
  }
  if (status.ok()) {
    engine_ = std::move(*created);
    engine_ptr_.store(engine_.get());
    const engine::EngineConfig& c = engine_->GetEngineConfig();
    LOG(INFO) << "model loaded: " << c.model.path << ", backend " << c.parallel.backend
              << ", KV cache " << (c.cache.kv_cache_bytes >> 20) << " MiB "
              << c.cache.kv_cache_dtype << " (" << c.cache.num_blocks << " blocks of "
              << c.cache.block_size << " tokens)";
  } else {
    LOG(ERROR) << "model load failed: " << status;
  }
  absl::MutexLock lock(&mu_);
  loaded_ = true;
  load_status_ = status;
}

absl::Status EngineHost::WaitLoaded() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&loaded_));
  return load_status_;
}

std::optional<absl::Status> EngineHost::LoadResult() const {
  absl::MutexLock lock(&mu_);
  if (!loaded_) return std::nullopt;
  return load_status_;
}

const tokenizer::TokenizerSpec* EngineHost::tokenizer_spec() const {
  return engine() == nullptr ? nullptr : spec_.get();
}

absl::Status EngineHost::Usable() const {
  engine::AsyncEngine* e = engine();
  if (e == nullptr) {
    absl::MutexLock lock(&mu_);
    if (loaded_) {
      return absl::UnavailableError(
          absl::StrCat("the model failed to load: ", load_status_.message()));
    }
    return absl::UnavailableError("the model is loading; retry shortly");
  }
  if (absl::Status dead = e->DeadError(); !dead.ok()) {
    return absl::UnavailableError(absl::StrCat("the engine is dead: ", dead.message()));
  }
  if (!e->IsRunning()) return absl::UnavailableError("the engine is shutting down");
  return absl::OkStatus();
}

absl::Status EngineHost::Serving() const {
  if (absl::Status s = Usable(); !s.ok()) return s;
  if (engine()->IsSleeping()) {
    return absl::UnavailableError("the engine is sleeping (Admin.WakeUp resumes it)");
  }
  return absl::OkStatus();
}

void EngineHost::Shutdown() {
  if (engine_ != nullptr) engine_->Stop();
}

}  // namespace rill::engine::service
