// A pserver program's network in a test: a transport (auto: shm or a
// stream beside gRPC) of the given deadline, and the RunEnv its executor is
// given, whose on_serving publishes the endpoint its listen_and_serv bound
// (port 0: any free one).
//
//   ServingNet net(20000);
//   Executor exe(CPUPlace(), net.options());
//   std::thread t([&] { exe.Run(pserver_program, &scope); });
//   const std::string ep = net.WaitEndpoint();
//
// Thread-safety: test-only; on_serving runs on the serving thread, once.
#pragma once

#include <string>

#include "absl/synchronization/notification.h"
#include "common/framework/executor.h"
#include "common/framework/run_env.h"
#include "common/rpc/transport_select.h"

namespace oar {

struct ServingNet {
  explicit ServingNet(int deadline_ms) : transport(rpc::TransportMode::kAuto, {.deadline_ms = deadline_ms}) {
    env.transport = &transport;
    env.on_serving = [this](const std::string& ep) {
      endpoint = ep;
      bound.Notify();
      return absl::OkStatus();
    };
  }
  ExecutorOptions options() const { return ExecutorOptions{.env = &env}; }
  // The bound endpoint, or "" when none within 60 s.
  std::string WaitEndpoint() { return bound.WaitForNotificationWithTimeout(absl::Seconds(60)) ? endpoint : ""; }

  rpc::SelectingTransport transport;
  RunEnv env;
  absl::Notification bound;
  std::string endpoint;  // written before `bound` is notified
};

}  // namespace oar
