// Runs a few processes side by side to the end — a pserver and its
// trainers started as Kubernetes starts them — and returns what each
// printed and its exit code. With ListenForChild (listen_socket.h) the
// servers among them are handed sockets that listen already.
//
//   HandedSocket ps = ListenForChild();
//   auto runs = RunTogether({{"pserver", argv, env, {}, {ps.fd}}, {"trainer.0", argv, env}}, 60);
//
// Thread-safety: any thread; each call is its own group.
#pragma once

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "cli/process_group.h"
#include "gtest/gtest.h"

namespace oar {

struct ChildRun {
  int code = -1;    // exit code; -1: still running at the timeout (then killed)
  std::string out;  // stdout and stderr, line by line as they came
};

inline std::vector<ChildRun> RunTogether(std::vector<cli::ChildSpec> specs, double timeout_s) {
  std::vector<ChildRun> runs(specs.size());
  absl::Mutex mu;
  cli::ProcessGroup group;
  const absl::Status started = group.Start(std::move(specs), [&](size_t c, const std::string& line, bool) {
    absl::MutexLock l(&mu);
    runs[c].out += line + "\n";
  });
  EXPECT_TRUE(started.ok()) << started;
  size_t exited = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (started.ok() && exited < runs.size() && std::chrono::steady_clock::now() < until) {
    for (const cli::ChildExit& e : group.Poll()) {
      runs[e.index].code = e.code;
      ++exited;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  group.StopAll(1000);
  group.DrainOutput();
  absl::MutexLock l(&mu);
  return runs;
}

}  // namespace oar
