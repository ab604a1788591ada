// Tests' blocking form of GrammarCompilerPool::Compile.
#ifndef RILL_ENGINE_STRUCTURED_OUTPUT_COMPILE_NOW_H_
#define RILL_ENGINE_STRUCTURED_OUTPUT_COMPILE_NOW_H_

#include "absl/status/statusor.h"
#include "engine/structured_output/constraint.h"
#include "engine/structured_output/grammar_compiler.h"

namespace rill::engine::structured_output::testing {

// Compiles `constraint` on the pool and waits for the result.
absl::StatusOr<CompiledConstraint> CompileNow(GrammarCompilerPool& pool,
                                              const Constraint& constraint);

}  // namespace rill::engine::structured_output::testing

#endif  // RILL_ENGINE_STRUCTURED_OUTPUT_COMPILE_NOW_H_
