#include "common/rpc/stream/stream_server.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <list>
#include <thread>

#include "absl/strings/str_cat.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/local/stream_protocol.hpp"
#include "common/base/status.h"
#include "common/rpc/handler_pools.h"
#include "common/rpc/read_gate.h"
#include "common/rpc/stream/server_conn.h"
#include "common/rpc/stream/shm_stream.h"
#include "common/rpc/stream/tcp_stream.h"
#include "common/rpc/stream/tls_stream.h"
#include "glog/logging.h"

namespace oar::rpc::stream {
namespace asio = boost::asio;
using asio::ip::tcp;
using unix_stream = asio::local::stream_protocol;

class StreamServer::Impl {
 public:
  Impl(const ServerOptions& o, const RpcOptions& rpc, RpcHandler* handler, uint64_t cap, int slots)
      : pools_(o),
        gate_(slots),
        socket_buffer_bytes_(rpc.socket_buffer_bytes),
        shm_{.ring_bytes = static_cast<uint64_t>(rpc.shm_ring_bytes),
             .spin_us = rpc.shm_spin_us,
             .batch_wakeups = rpc.shm_batch_wakeups > 0},
        tcp_acceptor_(io_),
        unix_acceptor_(io_) {
    ctx_.handler = handler;
    ctx_.io_timeout = absl::Milliseconds(rpc.deadline_ms);
    ctx_.token = o.auth_token;
    ctx_.max_request = cap;
    ctx_.pools = &pools_;
    ctx_.gate = &gate_;
    lend_ = o.lend;
    ctx_.region = lend_.get();
    ctx_.map_client_regions = o.map_lent_sends;
  }

  // Binds the TCP acceptor and, with `shm`, the abstract socket named
  // after this process and the TCP port (unique on the host while it lives).
  absl::Status Bind(const std::string& host, bool shm) {
    boost::system::error_code ec;
    tcp::resolver resolver(io_);
    auto found = resolver.resolve(host, "0", ec);
    if (ec || found.empty()) {
      return absl::UnavailableError(absl::StrCat("cannot serve the stream transport on '", host, "': ", ec.message()));
    }
    tcp::endpoint ep = found.begin()->endpoint();
    tcp_acceptor_.open(ep.protocol(), ec);
    if (!ec) tcp_acceptor_.bind(ep, ec);
    if (!ec) tcp_acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
      return absl::UnavailableError(absl::StrCat("cannot listen on ", host, " (stream transport): ", ec.message()));
    port_ = tcp_acceptor_.local_endpoint().port();
    ctx_.endpoint = absl::StrCat(host, ":", port_, " (stream)");
    if (shm) {
      shm_name_ = absl::StrCat("@oar-stream-", ::getpid(), "-", port_);
      unix_stream::endpoint uep(std::string(1, '\0') + shm_name_.substr(1));
      unix_acceptor_.open(uep.protocol(), ec);
      if (!ec) unix_acceptor_.bind(uep, ec);
      if (!ec) unix_acceptor_.listen(asio::socket_base::max_listen_connections, ec);
      if (ec) return absl::UnavailableError(absl::StrCat("cannot listen on ", shm_name_, " (shm): ", ec.message()));
    }
    return absl::OkStatus();
  }

  void Run() {
    AcceptTcp();
    if (unix_acceptor_.is_open()) AcceptUnix();
    thread_ = std::thread([this] { io_.run(); });
  }

  void Stop() {
    if (stopped_) return;
    stopped_ = true;
    asio::post(io_, [this] {
      boost::system::error_code ec;
      tcp_acceptor_.close(ec);
      unix_acceptor_.close(ec);
    });
    io_.stop();
    if (thread_.joinable()) thread_.join();
    // Requests being served get to answer (a gen_nccl_id receiver stops
    // right after the handler took the id; its sender needs the reply).
    const absl::Time grace = absl::Now() + absl::Seconds(1);
    while (ctx_.in_flight.load() > 0 && absl::Now() < grace) absl::SleepFor(absl::Milliseconds(2));
    std::list<std::shared_ptr<ServerConn>> conns;
    {
      absl::MutexLock l(&mu_);
      conns.swap(conns_);
    }
    for (auto& c : conns) c->Close();
    for (auto& c : conns) c->Join();
    pools_.Stop();
  }

  int port() const { return port_; }
  // PEM contents; TLS on every TCP connection when set.
  void UseTls(std::string cert, std::string key) {
    tls_cert_ = std::move(cert);
    tls_key_ = std::move(key);
  }
  const std::string& shm_name() const { return shm_name_; }

 private:
  void Adopt(std::unique_ptr<ByteStream> stream) {
    auto conn = std::make_shared<ServerConn>(&ctx_, std::move(stream));
    std::list<std::shared_ptr<ServerConn>> done;
    {
      absl::MutexLock l(&mu_);
      for (auto it = conns_.begin(); it != conns_.end();) {
        if ((*it)->finished()) {
          done.push_back(*it);
          it = conns_.erase(it);
        } else {
          ++it;
        }
      }
      conns_.push_back(conn);
    }
    for (auto& c : done) c->Join();
    conn->Start();
  }

  void AcceptTcp() {
    tcp_acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
      if (ec) {
        if (tcp_acceptor_.is_open()) AcceptTcp();
        return;
      }
      if (tls_cert_.empty()) {
        TcpStream::Tune(socket, socket_buffer_bytes_);
        Adopt(std::make_unique<TcpStream>(std::move(socket)));
      } else {
        auto tls = TlsStream::Accepted(std::move(socket), tls_cert_, tls_key_, socket_buffer_bytes_);
        if (tls.ok()) {
          Adopt(*std::move(tls));
        } else {
          LOG(WARNING) << ctx_.endpoint << ": " << tls.status();
        }
      }
      AcceptTcp();
    });
  }

  void AcceptUnix() {
    unix_acceptor_.async_accept([this](boost::system::error_code ec, unix_stream::socket socket) {
      if (ec) {
        if (unix_acceptor_.is_open()) AcceptUnix();
        return;
      }
      const int fd = ::dup(socket.native_handle());
      socket.close(ec);
      // The client sends its rings right after connecting: a short wait.
      auto s =
          ShmStream::Accept(fd, absl::StrCat("shm client of ", ctx_.endpoint), absl::Now() + absl::Seconds(1), shm_);
      if (s.ok()) {
        Adopt(*std::move(s));
      } else {
        LOG(WARNING) << ctx_.endpoint << ": refused a shared-memory connection: " << s.status();
      }
      AcceptUnix();
    });
  }

  std::shared_ptr<const SharedRegion> lend_;  // before ctx_, which points into it
  ServerContext ctx_;
  HandlerPools pools_;
  ReadGate gate_;
  const int socket_buffer_bytes_;
  const ShmOptions shm_;
  asio::io_context io_;
  tcp::acceptor tcp_acceptor_;
  unix_stream::acceptor unix_acceptor_;
  std::thread thread_;
  int port_ = 0;
  std::string shm_name_;
  std::string tls_cert_, tls_key_;
  bool stopped_ = false;
  absl::Mutex mu_;
  std::list<std::shared_ptr<ServerConn>> conns_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::unique_ptr<StreamServer>> StreamServer::Start(const ServerOptions& options, const RpcOptions& rpc,
                                                                  RpcHandler* handler, bool shm) {
  OAR_RETURN_IF_ERROR(CheckEndpoint(options.endpoint));
  std::unique_ptr<StreamServer> s(new StreamServer());
  const uint64_t cap = MaxRequestBytes(options, *handler);
  s->impl_ = std::make_unique<Impl>(options, rpc, handler, cap, ReadSlots(options, cap));
  const bool tls = !options.tls_cert.empty() || !options.tls_key.empty();
  if (tls) {
    OAR_ASSIGN_OR_RETURN(std::string cert, ReadTlsFile("rpc_tls_cert", options.tls_cert));
    OAR_ASSIGN_OR_RETURN(std::string key, ReadTlsFile("rpc_tls_key", options.tls_key));
    s->impl_->UseTls(std::move(cert), std::move(key));
    shm = false;  // shared memory is offered only without TLS
    s->tls_ = true;
  }
  const std::string host = options.endpoint.substr(0, options.endpoint.rfind(':'));
  OAR_RETURN_IF_ERROR(s->impl_->Bind(host, shm));
  s->tcp_port_ = s->impl_->port();
  s->shm_name_ = s->impl_->shm_name();
  s->endpoint_ = absl::StrCat(host, ":", s->tcp_port_);
  s->impl_->Run();
  return s;
}

void StreamServer::Shutdown() {
  if (impl_ != nullptr) impl_->Stop();
}

StreamServer::~StreamServer() { Shutdown(); }

}  // namespace oar::rpc::stream
