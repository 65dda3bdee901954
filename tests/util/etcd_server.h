// EtcdServer: a real etcd-server (Debian's `etcd`, installed by
// scripts/install-deps.sh) on loopback for one test, with its own data
// folder and ports; Kill and Restart (same folder and ports) as a test of
// an etcd outage needs. The destructor kills it and removes the folder.
//
//   OAR_NEED_TOOL(EtcdServer::Installed(), "etcd (Debian's etcd-server)");
//   auto etcd = EtcdServer::Start();
//   ASSERT_TRUE(etcd.ok()) << etcd.status();
//   auto client = elastic::EtcdClient::Connect((*etcd)->url(), absl::Seconds(5));
//
// or a fixture derived from EtcdTest, whose SetUp does that (server_, etcd_).
//
// Thread-safety: one test thread.
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/elastic/etcd_client.h"
#include "gtest/gtest.h"
#include "tests/util/need_tool.h"

namespace oar {

class EtcdServer {
 public:
  static bool Installed() { return std::filesystem::exists("/usr/bin/etcd"); }

  static absl::StatusOr<std::unique_ptr<EtcdServer>> Start() {
    std::unique_ptr<EtcdServer> s(new EtcdServer());
    char dir[] = "/tmp/oar_etcd_XXXXXX";
    if (mkdtemp(dir) == nullptr) return absl::InternalError("mkdtemp failed");
    s->dir_ = dir;
    s->client_port_ = FreePort();
    s->peer_port_ = FreePort();
    if (absl::Status st = s->Launch(); !st.ok()) return st;
    return s;
  }

  ~EtcdServer() {
    Kill();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::string url() const { return absl::StrCat("etcd://127.0.0.1:", client_port_); }
  std::string log() const { return dir_ + "/etcd.log"; }

  // SIGKILL, as a crash: nothing is flushed beyond what etcd synced.
  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // Starts it again on the same ports, and waits until it serves: with its
  // data (as a restarted pod with its volume), or without (`wipe`: every
  // key and lease lost, as a pod without one).
  absl::Status Restart(bool wipe = false) {
    Kill();
    if (wipe) {
      std::error_code ec;
      std::filesystem::remove_all(dir_ + "/data", ec);
    }
    return Launch();
  }

 private:
  EtcdServer() = default;

  static int FreePort() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    socklen_t len = sizeof(a);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(fd);
    return ntohs(a.sin_port);
  }

  absl::Status Launch() {
    const std::string client = absl::StrCat("http://127.0.0.1:", client_port_);
    const std::string peer = absl::StrCat("http://127.0.0.1:", peer_port_);
    std::vector<std::string> args = {"/usr/bin/etcd",
                                     "--name=oar-test",
                                     "--data-dir=" + dir_ + "/data",
                                     "--listen-client-urls=" + client,
                                     "--advertise-client-urls=" + client,
                                     "--listen-peer-urls=" + peer,
                                     "--initial-advertise-peer-urls=" + peer,
                                     "--initial-cluster=oar-test=" + peer,
                                     "--log-level=warn",
                                     "--logger=zap"};
    pid_ = ::fork();
    if (pid_ < 0) return absl::InternalError("fork failed");
    if (pid_ == 0) {
      const std::string out = log();
      FILE* f = std::freopen(out.c_str(), "a", stdout);
      (void)f;
      ::dup2(STDOUT_FILENO, STDERR_FILENO);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    auto c = elastic::EtcdClient::Connect(url(), absl::Milliseconds(500));
    if (!c.ok()) return c.status();
    const absl::Time until = absl::Now() + absl::Seconds(20);
    absl::Status last;
    while (absl::Now() < until) {
      last = (*c)->Get("/oar-test-ready").status();
      if (last.ok()) return absl::OkStatus();
      absl::SleepFor(absl::Milliseconds(50));
    }
    return absl::DeadlineExceededError(
        absl::StrCat("etcd did not serve within 20 s (see ", log(), "): ", last.message()));
  }

  std::string dir_;
  int client_port_ = 0, peer_port_ = 0;
  pid_t pid_ = -1;
};

// A test with its own etcd-server and a client of it: skipped where etcd
// is not installed (failed under CI=true, where it must be).
class EtcdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    OAR_NEED_TOOL(EtcdServer::Installed(), "etcd (Debian's etcd-server)");
    auto server = EtcdServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    auto client = elastic::EtcdClient::Connect(server_->url(), absl::Seconds(5));
    ASSERT_TRUE(client.ok()) << client.status();
    etcd_ = std::move(*client);
  }
  std::unique_ptr<EtcdServer> server_;
  std::unique_ptr<elastic::EtcdClient> etcd_;
};

}  // namespace oar
