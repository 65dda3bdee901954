#include "trainer/collective/ring_link.h"

#include <boost/asio.hpp>
#include <chrono>
#include <cstring>
#include <deque>

#include "absl/strings/str_cat.h"
#include "common/base/listen_sockets.h"
#include "common/base/status.h"

namespace oar {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

constexpr char kMagic[8] = {'O', 'A', 'R', 'R', 'I', 'N', 'G', '1'};
// The acceptor's answer: this magic, a Verdict byte, and its ring size.
constexpr char kAckMagic[7] = {'O', 'A', 'R', 'A', 'C', 'K', '2'};
constexpr size_t kAckBytes = 7 + 1 + 4;
enum Verdict : char { kOtherJob = 0, kWelcome = 1, kWrongRank = 2, kWrongSize = 3 };
constexpr size_t kTokenBytes = 32;
constexpr size_t kHandshakeBytes = 8 + kTokenBytes + 4 + 4;
constexpr int kSocketBuffer = 4 << 20;

std::chrono::steady_clock::time_point Steady(absl::Time t) {
  return std::chrono::steady_clock::now() +
         std::chrono::nanoseconds(absl::ToInt64Nanoseconds(std::max(t - absl::Now(), absl::ZeroDuration())));
}

std::string Handshake(const std::string& token, int rank, int size) {
  std::string h(kHandshakeBytes, '\0');
  std::memcpy(h.data(), kMagic, 8);
  std::memcpy(h.data() + 8, token.data(), std::min(token.size(), kTokenBytes));
  const int32_t r = rank, n = size;
  std::memcpy(h.data() + 8 + kTokenBytes, &r, 4);
  std::memcpy(h.data() + 12 + kTokenBytes, &n, 4);
  return h;
}

absl::StatusOr<tcp::endpoint> Resolve(asio::io_context& io, const std::string& ep) {
  const size_t colon = ep.rfind(':');
  if (colon == std::string::npos)
    return absl::InvalidArgumentError(absl::StrCat("endpoint '", ep, "' is not host:port"));
  boost::system::error_code ec;
  tcp::resolver resolver(io);
  auto results = resolver.resolve(ep.substr(0, colon), ep.substr(colon + 1), ec);
  if (ec || results.empty()) {
    return absl::UnavailableError(absl::StrCat("cannot resolve '", ep, "': ", ec.message()));
  }
  return results.begin()->endpoint();
}

void Tune(tcp::socket& s) {
  boost::system::error_code ec;
  s.set_option(tcp::no_delay(true), ec);
  s.set_option(asio::socket_base::send_buffer_size(kSocketBuffer), ec);
  s.set_option(asio::socket_base::receive_buffer_size(kSocketBuffer), ec);
}

}  // namespace

class RingLink::Impl {
 public:
  asio::io_context io;
  tcp::socket to_next{io}, from_prev{io};
  std::vector<char> scratch[2];
  // Exchange state.
  std::deque<Piece> queue;
  bool writing = false;
  absl::Status error;
  bool broken = false;

  // Runs the loop until `done` or the deadline; on failure cancels the
  // sockets and runs the aborted handlers out (they reference the caller's
  // state) before returning.
  // `cancel_more` cancels the caller's other pending operations (an
  // acceptor, a timer) so that none outlives the call.
  absl::Status RunUntil(const std::function<bool()>& done, absl::Time deadline,
                        const std::function<std::string()>& late, const std::function<void()>& cancel_more = nullptr) {
    io.restart();
    while (error.ok() && !done()) {
      if (absl::Now() >= deadline || io.run_one_until(Steady(deadline)) == 0) {
        if (!done() && error.ok()) error = absl::DeadlineExceededError(late());
      }
    }
    if (!error.ok()) {
      boost::system::error_code ec;
      to_next.cancel(ec);
      from_prev.cancel(ec);
      if (cancel_more) cancel_more();
      io.restart();
      io.run();
      broken = true;
    }
    return error;
  }

  void Fail(absl::Status s) {
    if (error.ok()) error = std::move(s);
  }

  void StartWrite(const std::function<std::string(const boost::system::error_code&)>& why) {
    if (writing || queue.empty() || !error.ok()) return;
    writing = true;
    const Piece p = queue.front();
    asio::async_write(to_next, asio::buffer(p.data, p.size), [this, why](const boost::system::error_code& ec, size_t) {
      writing = false;
      if (ec) {
        Fail(absl::UnavailableError(why(ec)));
        return;
      }
      queue.pop_front();
      StartWrite(why);
    });
  }
};

RingLink::RingLink(std::unique_ptr<Impl> impl, int prev, int next, std::vector<std::string> endpoints)
    : impl_(std::move(impl)), prev_(prev), next_(next), endpoints_(std::move(endpoints)) {}

RingLink::~RingLink() = default;

std::string RingLink::Peer(int rank) const {
  return absl::StrCat("rank ", rank, " (", endpoints_[static_cast<size_t>(rank)], ")");
}

absl::StatusOr<std::unique_ptr<RingLink>> RingLink::Connect(const Options& o) {
  const int n = static_cast<int>(o.endpoints.size());
  auto impl = std::make_unique<Impl>();
  const int prev = (o.rank + n - 1) % n, next = (o.rank + 1) % n;
  std::unique_ptr<RingLink> link(new RingLink(std::move(impl), prev, next, o.endpoints));
  Impl& m = *link->impl_;
  OAR_ASSIGN_OR_RETURN(tcp::endpoint self, Resolve(m.io, o.endpoints[static_cast<size_t>(o.rank)]));
  OAR_ASSIGN_OR_RETURN(tcp::endpoint succ, Resolve(m.io, o.endpoints[static_cast<size_t>(next)]));
  tcp::acceptor acceptor(m.io);
  boost::system::error_code ec;
  if (const int handed = TakeListenSocket(self.port()); handed >= 0) {  // common/base/listen_sockets.h
    acceptor.assign(self.protocol(), handed, ec);
  } else {
    acceptor.open(self.protocol(), ec);
    if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor.bind(self, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  }
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("rank ", o.rank, " cannot listen on ", o.endpoints[o.rank], ": ", ec.message()));
  }
  const absl::Time deadline = absl::Now() + o.timeout;
  const std::string mine = Handshake(o.token, o.rank, n);
  bool accepted = false, connected = false;
  // Accept the predecessor: check its handshake, answer 1 (or 0 and go on
  // accepting: a stranger is not the end of the job).
  char theirs[kHandshakeBytes];
  char verdict[kAckBytes] = {}, ack[kAckBytes] = {};
  std::string refused;  // why this rank refused a peer, for its own timeout
  std::function<void()> accept = [&] {
    acceptor.async_accept(m.from_prev, [&](const boost::system::error_code& e) {
      if (e) return m.Fail(absl::UnavailableError(absl::StrCat("accepting ", link->Peer(prev), ": ", e.message())));
      asio::async_read(m.from_prev, asio::buffer(theirs), [&](const boost::system::error_code& e2, size_t) {
        int32_t r = -1, size = -1;
        std::memcpy(&r, theirs + 8 + kTokenBytes, 4);
        std::memcpy(&size, theirs + 12 + kTokenBytes, 4);
        const Verdict v = e2 || std::memcmp(theirs, mine.data(), 8 + kTokenBytes) != 0 ? kOtherJob
                          : size != n                                                  ? kWrongSize
                          : r != prev                                                  ? kWrongRank
                                                                                       : kWelcome;
        const bool good = v == kWelcome;
        if (v == kWrongSize) {
          refused = absl::StrCat("; it refused a rank ", r, " whose ring has ", size, " ranks, not ", n,
                                 " (PADDLE_TRAINERS_NUM differs)");
        } else if (v == kWrongRank) {
          refused = absl::StrCat("; it refused a rank ", r, " where rank ", prev,
                                 " belongs (PADDLE_TRAINER_ID or PADDLE_TRAINER_ENDPOINTS differ)");
        } else if (v == kOtherJob) {
          refused = "; it refused a connection from another job (its token differs)";
        }
        std::memcpy(verdict, kAckMagic, 7);
        verdict[7] = v;
        const int32_t own_size = n;
        std::memcpy(verdict + 8, &own_size, 4);
        asio::async_write(m.from_prev, asio::buffer(verdict, kAckBytes),
                          [&, good](const boost::system::error_code&, size_t) {
                            if (good) {
                              accepted = true;
                              Tune(m.from_prev);
                              return;
                            }
                            boost::system::error_code ignored;
                            m.from_prev.close(ignored);
                            accept();
                          });
      });
    });
  };
  // Connect to the successor, retrying while it does not listen yet.
  asio::steady_timer retry(m.io);
  std::string rejected;
  // A connection that breaks before the handshake's answer (the port may
  // still belong to the peer's rendezvous server, closing) is tried again;
  // an explicit refusal is final.
  std::function<void()> connect;
  auto again = [&] {
    boost::system::error_code ignored;
    m.to_next.close(ignored);
    retry.expires_after(std::chrono::milliseconds(50));
    retry.async_wait([&](const boost::system::error_code& te) {
      if (!te) connect();
    });
  };
  connect = [&] {
    m.to_next.async_connect(succ, [&](const boost::system::error_code& e) {
      if (e == asio::error::operation_aborted) return;
      if (e) return again();
      asio::async_write(m.to_next, asio::buffer(mine), [&](const boost::system::error_code& we, size_t) {
        if (we == asio::error::operation_aborted) return;
        if (we) return again();
        asio::async_read(m.to_next, asio::buffer(ack, kAckBytes), [&](const boost::system::error_code& re, size_t) {
          if (re == asio::error::operation_aborted) return;
          // Not our ring yet (the peer's port may still be its rendezvous
          // server): try again.
          if (re || std::memcmp(ack, kAckMagic, 7) != 0) return again();
          if (ack[7] != kWelcome) {
            int32_t their_size = 0;
            std::memcpy(&their_size, ack + 8, 4);
            const std::string why =
                ack[7] == kWrongSize
                    ? absl::StrCat(
                          "its ring has ", their_size, " ranks, this one ", n,
                          "; start every trainer with the same PADDLE_TRAINERS_NUM and PADDLE_TRAINER_ENDPOINTS")
                : ack[7] == kWrongRank ? absl::StrCat("it expects another rank before it, not ", o.rank,
                                                      "; check PADDLE_TRAINER_ID and PADDLE_TRAINER_ENDPOINTS")
                                       : std::string("it belongs to another job (its token differs)");
            return m.Fail(absl::PermissionDeniedError(absl::StrCat(link->Peer(next), " refused this rank: ", why)));
          }
          connected = true;
          Tune(m.to_next);
        });
      });
    });
  };
  if (n > 1) {
    accept();
    connect();
    auto stop = [&] {
      boost::system::error_code ignored;
      retry.cancel();
      acceptor.close(ignored);
    };
    absl::Status s = m.RunUntil(
        [&] { return accepted && connected; }, deadline,
        [&] {
          return absl::StrCat("rank ", o.rank, " could not form the ring within ", absl::FormatDuration(o.timeout),
                              ": ", connected ? "" : absl::StrCat(link->Peer(next), " never accepted"),
                              !connected && !accepted ? "; " : "",
                              accepted ? "" : absl::StrCat(link->Peer(prev), " never connected"), refused);
        },
        stop);
    stop();
    m.io.restart();
    m.io.run();  // the cancelled accept and timer run out: nothing refers to this frame after
    if (!s.ok()) return s;
  }
  return link;
}

void RingLink::QueueWrite(const char* data, size_t size) {
  impl_->queue.push_back({data, size});
  impl_->StartWrite([this](const boost::system::error_code& ec) {
    return absl::StrCat(Peer(next_), (ec == asio::error::eof ? " closed the connection" : ": " + ec.message()));
  });
}

absl::Status RingLink::Exchange(const std::vector<Piece>& out, char* in_header, size_t header_len,
                                const HeaderFn& check, char* in_dst, size_t in_len, size_t chunk,
                                const PieceFn& on_piece, absl::Time deadline) {
  Impl& m = *impl_;
  if (m.broken) return absl::FailedPreconditionError("the ring broke in an earlier operation");
  m.error = absl::OkStatus();
  m.queue.clear();
  auto peer_error = [this](int rank, const boost::system::error_code& ec) {
    return absl::StrCat(Peer(rank), ec == asio::error::eof || ec == asio::error::connection_reset
                                        ? " closed the connection (it died or failed)"
                                        : ": " + ec.message());
  };
  for (const Piece& p : out) {
    if (p.size > 0) QueueWrite(p.data, p.size);
  }
  bool reads_done = header_len == 0 && in_len == 0;
  size_t received = 0;
  int turn = 0;
  if (in_dst == nullptr) {
    for (auto& s : m.scratch) s.resize(std::max(s.size(), chunk));
  }
  std::function<void()> read_piece = [&] {
    const size_t n = std::min(chunk, in_len - received);
    char* dst = in_dst != nullptr ? in_dst + received : m.scratch[turn].data();
    asio::async_read(m.from_prev, asio::buffer(dst, n), [&, dst, n](const boost::system::error_code& ec, size_t) {
      if (ec) return m.Fail(absl::UnavailableError(peer_error(prev_, ec)));
      const size_t at = received;
      received += n;
      turn ^= 1;
      if (received < in_len) read_piece();  // the next piece lands while this one is used
      if (absl::Status s = on_piece(at, dst, n); !s.ok()) return m.Fail(s);
      if (received == in_len) reads_done = true;
    });
  };
  if (header_len > 0) {
    asio::async_read(m.from_prev, asio::buffer(in_header, header_len),
                     [&](const boost::system::error_code& ec, size_t) {
                       if (ec) return m.Fail(absl::UnavailableError(peer_error(prev_, ec)));
                       if (absl::Status s = check(in_header); !s.ok()) return m.Fail(s);
                       if (in_len == 0) {
                         reads_done = true;
                       } else {
                         read_piece();
                       }
                     });
  } else if (in_len > 0) {
    read_piece();
  }
  const absl::Time started = absl::Now();
  return m.RunUntil(
      [&] { return reads_done && m.queue.empty() && !m.writing; }, deadline,
      [&] {
        return reads_done ? absl::StrCat(Peer(next_), " took no data for ", absl::FormatDuration(absl::Now() - started))
                          : absl::StrCat(Peer(prev_), " sent nothing for ", absl::FormatDuration(absl::Now() - started),
                                         " (FLAGS_rpc_deadline; it died, hangs or the network is cut)");
      });
}

}  // namespace oar
