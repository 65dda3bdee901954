// LocalEtcd: a real etcd-server (Debian's `etcd`, installed by
// scripts/install-deps.sh) on loopback, with its own data folder and ports:
// the store of an elastic job `oar launch --elastic` runs on one machine,
// and of the tests. Kill and Restart (same folder and ports) are what a
// test of an etcd outage needs. The destructor kills it and removes the
// folder when it made it.
//
//   if (!LocalEtcd::Installed()) ... say: install etcd-server
//   OAR_ASSIGN_OR_RETURN(auto etcd, LocalEtcd::Start());
//   ... EtcdClient::Connect(etcd->url(), ...)
//
// Thread-safety: one thread uses it.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace oar::elastic {

class LocalEtcd {
 public:
  static bool Installed();

  // Starts one and waits (up to 20 s) until it serves. `dir`: its folder
  // (data in dir/data, its log in dir/etcd.log); empty: a new one in /tmp,
  // removed at the end.
  static absl::StatusOr<std::unique_ptr<LocalEtcd>> Start(const std::string& dir = "");
  ~LocalEtcd();
  LocalEtcd(const LocalEtcd&) = delete;
  LocalEtcd& operator=(const LocalEtcd&) = delete;

  std::string url() const;  // etcd://127.0.0.1:PORT
  std::string log() const { return dir_ + "/etcd.log"; }
  // Whether it is still running (false: it exited or was killed).
  bool alive();

  // SIGKILL, as a crash: nothing is flushed beyond what etcd synced.
  void Kill();
  // Starts it again on the same ports, and waits until it serves: with its
  // data (as a restarted pod with its volume), or without (`wipe`: every
  // key and lease lost, as a pod without one).
  absl::Status Restart(bool wipe = false);

 private:
  LocalEtcd() = default;
  absl::Status Launch();

  std::string dir_;
  bool own_dir_ = false;
  int client_port_ = 0, peer_port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace oar::elastic
