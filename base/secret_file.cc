#include "base/secret_file.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace rill::base {
namespace {

constexpr size_t kMaxSecretBytes = 4096;

}  // namespace

absl::StatusOr<std::string> ReadSecretFile(const std::string& path) {
  // O_NONBLOCK: a FIFO planted at the path must not hang start-up.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("secret file ", path, " cannot be read: ", std::strerror(errno)));
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat("secret file ", path, " is not a regular file"));
  }
  std::string text(kMaxSecretBytes + 1, '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  if (got > kMaxSecretBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("secret file ", path, " is over ", kMaxSecretBytes, " bytes"));
  }
  text.resize(got);
  std::string secret(absl::StripAsciiWhitespace(text));
  if (secret.empty()) return absl::InvalidArgumentError(absl::StrCat("secret file ", path, " is empty"));
  // It travels as a gRPC metadata value, which must be printable ASCII.
  for (char c : secret) {
    if (c < 0x20 || c > 0x7e) {
      return absl::InvalidArgumentError(
          absl::StrCat("secret file ", path, " holds a byte that is not printable ASCII"));
    }
  }
  return secret;
}

absl::StatusOr<std::string> ReadOptionalSecretFile(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0 && errno == ENOENT) return std::string();
  return ReadSecretFile(path);
}

absl::StatusOr<std::string> NewRandomSecret() {
  unsigned char bytes[32];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    const ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::InternalError(absl::StrCat("getrandom: ", std::strerror(errno)));
    got += static_cast<size_t>(n);
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

absl::Status WriteSecretFile(const std::string& path, const std::string& secret) {
  return WritePrivateFileAtomically(path, absl::StrCat(secret, "\n"));
}

absl::Status WritePrivateFileAtomically(const std::string& path, std::string_view text) {
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  unlink(tmp.c_str());
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("cannot create ", tmp, ": ", std::strerror(errno)));
  }
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  const bool ok = done == text.size() && fchmod(fd, 0600) == 0 && fsync(fd) == 0;
  const int err = errno;
  close(fd);
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(ok ? errno : err);
    unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("cannot write ", path, ": ", why));
  }
  return absl::OkStatus();
}

}  // namespace rill::base
