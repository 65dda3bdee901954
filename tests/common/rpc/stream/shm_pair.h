// ShmPair (tests): the two ends of a ShmStream in one process, connected
// over an abstract Unix socket and handshaken — the server lending
// `region` (if the client asks: --rpc_shm_lend_params), the client offering
// `client_region`, which the server maps when `map_client_region`.
//
// Thread-safety: built on the test's thread; each end then has one reader
// and one writer at a time, as every ByteStream.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/rpc/stream/frame_io.h"
#include "common/rpc/stream/shared_region.h"
#include "common/rpc/stream/shm_stream.h"
#include "gtest/gtest.h"

namespace oar::rpc::stream {

struct ShmPair {
  // `client_maps_server`: the client asks for the server's region
  // (RpcOptions::shm_lend_params on the client).
  explicit ShmPair(const SharedRegion* region, const SharedRegion* client_region = nullptr,
                   bool map_client_region = false, bool client_maps_server = true) {
    const std::string name = absl::StrCat("@oar-shm-pair-test-", ::getpid());
    const int listening = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path + 1, name.data() + 1, name.size() - 1);
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
    EXPECT_EQ(::bind(listening, reinterpret_cast<sockaddr*>(&a), len), 0);
    EXPECT_EQ(::listen(listening, 1), 0);
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    auto c = ShmStream::Connect(name, "test server", deadline);
    EXPECT_TRUE(c.ok()) << c.status();
    auto s = ShmStream::Accept(::accept4(listening, nullptr, nullptr, SOCK_CLOEXEC), "test client", deadline);
    ::close(listening);
    EXPECT_TRUE(s.ok()) << s.status();
    if (!c.ok() || !s.ok()) return;
    client = *std::move(c);
    server = *std::move(s);
    absl::Status server_side;
    std::thread t([&] { server_side = ServerHandshake(server.get(), "", deadline, region, &lent, map_client_region); });
    const absl::Status client_side =
        ClientHandshake(client.get(), "", deadline, client_region, &server_maps, client_maps_server);
    t.join();
    EXPECT_TRUE(server_side.ok() && client_side.ok()) << server_side << " / " << client_side;
  }
  std::unique_ptr<ShmStream> client, server;
  bool lent = false;         // the server lent `region`
  bool server_maps = false;  // the server mapped `client_region`
};

}  // namespace oar::rpc::stream
