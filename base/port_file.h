// Writes the port a server bound (with --port=0) to a file, for launchers and
// tests that wait on it. Written to <path>.tmp and renamed, so a reader never
// sees a partial number.
#ifndef RILL_BASE_PORT_FILE_H_
#define RILL_BASE_PORT_FILE_H_

#include <string>

#include "absl/status/status.h"

namespace rill::base {

// Fails (naming the path and the reason) when the file cannot be written, e.g.
// when its directory does not exist; a launcher waiting on it would otherwise
// wait for its whole start timeout.
absl::Status WritePortFile(const std::string& path, int port);

}  // namespace rill::base

#endif  // RILL_BASE_PORT_FILE_H_
