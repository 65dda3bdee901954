// ProcessGroup: the child processes of `oar launch`. Each child is started
// with fork + exec in its own process group (so a terminal's Ctrl-C reaches
// the launcher only, which then stops them in order), dies with the
// launcher (PR_SET_PDEATHSIG), runs on the CPUs its spec names (set
// before exec, so every thread it starts inherits them), gets the listening
// sockets its spec hands it (systemd's LISTEN_FDS convention), and has its
// stdout and stderr read line by line by one reader thread and handed to a
// callback.
//
//   ProcessGroup g;
//   OAR_RETURN_IF_ERROR(g.Start({{"pserver.0", argv, env}}, on_line));
//   ... g.Poll() until every child has exited, g.StopAll() to end early;
//   g.Add(spec) starts one more while they run (an elastic job's joiner).
//
// Shutdown order (the destructor): SIGTERM to every live child, a grace
// period, SIGKILL, reap, then join the reader thread once every pipe is
// closed.
//
// Thread-safety: Start/Add/Poll/StopAll from one thread; the callback runs
// on the reader thread, one line at a time; a mutex guards the pipes the
// two share.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace oar::cli {

struct ChildSpec {
  std::string name;                                      // "pserver.0", "trainer.1"
  std::vector<std::string> argv;                         // argv[0] is the program
  std::vector<std::pair<std::string, std::string>> env;  // added to the launcher's environment
  std::vector<int> cpus = {};                            // the CPUs it runs on; empty: the launcher's
  // Listening sockets handed to the child as fds 3, 4, ... with LISTEN_FDS
  // and LISTEN_PID set (common/base/listen_sockets.h); Start closes the
  // launcher's copies once the child has them.
  std::vector<int> listen_fds = {};
};

struct ChildExit {
  size_t index;
  int code;    // exit code, or 128 + signal
  int signal;  // the signal that ended it, 0 if it exited
  pid_t pid;   // what its pid was
};

class ProcessGroup {
 public:
  using LineFn = std::function<void(size_t child, const std::string& line, bool from_stdout)>;

  ProcessGroup() = default;
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  absl::Status Start(std::vector<ChildSpec> children, LineFn on_line);
  // After Start: one more child, index size() - 1 once it returns.
  absl::Status Add(ChildSpec child);
  // Reaps children that have exited since the last call (without blocking).
  std::vector<ChildExit> Poll();
  // Sends `sig` to every child still running, or to child i only.
  void Signal(int sig);
  void SignalOne(size_t i, int sig);
  // SIGTERM, up to `grace_ms` for them to exit, then SIGKILL; reaps all.
  void StopAll(int grace_ms = 5000);
  bool running(size_t i) const { return pids_[i] > 0; }
  size_t size() const { return specs_.size(); }
  const ChildSpec& spec(size_t i) const { return specs_[i]; }
  // Once every child has exited: waits until the reader has passed on
  // every line they wrote (no Add after it).
  void DrainOutput();

 private:
  absl::Status StartOne(ChildSpec c);
  void ReadLoop();

  std::vector<ChildSpec> specs_;
  std::vector<pid_t> pids_;
  LineFn on_line_;
  absl::Mutex mu_;
  // Read ends: child i's stdout at 2i, stderr at 2i+1 (-1 once closed).
  std::vector<int> fds_ ABSL_GUARDED_BY(mu_);
  bool draining_ ABSL_GUARDED_BY(mu_) = false;  // the reader ends once every pipe is closed
  std::thread reader_;
};

}  // namespace oar::cli
