// A 2-trainer pserver (sync unless told) of DistPrograms' program (SGD, lr 0.1), started
// and running its loop on a thread, over one transport ("grpc", or a
// --rpc_transport mode: "tcp", "shm", "auto"); plus helpers for the float
// variables the tests push and pull.
//
// Thread-safety: test-only; the test thread owns it.
#pragma once

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/rpc/grpc_transport.h"
#include "common/rpc/transport_select.h"
#include "gtest/gtest.h"
#include "pserver/parameter_server.h"
#include "tests/pserver/dist_fixture.h"

namespace oar {

struct RunningServer {
  DistPrograms d;
  Executor exe;
  Scope scope;
  std::unique_ptr<rpc::Transport> transport;
  std::unique_ptr<ParameterServer> ps;
  std::string ep;
  absl::Status result = absl::UnknownError("not run");
  std::atomic<bool> ended{false};  // Run returned (`result` is then set)
  std::thread loop;

  // `abort_echo_grace_ms`: PserverConfig's (-1: its default).
  RunningServer(const std::string& wire, int timeout_ms, bool sync = true, int abort_echo_grace_ms = -1)
      : d("127.0.0.1:0", 2, sync) {
    if (wire == "grpc") {
      transport = std::make_unique<rpc::GrpcTransport>();
    } else {
      transport = std::make_unique<rpc::SelectingTransport>(*rpc::ParseTransportMode(wire));
    }
    EXPECT_TRUE(exe.Run(d.startup.desc(), &scope).ok());
    PserverConfig config = PserverConfigOf(d, 2, timeout_ms, transport.get());
    config.sync_mode = sync;
    if (abort_echo_grace_ms >= 0) config.abort_echo_grace_ms = abort_echo_grace_ms;
    auto created = ParameterServer::Create(config, d.pserver, &scope);
    EXPECT_TRUE(created.ok()) << created.status();
    ps = *std::move(created);
    auto bound = ps->Start();
    EXPECT_TRUE(bound.ok()) << bound.status();
    ep = *bound;
    loop = std::thread([this] {
      result = ps->Run();
      ended.store(true);
    });
  }
  // Waits for the loop to end by itself (a barrier's timeout, every
  // trainer's COMPLETE); `result` then holds what Run returned.
  void Join() { loop.join(); }
  ~RunningServer() {
    if (ps) ps->Stop();  // a test may have destroyed it (shut its port)
    if (loop.joinable()) loop.join();
  }
};

inline Variable Floats(const DDim& dims, std::vector<float> values) {
  Variable v;
  Tensor* t = v.GetMutable<Tensor>();
  float* p = t->mutable_data<float>(dims);
  std::copy(values.begin(), values.end(), p);
  return v;
}

inline std::vector<float> Values(const Variable& v) {
  const Tensor& t = v.Get<Tensor>();
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

}  // namespace oar
