#include "trainer/collective/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace oar {

absl::StatusOr<std::unique_ptr<ShmSegment>> ShmSegment::Make(size_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("a shared segment of 0 bytes");
  const int fd = memfd_create("oar-collective", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  void* data = MAP_FAILED;
  // Its pages are taken now (fallocate), so a memory limit shows here, where
  // the job can still keep the ring, not as an OOM kill mid-training.
  int err = 0;
  if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    err = errno;
  } else if ((err = posix_fallocate(fd, 0, static_cast<off_t>(bytes))) == 0 &&
             fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0) {
    data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (data == MAP_FAILED) err = errno;
  } else if (err == 0) {
    err = errno;
  }
  if (data == MAP_FAILED) {
    absl::Status s =
        absl::UnavailableError(absl::StrCat("cannot make ", bytes, " bytes of shared memory: ", std::strerror(err)));
    if (fd >= 0) ::close(fd);
    return s;
  }
  return std::unique_ptr<ShmSegment>(new ShmSegment(static_cast<char*>(data), bytes, fd));
}

absl::StatusOr<std::unique_ptr<ShmSegment>> ShmSegment::Open(pid_t pid, int fd, size_t bytes) {
  const std::string path = absl::StrCat("/proc/", pid, "/fd/", fd);
  const int mine = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (mine < 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  struct stat st {};
  const int seals = fcntl(mine, F_GET_SEALS);
  if (fstat(mine, &st) != 0 || static_cast<size_t>(st.st_size) != bytes || seals < 0 || !(seals & F_SEAL_SHRINK)) {
    ::close(mine);
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is not a sealed segment of ", bytes, " bytes (another process's file)"));
  }
  void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, mine, 0);
  const int err = errno;
  ::close(mine);  // the mapping keeps the memory
  if (data == MAP_FAILED) {
    return absl::UnavailableError(absl::StrCat("cannot map ", path, ": ", std::strerror(err)));
  }
  return std::unique_ptr<ShmSegment>(new ShmSegment(static_cast<char*>(data), bytes, -1));
}

ShmSegment::~ShmSegment() {
  ::munmap(data_, size_);
  CloseFd();
}

void ShmSegment::CloseFd() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

}  // namespace oar
