// Builds engines from EngineArgs: the model executor for the device and
// tensor_parallel_size (the model in this process, in rill-worker
// processes, or on CUDA), under the token-only AsyncEngine (what rill-engine
// serves) or the text AsyncLLMEngine (with the model's tokenizer). Apart
// from the engine targets so engines over other executors (tests) do not
// link the model code.
#ifndef RILL_ENGINE_ENGINE_FACTORY_H_
#define RILL_ENGINE_ENGINE_FACTORY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "engine/async_engine.h"
#include "engine/async_llm_engine.h"
#include "engine/engine_args.h"

namespace rill::engine {

absl::StatusOr<std::unique_ptr<AsyncEngine>> CreateAsyncEngine(const EngineArgs& args);
// `tokenizer`: the model's tokenizer when the caller loaded it already
// (rill generate); null: loaded from the checkpoint.
absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> CreateAsyncLLMEngine(
    const EngineArgs& args, std::shared_ptr<const tokenizer::BpeTokenizer> tokenizer = nullptr);

}  // namespace rill::engine

#endif  // RILL_ENGINE_ENGINE_FACTORY_H_
