#include "worker/lora/adapter_file.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace rill::worker {
namespace {

absl::StatusOr<std::string> RealPath(const std::string& path) {
  char buf[PATH_MAX];
  if (realpath(path.c_str(), buf) == nullptr) {
    if (errno == ENOENT || errno == ENOTDIR) {
      return absl::NotFoundError(absl::StrCat("LoRA adapter file ", path, " does not exist"));
    }
    return absl::NotFoundError(
        absl::StrCat("LoRA adapter file ", path, " cannot be resolved: ", std::strerror(errno)));
  }
  return std::string(buf);
}

bool IsUnder(const std::string& path, const std::string& dir) {
  if (dir == "/") return true;
  return path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
         path[dir.size()] == '/';
}

}  // namespace

absl::StatusOr<std::string> ReadAdapterFile(const std::string& path, const std::string& root,
                                            size_t max_bytes) {
  absl::StatusOr<std::string> real = RealPath(path);
  if (!real.ok()) return real.status();
  if (!root.empty()) {
    char buf[PATH_MAX];
    if (realpath(root.c_str(), buf) == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("--lora_root ", root, " cannot be resolved: ", std::strerror(errno)));
    }
    if (!IsUnder(*real, buf)) {
      return absl::PermissionDeniedError(absl::StrCat(
          "LoRA adapter file ", path, " resolves to ", *real, ", outside the allowed root ", buf));
    }
  }
  // lstat first, so a FIFO or device is refused without being opened; the
  // open itself cannot block (O_NONBLOCK) or follow a symlink swapped in
  // since (O_NOFOLLOW), and fstat confirms what was opened.
  struct stat st;
  if (lstat(real->c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("LoRA adapter file ", path, " is not a regular file"));
  }
  const int fd = open(real->c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(
        absl::StrCat("LoRA adapter file ", path, " cannot be opened: ", std::strerror(errno)));
  }
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat("LoRA adapter file ", path, " is not a regular file"));
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat("LoRA adapter file ", path, " is ",
                                                   st.st_size, " bytes, over the limit of ",
                                                   max_bytes));
  }
  // One byte more than the limit allows: a file that grew is still refused.
  std::string data(static_cast<size_t>(st.st_size) + 1, '\0');
  size_t got = 0;
  while (got < data.size()) {
    const ssize_t n = read(fd, data.data() + got, data.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string err = std::strerror(errno);
      close(fd);
      return absl::InvalidArgumentError(
          absl::StrCat("LoRA adapter file ", path, " cannot be read: ", err));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
    if (got > max_bytes) break;
  }
  close(fd);
  if (got > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("LoRA adapter file ", path, " is over the limit of ", max_bytes, " bytes"));
  }
  data.resize(got);
  return data;
}

}  // namespace rill::worker
