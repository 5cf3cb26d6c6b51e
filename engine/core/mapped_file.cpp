#include "engine/core/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "engine/core/error.hpp"

namespace tandem {

MappedFile::MappedFile(const std::string& path, const std::string& what, const std::string& hint,
                       bool random_access) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) TANDEM_FAIL_HINT("check the path and its permissions", what, " cannot be opened: ", std::strerror(errno));
  struct stat st {};
  const bool stated = ::fstat(fd, &st) == 0;
  const int stat_errno = errno;
  size_ = stated && S_ISREG(st.st_mode) ? static_cast<int64_t>(st.st_size) : 0;
  void* p = MAP_FAILED;
  if (size_ > 0) p = ::mmap(nullptr, static_cast<size_t>(size_), PROT_READ, MAP_SHARED, fd, 0);
  const int map_errno = errno;
  ::close(fd);
  if (!stated) TANDEM_FAIL_HINT("check the file", what, ": fstat failed: ", std::strerror(stat_errno));
  TANDEM_CHECK_HINT(S_ISREG(st.st_mode), hint, what, " is not a regular file");
  if (size_ == 0) return;
  if (p == MAP_FAILED)
    TANDEM_FAIL_HINT("check the file system supports mmap (a local disk does)", what, " cannot be memory-mapped (",
                     size_, " bytes): ", std::strerror(map_errno));
  data_ = static_cast<const uint8_t*>(p);
  if (random_access) ::madvise(p, static_cast<size_t>(size_), MADV_RANDOM);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), static_cast<size_t>(size_));
}

}  // namespace tandem
