#include "tools/load/page_cache_dropper.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <system_error>

namespace kvs::load {

int DropPageCache(const std::string& dir) {
  int dropped = 0;
  std::error_code error;
  std::filesystem::recursive_directory_iterator it(
      dir, std::filesystem::directory_options::skip_permission_denied, error);
  for (const std::filesystem::recursive_directory_iterator end; !error && it != end; it.increment(error)) {
    std::error_code ignored;
    if (!it->is_regular_file(ignored)) continue;
    const int fd = ::open(it->path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;  // gone since the listing
    if (::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0) ++dropped;
    ::close(fd);
  }
  return dropped;
}

}  // namespace kvs::load
