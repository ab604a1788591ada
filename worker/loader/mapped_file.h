#ifndef RILL_WORKER_LOADER_MAPPED_FILE_H_
#define RILL_WORKER_LOADER_MAPPED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace rill::worker::loader {

// A read-only, private memory mapping of a whole file. The mapping lives as
// long as the object; pointers into data() are valid until destruction.
// An empty file maps to data() == nullptr, size() == 0.
class MappedFile {
 public:
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Drops this process's copies of the whole pages inside [p, p + n) (a
  // hint: the file is mapped read-only, so a later read faults the page back
  // in from the file). For data that was copied elsewhere at load, so it
  // stops counting in RSS. Ranges outside the mapping are ignored.
  void ReleasePages(const void* p, size_t n) const;

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}

  std::string path_;
  const uint8_t* data_;
  size_t size_;
};

}  // namespace rill::worker::loader

#endif  // RILL_WORKER_LOADER_MAPPED_FILE_H_
