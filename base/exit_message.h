// Why a process could not start, handed to whoever started it: the process
// writes one line to a file before it exits with code 2 (as Kubernetes'
// terminationMessagePath), the launcher reads it and reports it once instead
// of pointing at a log.
#ifndef RILL_BASE_EXIT_MESSAGE_H_
#define RILL_BASE_EXIT_MESSAGE_H_

#include <string>
#include <string_view>

namespace rill::base {

// The exit code of a process that cannot start with the configuration it was
// given (a bad flag, file or model): restarting it cannot help.
inline constexpr int kExitBadConfiguration = 2;

// Writes `message` (newlines become spaces, at most 4 KiB) to `path`; a
// no-op when `path` is empty. Best effort: the process is about to exit.
void WriteExitMessage(const std::string& path, std::string_view message);

// The message written there, or "" when there is none.
std::string ReadExitMessage(const std::string& path);

}  // namespace rill::base

#endif  // RILL_BASE_EXIT_MESSAGE_H_
