#include "common/rpc/stream/tls_stream.h"

#include <openssl/ssl.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "boost/asio/connect.hpp"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/read.hpp"
#include "boost/asio/ssl.hpp"
#include "boost/asio/ssl/host_name_verification.hpp"
#include "boost/asio/strand.hpp"
#include "boost/asio/write.hpp"
#include "common/rpc/stream/tcp_stream.h"

namespace oar::rpc::stream {
namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
using asio::ip::tcp;

class TlsStream::Impl {
 public:
  explicit Impl(ssl::context ctx)
      : ctx_(std::move(ctx)), strand_(asio::make_strand(io_)), stream_(strand_, ctx_), work_(io_.get_executor()) {
    thread_ = std::thread([this] { io_.run(); });
  }
  ~Impl() {
    Close();
    work_.reset();
    io_.stop();
    thread_.join();
  }

  // Runs `start(handler)` on the strand and waits for the handler, at most
  // until `deadline` (then closes the stream and waits for the aborted
  // operation to end, so no buffer it uses is left behind).
  template <typename Start>
  boost::system::error_code Run(Start start, absl::Time deadline, bool* timed_out) {
    struct Outcome {
      absl::Mutex mu;
      bool done = false;
      boost::system::error_code ec;
    };
    auto out = std::make_shared<Outcome>();
    asio::post(strand_, [start, out]() mutable {
      start([out](const boost::system::error_code& ec, auto&&...) {
        absl::MutexLock l(&out->mu);
        out->ec = ec;
        out->done = true;
      });
    });
    absl::MutexLock l(&out->mu);
    *timed_out = !out->mu.AwaitWithDeadline(absl::Condition(&out->done), deadline);
    if (*timed_out) {
      out->mu.Unlock();
      Close();
      out->mu.Lock();
      out->mu.Await(absl::Condition(&out->done));
    }
    return out->ec;
  }

  void Close() {
    if (closed_.exchange(true)) return;
    asio::post(strand_, [this] {
      boost::system::error_code ec;
      stream_.lowest_layer().shutdown(tcp::socket::shutdown_both, ec);
      stream_.lowest_layer().close(ec);
    });
  }

  asio::io_context io_;
  ssl::context ctx_;
  asio::strand<asio::io_context::executor_type> strand_;
  ssl::stream<tcp::socket> stream_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::thread thread_;
  std::atomic<bool> closed_{false};
};

namespace {

ssl::context MakeContext() {
  ssl::context ctx(ssl::context::tls);
  ctx.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                  ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  return ctx;
}

}  // namespace

TlsStream::TlsStream(std::unique_ptr<Impl> impl, std::string peer, bool server)
    : impl_(std::move(impl)), peer_(std::move(peer)), server_(server) {}

TlsStream::~TlsStream() = default;

absl::StatusOr<std::unique_ptr<TlsStream>> TlsStream::Connect(const std::string& host, int port,
                                                              const std::string& ca_pem, absl::Time deadline) {
  const std::string where = absl::StrCat(host, ":", port);
  ssl::context ctx = MakeContext();
  boost::system::error_code ec;
  ctx.add_certificate_authority(asio::buffer(ca_pem), ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("--rpc_tls_ca: not a PEM certificate: ", ec.message()));
  auto impl = std::make_unique<Impl>(std::move(ctx));
  tcp::resolver resolver(impl->io_);
  auto addresses = resolver.resolve(host, std::to_string(port), ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot resolve ", where, ": ", ec.message()));
  Impl* p = impl.get();
  bool timed_out = false;
  ec = p->Run([p, addresses](auto done) { asio::async_connect(p->stream_.lowest_layer(), addresses, done); }, deadline,
              &timed_out);
  if (timed_out) return absl::DeadlineExceededError(absl::StrCat("connecting to ", where, " took too long"));
  if (ec) return absl::UnavailableError(absl::StrCat("cannot connect to ", where, ": ", ec.message()));
  p->stream_.lowest_layer().set_option(tcp::no_delay(true), ec);
  p->stream_.set_verify_mode(ssl::verify_peer);
  p->stream_.set_verify_callback(ssl::host_name_verification(host));
  SSL_set_tlsext_host_name(p->stream_.native_handle(), host.c_str());
  ec = p->Run([p](auto done) { p->stream_.async_handshake(ssl::stream_base::client, done); }, deadline, &timed_out);
  if (timed_out) return absl::DeadlineExceededError(absl::StrCat("TLS handshake with ", where, " took too long"));
  if (ec) return absl::UnavailableError(absl::StrCat("TLS handshake with ", where, " failed: ", ec.message()));
  return std::unique_ptr<TlsStream>(new TlsStream(std::move(impl), absl::StrCat("tls ", where), /*server=*/false));
}

absl::StatusOr<std::unique_ptr<TlsStream>> TlsStream::Accepted(tcp::socket socket, const std::string& cert_pem,
                                                               const std::string& key_pem, int socket_buffer_bytes) {
  ssl::context ctx = MakeContext();
  boost::system::error_code ec;
  ctx.use_certificate_chain(asio::buffer(cert_pem), ec);
  if (!ec) ctx.use_private_key(asio::buffer(key_pem), ssl::context::pem, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("--rpc_tls_cert/--rpc_tls_key do not load: ", ec.message()));
  const tcp::endpoint remote = socket.remote_endpoint(ec);
  const std::string peer =
      ec ? "tls (unknown peer)" : absl::StrCat("tls ", remote.address().to_string(), ":", remote.port());
  const auto protocol = socket.local_endpoint(ec).protocol();
  const int fd = socket.release(ec);
  auto impl = std::make_unique<Impl>(std::move(ctx));
  impl->stream_.lowest_layer().assign(protocol, fd, ec);
  if (ec) return absl::UnavailableError(absl::StrCat(peer, ": ", ec.message()));
  TcpStream::Tune(impl->stream_.next_layer(), socket_buffer_bytes);
  return std::unique_ptr<TlsStream>(new TlsStream(std::move(impl), peer, /*server=*/true));
}

absl::Status TlsStream::Open(absl::Time deadline) {
  if (!server_) return absl::OkStatus();
  Impl* p = impl_.get();
  bool timed_out = false;
  auto ec =
      p->Run([p](auto done) { p->stream_.async_handshake(ssl::stream_base::server, done); }, deadline, &timed_out);
  if (timed_out) return absl::DeadlineExceededError(absl::StrCat(peer_, ": the TLS handshake took too long"));
  if (ec) return absl::UnauthenticatedError(absl::StrCat(peer_, ": TLS handshake failed: ", ec.message()));
  return absl::OkStatus();
}

namespace {

absl::Status Outcome(const boost::system::error_code& ec, bool timed_out, bool closed, const std::string& peer,
                     const char* doing) {
  if (timed_out) return absl::DeadlineExceededError(absl::StrCat(peer, ": deadline passed while ", doing));
  if (!ec) return absl::OkStatus();
  if (closed) return absl::CancelledError(absl::StrCat(peer, ": stream closed"));
  if (ec == asio::error::eof || ec == ssl::error::stream_truncated) {
    return absl::UnavailableError(absl::StrCat(peer, " closed the connection"));
  }
  return absl::UnavailableError(absl::StrCat(peer, ": ", doing, " failed: ", ec.message()));
}

}  // namespace

absl::Status TlsStream::Read(void* dst, size_t n, absl::Time deadline) {
  Impl* p = impl_.get();
  bool timed_out = false;
  auto ec = p->Run([p, dst, n](auto done) { asio::async_read(p->stream_, asio::buffer(dst, n), done); }, deadline,
                   &timed_out);
  return Outcome(ec, timed_out, p->closed_.load(), peer_, "receiving");
}

absl::Status TlsStream::Write(const std::vector<ConstPiece>& pieces, absl::Time deadline) {
  std::vector<asio::const_buffer> buffers;
  buffers.reserve(pieces.size());
  for (const auto& piece : pieces) buffers.emplace_back(piece.data, piece.size);
  Impl* p = impl_.get();
  bool timed_out = false;
  auto ec = p->Run([p, &buffers](auto done) { asio::async_write(p->stream_, buffers, done); }, deadline, &timed_out);
  return Outcome(ec, timed_out, p->closed_.load(), peer_, "sending");
}

void TlsStream::Close() { impl_->Close(); }

}  // namespace oar::rpc::stream
