#include "common/metrics/metrics_server.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/base/listen_sockets.h"
#include "glog/logging.h"

namespace oar::metrics {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct MetricsServer::Impl {
  Options options;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  int port = 0;
  std::thread thread;

  Registry& registry() { return options.registry != nullptr ? *options.registry : Default(); }

  http::response<http::string_body> Answer(const http::request<http::string_body>& req) {
    http::response<http::string_body> res;
    res.version(req.version());
    res.keep_alive(false);
    res.set(http::field::server, "oar");
    if (req.method() != http::verb::get && req.method() != http::verb::head) {
      res.result(http::status::method_not_allowed);
      res.set(http::field::content_type, "text/plain");
      res.body() = "only GET\n";
    } else if (req.target() == "/metrics") {
      res.result(http::status::ok);
      res.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
      res.body() = registry().Render();
    } else if (req.target() == "/") {
      res.result(http::status::ok);
      res.set(http::field::content_type, "text/plain");
      res.body() = "oar: metrics at /metrics\n";
    } else {
      res.result(http::status::not_found);
      res.set(http::field::content_type, "text/plain");
      res.body() = absl::StrCat("no ", std::string(req.target()), " here; metrics at /metrics\n");
    }
    if (req.method() == http::verb::head) {
      res.content_length(res.body().size());
      res.body().clear();
    }
    res.prepare_payload();
    return res;
  }

  // One connection, one request, as an asynchronous chain on the server's
  // thread: read (bounded by io_timeout), answer, close. Errors (a client
  // that hangs up or stalls, a request that is not HTTP) end the connection
  // and nothing else.
  struct Session : std::enable_shared_from_this<Session> {
    Session(tcp::socket socket, Impl* server) : stream(std::move(socket)), server(server) {}
    void Start() {
      stream.expires_after(std::chrono::milliseconds(absl::ToInt64Milliseconds(server->options.io_timeout)));
      parser.body_limit(64 * 1024);
      http::async_read(stream, buffer, parser, [self = shared_from_this()](beast::error_code ec, size_t) {
        if (ec) return;
        self->response = self->server->Answer(self->parser.get());
        http::async_write(self->stream, self->response, [self](beast::error_code ec, size_t) {
          self->stream.socket().shutdown(tcp::socket::shutdown_both, ec);
        });
      });
    }
    beast::tcp_stream stream;
    Impl* server;
    beast::flat_buffer buffer;
    http::request_parser<http::string_body> parser;
    http::response<http::string_body> response;
  };

  void Accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted) return;  // closing
      if (ec) {
        VLOG(1) << "metrics server " << port << ": accept: " << ec.message();
      } else {
        std::make_shared<Session>(std::move(socket), this)->Start();
      }
      Accept();
    });
  }
};

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Create(const Options& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  beast::error_code ec;
  const auto address = asio::ip::make_address(options.host, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("metrics server: '", options.host, "' is not an IP address"));
  const tcp::endpoint ep(address, static_cast<unsigned short>(options.port));
  auto fail = [&](const char* what) {
    return absl::UnavailableError(
        absl::StrCat("metrics server: cannot ", what, " ", options.host, ":", options.port, ": ", ec.message()));
  };
  if (const int handed = TakeListenSocket(options.port); handed >= 0) {  // common/base/listen_sockets.h
    impl->acceptor.assign(ep.protocol(), handed, ec);
    if (ec) return fail("serve the socket handed for");
  } else {
    impl->acceptor.open(ep.protocol(), ec);
    if (ec) return fail("open");
    impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    impl->acceptor.bind(ep, ec);
    if (ec) return fail("bind");
    impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) return fail("listen on");
  }
  impl->port = impl->acceptor.local_endpoint().port();
  impl->Accept();
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->io.run(); });
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

// Stopping the context ends the thread between handlers; sessions still
// pending are destroyed with the context (their sockets closed).
MetricsServer::~MetricsServer() {
  impl_->io.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

int MetricsServer::port() const { return impl_->port; }

std::string MetricsServer::endpoint() const { return absl::StrCat(impl_->options.host, ":", impl_->port); }

}  // namespace oar::metrics
