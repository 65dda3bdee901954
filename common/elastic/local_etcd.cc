#include "common/elastic/local_etcd.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/elastic/etcd_client.h"

namespace oar::elastic {
namespace {

constexpr char kEtcd[] = "/usr/bin/etcd";

// A port free now (etcd binds its own sockets, so it cannot be handed one).
int FreePort() {
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

}  // namespace

bool LocalEtcd::Installed() { return std::filesystem::exists(kEtcd); }

absl::StatusOr<std::unique_ptr<LocalEtcd>> LocalEtcd::Start(const std::string& dir) {
  if (!Installed()) {
    return absl::FailedPreconditionError(
        absl::StrCat(kEtcd, " is missing: install Debian's etcd-server (scripts/install-deps.sh does)"));
  }
  std::unique_ptr<LocalEtcd> s(new LocalEtcd());
  if (dir.empty()) {
    char made[] = "/tmp/oar_etcd_XXXXXX";
    if (::mkdtemp(made) == nullptr) return absl::InternalError("mkdtemp failed");
    s->dir_ = made;
    s->own_dir_ = true;
  } else {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return absl::PermissionDeniedError(absl::StrCat(dir, ": ", ec.message()));
    s->dir_ = dir;
  }
  s->client_port_ = FreePort();
  s->peer_port_ = FreePort();
  if (absl::Status st = s->Launch(); !st.ok()) return st;
  return s;
}

LocalEtcd::~LocalEtcd() {
  Kill();
  if (!own_dir_) return;
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string LocalEtcd::url() const { return absl::StrCat("etcd://127.0.0.1:", client_port_); }

bool LocalEtcd::alive() {
  if (pid_ <= 0) return false;
  if (::waitpid(pid_, nullptr, WNOHANG) == pid_) pid_ = -1;
  return pid_ > 0;
}

void LocalEtcd::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

absl::Status LocalEtcd::Restart(bool wipe) {
  Kill();
  if (wipe) {
    std::error_code ec;
    std::filesystem::remove_all(dir_ + "/data", ec);
  }
  return Launch();
}

absl::Status LocalEtcd::Launch() {
  const std::string client = absl::StrCat("http://127.0.0.1:", client_port_);
  const std::string peer = absl::StrCat("http://127.0.0.1:", peer_port_);
  std::vector<std::string> args = {kEtcd,
                                   "--name=oar",
                                   "--data-dir=" + dir_ + "/data",
                                   "--listen-client-urls=" + client,
                                   "--advertise-client-urls=" + client,
                                   "--listen-peer-urls=" + peer,
                                   "--initial-advertise-peer-urls=" + peer,
                                   "--initial-cluster=oar=" + peer,
                                   "--log-level=warn",
                                   "--logger=zap"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string out = log();
  pid_ = ::fork();
  if (pid_ < 0) return absl::InternalError("fork failed");
  if (pid_ == 0) {
    FILE* f = std::freopen(out.c_str(), "a", stdout);
    (void)f;
    ::dup2(STDOUT_FILENO, STDERR_FILENO);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  auto c = EtcdClient::Connect(url(), absl::Milliseconds(500));
  if (!c.ok()) return c.status();
  const absl::Time until = absl::Now() + absl::Seconds(20);
  absl::Status last;
  while (absl::Now() < until && alive()) {
    last = (*c)->Get("/oar-ready").status();
    if (last.ok()) return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::DeadlineExceededError(absl::StrCat("etcd-server did not serve on 127.0.0.1:", client_port_,
                                                  " within 20 s (its log: ", log(), "): ", last.message()));
}

}  // namespace oar::elastic
