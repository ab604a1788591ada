#include "engine/structured_output/compile_now.h"

#include <utility>

#include "absl/synchronization/notification.h"

namespace rill::engine::structured_output::testing {

absl::StatusOr<CompiledConstraint> CompileNow(GrammarCompilerPool& pool,
                                              const Constraint& constraint) {
  absl::Notification done;
  absl::StatusOr<CompiledConstraint> out = absl::UnknownError("no callback");
  pool.Compile(constraint, [&](absl::StatusOr<CompiledConstraint> r) {
    out = std::move(r);
    done.Notify();
  });
  done.WaitForNotification();
  return out;
}

}  // namespace rill::engine::structured_output::testing
