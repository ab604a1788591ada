// Length-prefixed frames over a stream socket: the engine <-> rill-worker
// control channel. A frame is a small serialized protobuf header plus an
// optional raw payload (logits as float32), so bulk data is never copied
// through protobuf. Layout: u32 magic, u32 header bytes, u64 payload bytes,
// header, payload (little-endian, same machine).
#ifndef RILL_WORKER_IPC_FRAME_H_
#define RILL_WORKER_IPC_FRAME_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace rill::worker {

// Upper bounds a reader enforces, so a corrupt length cannot make it
// allocate gigabytes.
inline constexpr size_t kMaxFrameHeaderBytes = size_t{64} << 20;
inline constexpr size_t kMaxFramePayloadBytes = size_t{4} << 30;

// Writes one frame (blocking; retries short writes and EINTR; never raises
// SIGPIPE). Unavailable when the peer is gone.
absl::Status WriteFrame(int fd, const std::string& header, const void* payload = nullptr,
                        size_t payload_bytes = 0);

// Reads one frame into *header and *payload (payload resized to fit; may be
// null when the caller expects none). Unavailable with "closed" on EOF at a
// frame boundary or mid-frame; DataLoss on a bad magic or oversized length.
absl::Status ReadFrame(int fd, std::string* header, std::vector<char>* payload);

}  // namespace rill::worker

#endif  // RILL_WORKER_IPC_FRAME_H_
