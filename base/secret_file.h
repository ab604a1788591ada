// Secrets handed to Rill processes in files, never on a command line (which
// any local user can read in `ps`): the engine's per-deployment secret and
// the admin token. `rill serve` writes a fresh secret per run into its run
// directory; Kubernetes mounts one from a Secret.
#ifndef RILL_BASE_SECRET_FILE_H_
#define RILL_BASE_SECRET_FILE_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace rill::base {

// The file's contents without surrounding whitespace (a trailing newline is
// common). InvalidArgument naming `path` when it cannot be read, is not a
// regular file, is empty, is over 4 KiB or holds other than printable
// ASCII (it travels as a gRPC metadata value).
absl::StatusOr<std::string> ReadSecretFile(const std::string& path);

// As ReadSecretFile, but "" when nothing exists at `path`: for the admin
// token, whose Kubernetes Secret is optional (a missing one leaves an empty
// mount, and Admin off).
absl::StatusOr<std::string> ReadOptionalSecretFile(const std::string& path);

// 256 random bits from the kernel, as 64 hex characters.
absl::StatusOr<std::string> NewRandomSecret();

// Writes `secret` to `path` with mode 0600 (a new file renamed over any old
// one, so no reader sees it half written and an existing file's wider mode
// or a planted symlink is not reused).
absl::Status WriteSecretFile(const std::string& path, const std::string& secret);

// Replaces `path` with `text` atomically: a new mode-0600 file, synced, then
// renamed over it, so a reader (or a crash) sees the old or the new content,
// never a part. Used for secrets and for state files (the LoRA registry).
absl::Status WritePrivateFileAtomically(const std::string& path, std::string_view text);

}  // namespace rill::base

#endif  // RILL_BASE_SECRET_FILE_H_
