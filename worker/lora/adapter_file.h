// Reading one file of a LoRA adapter directory that a client named (Admin
// AddLora): the file must resolve, symlinks included, under the allowed
// root, be a regular file (a FIFO or device would block or never end) and
// stay under a size limit. Reads never block on the file's type.
#ifndef RILL_WORKER_LORA_ADAPTER_FILE_H_
#define RILL_WORKER_LORA_ADAPTER_FILE_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace rill::worker {

// The whole contents of `path`. `root` non-empty: PermissionDenied when the
// file's real path (every symlink resolved) is not under `root`'s real path.
// NotFound when it does not exist; InvalidArgument when it is not a regular
// file or is larger than `max_bytes`. Messages name the file.
absl::StatusOr<std::string> ReadAdapterFile(const std::string& path, const std::string& root,
                                            size_t max_bytes);

}  // namespace rill::worker

#endif  // RILL_WORKER_LORA_ADAPTER_FILE_H_
