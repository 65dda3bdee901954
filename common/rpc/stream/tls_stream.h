// TlsStream: a ByteStream over TLS on TCP — Boost.Asio's SSL stream, used
// when certificates are given (--rpc_tls_cert/--rpc_tls_key on the server,
// --rpc_tls_ca on the client, the same files as gRPC's TLS). The client
// checks the server's certificate against the CA and the host name it
// dialled. One SSL object cannot be read and written by two threads at
// once, so each stream runs its SSL operations on a strand of its own I/O
// thread; Read and Write post there and wait, bounded by their deadlines (a
// deadline closes the stream: a TLS record cannot be half abandoned).
//
//   OAR_ASSIGN_OR_RETURN(auto s, TlsStream::Connect("10.0.0.2", 41234, ca_pem, deadline));
//
// Thread-safety: as ByteStream — one reader and one writer at a time, Close
// from anywhere.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "boost/asio/ip/tcp.hpp"
#include "common/rpc/stream/byte_stream.h"

namespace oar::rpc::stream {

class TlsStream final : public ByteStream {
 public:
  // Connects to host:port and completes the TLS handshake within
  // `deadline`, trusting `ca_pem`; Unavailable naming the address (and
  // what TLS said) otherwise.
  static absl::StatusOr<std::unique_ptr<TlsStream>> Connect(const std::string& host, int port,
                                                            const std::string& ca_pem, absl::Time deadline);
  // Server side: takes an accepted socket; the handshake runs in Open, on
  // the connection's own thread. InvalidArgument when the certificate or
  // key does not load.
  // `socket_buffer_bytes`: as TcpStream::Tune.
  static absl::StatusOr<std::unique_ptr<TlsStream>> Accepted(boost::asio::ip::tcp::socket socket,
                                                             const std::string& cert_pem, const std::string& key_pem,
                                                             int socket_buffer_bytes = 0);
  ~TlsStream() override;

  absl::Status Open(absl::Time deadline) override;
  absl::Status Read(void* dst, size_t n, absl::Time deadline) override;
  absl::Status Write(const std::vector<ConstPiece>& pieces, absl::Time deadline) override;
  void Close() override;
  const std::string& peer() const override { return peer_; }

 private:
  class Impl;
  explicit TlsStream(std::unique_ptr<Impl> impl, std::string peer, bool server);
  std::unique_ptr<Impl> impl_;
  std::string peer_;
  bool server_;
};

}  // namespace oar::rpc::stream
