#include "common/rpc/stream/shared_region.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/rpc/stream/fd_message.h"
#include "common/rpc/stream/wire.h"

namespace oar::rpc::stream {
namespace {

constexpr size_t kAlign = 64;
constexpr uint32_t kRegionMagic = Magic('O', 'A', 'R', 'R');

absl::Status Errno(const std::string& what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<std::shared_ptr<SharedRegion>> SharedRegion::Create(size_t bytes, const char* name) {
  if (bytes == 0) return absl::InvalidArgumentError("a shared region of 0 bytes");
  const int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  void* data = MAP_FAILED;
  int read_only = -1;
  if (fd >= 0 && ::ftruncate(fd, static_cast<off_t>(bytes)) == 0 &&
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0) {
    data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    // What borrowers get: the same memory through a read-only open file,
    // which the kernel never maps writable.
    if (data != MAP_FAILED) read_only = ::open(absl::StrCat("/proc/self/fd/", fd).c_str(), O_RDONLY | O_CLOEXEC);
  }
  if (data == MAP_FAILED || read_only < 0) {
    absl::Status s = Errno(absl::StrCat("cannot make ", bytes, " bytes of shared memory to lend read-only"));
    if (data != MAP_FAILED) ::munmap(data, bytes);
    if (fd >= 0) ::close(fd);
    return s;
  }
  ::close(fd);  // the mapping keeps the memory; borrowers get `read_only`
  return std::shared_ptr<SharedRegion>(new SharedRegion(static_cast<char*>(data), bytes, read_only));
}

absl::StatusOr<std::shared_ptr<SharedRegion>> SharedRegion::MoveInto(const std::vector<Tensor*>& tensors) {
  size_t total = 0;
  for (const Tensor* t : tensors) {
    if (t == nullptr || !t->initialized() || !t->place().is_cpu() || t->nbytes() == 0) {
      return absl::InvalidArgumentError("only initialized, non-empty host tensors move into a shared region");
    }
    total += (t->nbytes() + kAlign - 1) / kAlign * kAlign;
  }
  OAR_ASSIGN_OR_RETURN(std::shared_ptr<SharedRegion> region, Create(total));
  size_t at = 0;
  for (Tensor* t : tensors) {
    std::memcpy(region->data_ + at, t->raw_data(), t->nbytes());
    const LoD lod = t->lod();
    *t = Tensor::OverMemory(region->data_ + at, t->dims(), t->dtype(), region);
    t->set_lod(lod);
    at += (t->nbytes() + kAlign - 1) / kAlign * kAlign;
  }
  return region;
}

absl::StatusOr<std::shared_ptr<const SharedRegion>> SharedRegion::Map(int fd, const std::string& lender) {
  struct stat st {};
  const int seals = fcntl(fd, F_GET_SEALS);
  if (fstat(fd, &st) != 0 || st.st_size <= 0 || seals < 0 || !(seals & F_SEAL_SHRINK)) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(lender, " lent shared memory that is empty or not sealed against shrinking"));
  }
  const size_t bytes = static_cast<size_t>(st.st_size);
  void* data = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (data == MAP_FAILED) {
    return Errno(absl::StrCat("cannot map the ", bytes, " bytes of shared memory ", lender,
                              " lent (or run with --rpc_shm_lend_params=false, or --rpc_shm_lend_sends=false)"));
  }
  return std::shared_ptr<const SharedRegion>(new SharedRegion(static_cast<char*>(data), bytes, -1));
}

SharedRegion::~SharedRegion() {
  ::munmap(data_, size_);
  if (lend_fd_ >= 0) ::close(lend_fd_);
}

int64_t SharedRegion::OffsetOf(const void* p, size_t n) const {
  const auto at = reinterpret_cast<uintptr_t>(p), base = reinterpret_cast<uintptr_t>(data_);
  if (at < base || at - base > size_ || n > size_ - (at - base)) return -1;
  return static_cast<int64_t>(at - base);
}

const char* SharedRegion::At(uint64_t offset, uint64_t n) const {
  if (offset > size_ || n > size_ - offset) return nullptr;
  return data_ + offset;
}

absl::Status SendRegion(int socket, const SharedRegion& region) {
  FdMessage<uint32_t> m;
  m.body = kRegionMagic;
  m.Attach(region.lend_fd());
  if (::sendmsg(socket, &m.msg, MSG_NOSIGNAL | MSG_DONTWAIT) != static_cast<ssize_t>(sizeof(m.body))) {
    return Errno("lending shared memory");
  }
  return absl::OkStatus();
}

namespace {

// The region's fd sent by SendRegion on `socket` (owned by the caller).
absl::StatusOr<int> ReceiveRegionFd(int socket, const std::string& lender, absl::Time deadline) {
  pollfd p{socket, POLLIN, 0};
  const int64_t ms = std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now()));
  if (::poll(&p, 1, static_cast<int>(std::min<int64_t>(ms, 1 << 30))) <= 0) {
    return absl::UnavailableError(absl::StrCat(lender, " said it lent shared memory but sent none"));
  }
  FdMessage<uint32_t> m;
  const ssize_t got = ::recvmsg(socket, &m.msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  const int fd = m.Received();
  if (got != static_cast<ssize_t>(sizeof(m.body)) || m.body != kRegionMagic || fd < 0) {
    if (fd >= 0) ::close(fd);
    return absl::UnavailableError(absl::StrCat(lender, " said it lent shared memory but sent ",
                                               got == 0 ? "nothing before it hung up" : "a malformed message"));
  }
  return fd;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const SharedRegion>> ReceiveRegion(int socket, const std::string& lender,
                                                                  absl::Time deadline) {
  OAR_ASSIGN_OR_RETURN(const int fd, ReceiveRegionFd(socket, lender, deadline));
  return SharedRegion::Map(fd, lender);
}

absl::Status DiscardRegion(int socket, const std::string& lender, absl::Time deadline) {
  OAR_ASSIGN_OR_RETURN(const int fd, ReceiveRegionFd(socket, lender, deadline));
  ::close(fd);
  return absl::OkStatus();
}

}  // namespace oar::rpc::stream
