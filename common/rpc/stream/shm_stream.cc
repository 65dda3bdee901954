#include "common/rpc/stream/shm_stream.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/rpc/stream/fd_message.h"
#include "common/rpc/stream/wire.h"

namespace oar::rpc::stream {
namespace {

constexpr uint32_t kOfferMagic = Magic('O', 'A', 'R', 'S');
constexpr uint64_t kMinRing = 64 << 10, kMaxRing = uint64_t{1} << 30;

struct Offer {
  uint32_t magic = kOfferMagic;
  uint32_t version = kVersion;
  uint64_t ring_bytes = 0;
};

using OfferMessage = FdMessage<Offer>;

absl::Status Errno(const std::string& what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

sockaddr_un AbstractAddress(const std::string& name, socklen_t* len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  // "@x" names the abstract socket "\0x".
  const size_t n = std::min(name.size(), sizeof(a.sun_path));
  std::memcpy(a.sun_path, name.data(), n);
  a.sun_path[0] = '\0';
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + n);
  return a;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShmStream>> ShmStream::Connect(const std::string& name, const std::string& peer,
                                                              absl::Time deadline, const ShmOptions& o) {
  if (name.size() < 2 || name[0] != '@') return absl::InvalidArgumentError(absl::StrCat("bad shm socket '", name, "'"));
  const uint64_t ring = o.ring_bytes;
  if (ring < kMinRing || ring > kMaxRing) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rpc_shm_ring_bytes=", ring, " is outside [", kMinRing, ", ", kMaxRing, "]"));
  }
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("socket");
  socklen_t len;
  sockaddr_un addr = AbstractAddress(name, &len);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    absl::Status s = Errno(absl::StrCat("no shared-memory listener of ", peer, " on this host"));
    ::close(fd);
    return s;
  }
  const size_t per = ShmRing::BytesFor(ring);
  const int mem = memfd_create("oar-shm-rings", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  void* memory = MAP_FAILED;
  if (mem >= 0 && ::ftruncate(mem, static_cast<off_t>(2 * per)) == 0) {
    memory = ::mmap(nullptr, 2 * per, PROT_READ | PROT_WRITE, MAP_SHARED, mem, 0);
  }
  if (memory == MAP_FAILED || fcntl(mem, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    absl::Status s = Errno(absl::StrCat("cannot make ", 2 * per, " bytes of shared memory"));
    if (memory != MAP_FAILED) ::munmap(memory, 2 * per);
    if (mem >= 0) ::close(mem);
    ::close(fd);
    return s;
  }
  std::unique_ptr<ShmStream> stream(new ShmStream(fd, memory, 2 * per, ring, /*client=*/true, peer, o));
  OfferMessage m;
  m.body.ring_bytes = ring;
  m.Attach(mem);
  const ssize_t sent = ::sendmsg(fd, &m.msg, MSG_NOSIGNAL);
  ::close(mem);  // the mapping and the server's copy keep it
  if (sent != static_cast<ssize_t>(sizeof(m.body))) return Errno(absl::StrCat("handing shared memory to ", peer));
  (void)deadline;  // a local connect and one datagram-sized send do not block
  return stream;
}

absl::StatusOr<std::unique_ptr<ShmStream>> ShmStream::Accept(int fd, const std::string& peer, absl::Time deadline,
                                                             const ShmOptions& o) {
  auto fail = [&](absl::Status s) {
    ::close(fd);
    return s;
  };
  pollfd p{fd, POLLIN, 0};
  const int64_t ms = std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now()));
  if (::poll(&p, 1, static_cast<int>(std::min<int64_t>(ms, 1 << 30))) <= 0) {
    return fail(absl::DeadlineExceededError(absl::StrCat(peer, " sent no shared memory")));
  }
  OfferMessage m;
  const Offer& offer = m.body;
  const ssize_t got = ::recvmsg(fd, &m.msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  const int mem = m.Received();
  auto bad = [&](const std::string& what) {
    if (mem >= 0) ::close(mem);
    return fail(absl::InvalidArgumentError(absl::StrCat(peer, " offered bad shared memory: ", what)));
  };
  if (got != static_cast<ssize_t>(sizeof(offer)) || mem < 0) return bad("no ring descriptor");
  if (offer.magic != kOfferMagic || offer.version != kVersion) return bad("unknown offer");
  if (offer.ring_bytes < kMinRing || offer.ring_bytes > kMaxRing)
    return bad(absl::StrCat(offer.ring_bytes, "-byte rings"));
  const size_t per = ShmRing::BytesFor(offer.ring_bytes);
  struct stat st {};
  // Sealed against shrinking, or the peer could cut the pages under us (SIGBUS).
  const int seals = fcntl(mem, F_GET_SEALS);
  if (fstat(mem, &st) != 0 || static_cast<uint64_t>(st.st_size) != 2 * per || seals < 0 || !(seals & F_SEAL_SHRINK)) {
    return bad("the memory is not a sealed ring pair of the size offered");
  }
  void* memory = ::mmap(nullptr, 2 * per, PROT_READ | PROT_WRITE, MAP_SHARED, mem, 0);
  ::close(mem);
  if (memory == MAP_FAILED) return fail(Errno("mapping the peer's shared memory"));
  return std::unique_ptr<ShmStream>(new ShmStream(fd, memory, 2 * per, offer.ring_bytes, /*client=*/false, peer, o));
}

ShmStream::ShmStream(int socket_fd, void* memory, size_t mapped, size_t ring_bytes, bool client, std::string peer,
                     const ShmOptions& o)
    : socket_fd_(socket_fd), memory_(memory), mapped_(mapped), peer_(std::move(peer)), batch_wakeups_(o.batch_wakeups) {
  char* base = static_cast<char*>(memory);
  const size_t per = ShmRing::BytesFor(ring_bytes);
  auto c2s = std::make_unique<ShmRing>(base, ring_bytes, client, o.spin_us);
  auto s2c = std::make_unique<ShmRing>(base + per, ring_bytes, client, o.spin_us);
  if (client) {
    out_ = std::move(c2s);
    in_ = std::move(s2c);
  } else {
    in_ = std::move(c2s);
    out_ = std::move(s2c);
  }
  in_->PayBeforeWaiting(out_.get());  // never sleep on the peer's bytes owing it a wake-up
}

ShmStream::~ShmStream() {
  Close();
  ::munmap(memory_, mapped_);
  ::close(socket_fd_);
}

void ShmStream::Close() {
  if (closed_.exchange(true)) return;
  in_->Close();
  out_->Close();
  ::shutdown(socket_fd_, SHUT_RDWR);
}

absl::Status ShmStream::LendRegion(const SharedRegion& region) { return Named(SendRegion(socket_fd_, region)); }

absl::Status ShmStream::MapLentRegion(absl::Time deadline) {
  OAR_ASSIGN_OR_RETURN(borrowed_, ReceiveRegion(socket_fd_, peer_, deadline));
  return absl::OkStatus();
}

absl::Status ShmStream::DropLentRegion(absl::Time deadline) {
  return Named(DiscardRegion(socket_fd_, peer_, deadline));
}

absl::Status ShmStream::PeerAlive() const {
  // The peer's hang-up, not bytes: a lent region's message may be waiting.
  pollfd p{socket_fd_, POLLRDHUP, 0};
  if (::poll(&p, 1, 0) > 0) return absl::UnavailableError(absl::StrCat(peer_, " closed the connection"));
  return absl::OkStatus();
}

absl::Status ShmStream::Named(absl::Status s) const {
  if (s.ok()) return s;
  if (absl::IsCancelled(s)) {
    if (closed_.load()) return absl::CancelledError(absl::StrCat(peer_, ": stream closed"));
    return absl::UnavailableError(absl::StrCat(peer_, " closed the connection"));
  }
  if (s.message().find(peer_) == 0) return s;
  return Rewrap(s, absl::StrCat(peer_, ": ", s.message()));
}

absl::Status ShmStream::Read(void* dst, size_t n, absl::Time deadline) {
  return Named(in_->Read(dst, n, deadline, [this] { return PeerAlive(); }));
}

absl::Status ShmStream::WaitReadable(absl::Time deadline) {
  return Named(in_->WaitReadable(deadline, [this] { return PeerAlive(); }));
}

absl::Status ShmStream::Write(const std::vector<ConstPiece>& pieces, absl::Time deadline) {
  return Named(out_->Write(pieces, deadline, [this] { return PeerAlive(); }));
}

absl::Status ShmStream::WriteMore(const std::vector<ConstPiece>& pieces, absl::Time deadline) {
  return Named(out_->Write(
      pieces, deadline, [this] { return PeerAlive(); }, /*defer_wake=*/true));
}

}  // namespace oar::rpc::stream
