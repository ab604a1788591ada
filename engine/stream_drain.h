// Test helper: a request's stream read to its end.
#ifndef RILL_ENGINE_STREAM_DRAIN_H_
#define RILL_ENGINE_STREAM_DRAIN_H_

#include "absl/time/time.h"
#include "engine/output_stream.h"
#include "engine/request_output.h"

namespace rill::engine::testing {

// The last output of `stream`, read until the finished one (each Next waits
// up to `timeout`). With cumulative outputs (the default) it holds every
// token. A stream that stalls or ends early leaves `finished` false, which
// the caller checks.
inline RequestOutput LastOutput(RequestOutputStream& stream,
                                absl::Duration timeout = absl::Seconds(120)) {
  RequestOutput last;
  while (!last.finished) {
    absl::StatusOr<RequestOutput> o = stream.Next(timeout);
    if (!o.ok()) break;
    last = std::move(*o);
  }
  return last;
}

}  // namespace rill::engine::testing

#endif  // RILL_ENGINE_STREAM_DRAIN_H_
