// A whole pserver-mode job inside the test process, through the user's
// path: a model built with the layers API, DistributeTranspiler, each
// pserver a ParameterServer (configured from its program's listen_and_serv)
// and each trainer an Executor running its transpiled programs, all threads,
// over one transport — in-process (no sockets) or gRPC on loopback — with
// the trainers' calls optionally going through a FaultInjectingTransport.
// Tests compare its losses and parameters with a fault-free run or with a
// single process.
//
//   JobSpec spec;
//   spec.faults = *rpc::FaultSpec::Parse("seed=3,drop_reply=0.1");
//   JobResult r = RunJob(spec);
//
// The model: x[128] → fc(128, relu) "w1"/"b1" → fc(1) "w2"/"b2" → square
// error → mean, SGD 0.01 or Adam 0.002; w1 (16384 weights) is cut into two
// blocks, one per pserver.
//
// Thread-safety: test-only; RunJob's transports are its own (jobs on the
// in-process transport share its endpoints: one at a time per process).
#pragma once

#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/api/layers.h"
#include "common/api/optimizer.h"
#include "common/api/unique_name.h"
#include "common/base/status.h"
#include "common/framework/executor.h"
#include "common/rpc/fault_injection.h"
#include "common/rpc/grpc_transport.h"
#include "common/rpc/inprocess_transport.h"
#include "common/rpc/rpc_client.h"
#include "common/rpc/transport_select.h"
#include "gtest/gtest.h"
#include "pserver/parameter_server.h"
#include "pserver/pserver_ops.h"
#include "tests/util/listen_socket.h"
#include "trainer/dist_ops.h"
#include "transpiler/distribute_transpiler.h"

namespace oar {

class JobControl;

struct JobSpec {
  int pservers = 2;
  int trainers = 2;
  bool sync = true;
  std::string optimizer = "sgd";  // sgd | adam
  std::vector<int> steps;         // per trainer; empty: 10 each
  int batch = 8;                  // global batch
  // The wire: "inprocess" (no sockets), or on loopback "grpc", "tcp" or
  // "shm" (SelectingTransport in that mode, as --rpc_transport makes it).
  std::string wire = "inprocess";
  rpc::FaultSpec faults;  // on the trainers' calls
  int deadline_ms = 20000;
  int retry_times = 10;
  // Called by each trainer's thread after each of its steps (0-based).
  std::function<void(int trainer, int step, JobControl& job)> after_step;
};

struct JobResult {
  std::vector<absl::Status> pserver_status, trainer_status;
  std::vector<std::vector<float>> losses;                                 // per trainer, per step
  std::vector<std::map<std::string, std::vector<float>>> initial, final;  // per trainer
  std::vector<PserverStats> pserver_stats;
  rpc::FaultStats faults;
  int grad_blocks = 0;  // gradient blocks a trainer sends per step
  bool ok() const {
    for (const auto* v : {&pserver_status, &trainer_status}) {
      for (const auto& s : *v) {
        if (!s.ok()) return false;
      }
    }
    return true;
  }
  std::string Errors() const {
    std::string out;
    for (size_t i = 0; i < pserver_status.size(); ++i) {
      if (!pserver_status[i].ok()) absl::StrAppend(&out, "pserver ", i, ": ", pserver_status[i].ToString(), "\n");
    }
    for (size_t i = 0; i < trainer_status.size(); ++i) {
      if (!trainer_status[i].ok()) absl::StrAppend(&out, "trainer ", i, ": ", trainer_status[i].ToString(), "\n");
    }
    return out;
  }
};

// What a test's after_step hook may do to the running job.
class JobControl {
 public:
  // Every pserver saves a checkpoint into `dir` (as checkpoint_notify does),
  // sent by this trainer.
  absl::Status Checkpoint(const std::string& dir) {
    for (const auto& ep : endpoints) OAR_RETURN_IF_ERROR(client->AsyncCheckpointNotify(ep, dir, trainer)->Wait());
    return absl::OkStatus();
  }
  // Pserver p crashes (its peers see UNAVAILABLE) and starts again,
  // restored from its checkpoint in `dir`.
  absl::Status RestartPserver(int p, const std::string& dir) { return restart(p, dir); }

  std::vector<std::string> endpoints;
  rpc::RpcClient* client = nullptr;
  int trainer = 0;
  std::function<absl::Status(int, const std::string&)> restart;
};

inline const std::vector<std::string>& JobParams() {
  static const std::vector<std::string> names = {"b1", "b2", "w1", "w2"};
  return names;
}

// The model's programs (a fresh set each call; the same initial values).
struct JobModel {
  UniqueNameGuard names;
  Program main, startup;
  Var loss;
  explicit JobModel(const std::string& opt) {
    startup.set_random_seed(5);
    ProgramGuard g(&main, &startup);
    auto attr = [](const char* n) {
      ParamAttr a;
      a.name = n;
      return a;
    };
    Var x = layers::data("x", {128});
    Var h = layers::fc(x, 128, "relu", attr("w1"), attr("b1"));
    Var pred = layers::fc(h, 1, "", attr("w2"), attr("b2"));
    loss = layers::mean(layers::square_error_cost(pred, layers::data("y", {1})));
    if (opt == "adam") {
      optimizer::Adam(0.002f).minimize(loss);
    } else {
      optimizer::SGD(0.01f).minimize(loss);
    }
  }
};

// Rows [begin, end) of step `step`'s global batch.
inline FeedMap JobBatch(int step, int begin, int end) {
  std::vector<float> xs, ys;
  for (int i = begin; i < end; ++i) {
    float target = 0.3f;
    for (int k = 0; k < 128; ++k) {
      const float v = std::sin(0.41f * static_cast<float>(i + 1) + 0.13f * static_cast<float>(k) +
                               0.07f * static_cast<float>(step));
      xs.push_back(v);
      target += (k % 7 == 0 ? 0.2f : 0.0f) * v;
    }
    ys.push_back(target);
  }
  const int64_t n = end - begin;
  return {{"x", MakeTensor<float>({n, 128}, xs)}, {"y", MakeTensor<float>({n, 1}, ys)}};
}

inline JobResult RunJob(const JobSpec& spec) {
  OpRegistry::ExtendGlobal(RegisterPserverOps);
  OpRegistry::ExtendGlobal(RegisterDistOps);
  JobResult out;
  std::vector<int> steps = spec.steps;
  if (steps.empty()) steps.assign(static_cast<size_t>(spec.trainers), 10);
  std::vector<std::string> eps(static_cast<size_t>(spec.pservers));
  DistributeTranspilerConfig config;
  std::vector<ProgramDesc> trainer(static_cast<size_t>(spec.trainers)), trainer_startup(trainer.size());
  std::vector<ProgramDesc> pserver(eps.size()), pserver_startup(eps.size());
  std::string loss;
  // Picks the pservers' endpoints; every process transpiles the same model
  // the same way for them.
  auto transpile = [&] {
    for (int p = 0; p < spec.pservers; ++p) {
      eps[p] = spec.wire != "inprocess" ? ReservedEndpoint() : absl::StrCat("127.0.0.1:", 7100 + p);
    }
    for (int t = 0; t < spec.trainers; ++t) {
      JobModel m(spec.optimizer);
      loss = m.loss.name();
      DistributeTranspiler tr(config);
      absl::Status s = tr.transpile(t, &m.main, absl::StrJoin(eps, ","), spec.trainers, spec.sync, &m.startup);
      EXPECT_TRUE(s.ok()) << s;
      trainer[t] = *tr.get_trainer_program();
      trainer_startup[t] = *tr.get_trainer_startup_program();
      for (size_t p = 0; p < eps.size() && t == 0; ++p)
        std::tie(pserver[p], pserver_startup[p]) = *tr.get_pserver_programs(eps[p]);
    }
  };
  transpile();
  for (size_t i = 0; i < trainer[0].Block(0).OpSize(); ++i) {
    if (trainer[0].Block(0).Op(i).type == "send")
      out.grad_blocks += static_cast<int>(trainer[0].Block(0).Op(i).Input("X").size());
  }
  // The pservers' barrier bound and every call's deadline.
  rpc::RpcOptions rpc_options;
  rpc_options.deadline_ms = spec.deadline_ms;
  std::unique_ptr<rpc::Transport> base;
  if (spec.wire != "inprocess") {
    base = std::make_unique<rpc::SelectingTransport>(*rpc::ParseTransportMode(spec.wire), rpc_options);
  } else {
    base = std::make_unique<rpc::InProcessTransport>(rpc_options);
  }
  std::unique_ptr<rpc::FaultInjectingTransport> faulty;
  rpc::Transport* trainer_transport = base.get();
  if (spec.faults.Any()) {
    faulty = std::make_unique<rpc::FaultInjectingTransport>(base.get(), spec.faults);
    trainer_transport = faulty.get();
  }
  std::vector<std::thread> threads;
  // Pservers: each a ParameterServer run on its own thread.
  struct Pserver {
    std::unique_ptr<Scope> scope;
    std::unique_ptr<ParameterServer> server;
    std::thread thread;
    absl::Status status;
  };
  std::vector<Pserver> ps(eps.size());
  absl::Mutex ps_mu;  // restarts
  auto start_pserver = [&](size_t p, const std::string& restore_dir) -> absl::Status {
    ps[p].scope = std::make_unique<Scope>();
    Executor exe;
    OAR_RETURN_IF_ERROR(exe.Run(pserver_startup[p], ps[p].scope.get()).status());
    OAR_ASSIGN_OR_RETURN(PserverConfig c,
                         ListenAndServConfig(pserver[p].Block(0).Op(pserver[p].Block(0).OpSize() - 1)));
    c.transport = base.get();
    c.timeout_ms = spec.deadline_ms;
    if (!restore_dir.empty()) {
      OAR_ASSIGN_OR_RETURN(c.restored_step,
                           LoadPserverCheckpoint(exe, ps[p].scope.get(),
                                                 PserverCheckpointDir(restore_dir, c.pserver_id), pserver[p], c));
      c.restored = true;
    }
    OAR_ASSIGN_OR_RETURN(ps[p].server, ParameterServer::Create(c, pserver[p], ps[p].scope.get()));
    OAR_RETURN_IF_ERROR(ps[p].server->Start().status());
    ps[p].thread = std::thread([&, p] { ps[p].status = ps[p].server->Run(); });
    return absl::OkStatus();
  };
  out.pserver_status.assign(eps.size(), absl::OkStatus());
  // Each endpoint's socket listens already (ReservedEndpoint): no port can
  // be taken before its pserver serves it.
  for (size_t p = 0; p < eps.size(); ++p) out.pserver_status[p] = start_pserver(p, "");
  JobControl control;
  control.restart = [&](int p, const std::string& dir) {
    absl::MutexLock l(&ps_mu);
    auto* inproc = dynamic_cast<rpc::InProcessTransport*>(base.get());
    if (inproc != nullptr) inproc->Disconnect(eps[static_cast<size_t>(p)]);  // as its peers see a crash
    ps[p].server->Stop();
    ps[p].thread.join();
    ps[p].server.reset();
    return start_pserver(static_cast<size_t>(p), dir);
  };
  control.endpoints = eps;
  // Trainers.
  const size_t n = static_cast<size_t>(spec.trainers);
  out.trainer_status.assign(n, absl::OkStatus());
  out.losses.resize(n);
  out.initial.resize(n);
  out.final.resize(n);
  const int per = spec.batch / spec.trainers;
  for (size_t t = 0; t < n; ++t) {
    threads.emplace_back([&, t] {
      rpc::RpcClient client(trainer_transport, {.deadline_ms = spec.deadline_ms, .retry_times = spec.retry_times});
      const RunEnv env = rpc::ClientEnv(&client);
      Executor exe(CPUPlace(), ExecutorOptions{.env = &env});
      Scope scope;
      auto params = [&] {
        std::map<std::string, std::vector<float>> m;
        for (const auto& name : JobParams()) m[name] = TensorToVector<float>(scope.FindVar(name)->Get<Tensor>());
        return m;
      };
      absl::Status& s = out.trainer_status[t];
      s = client.WaitServerReady(eps, spec.deadline_ms);
      if (s.ok()) s = exe.Run(trainer_startup[t], &scope).status();
      if (s.ok()) out.initial[t] = params();
      const int begin = static_cast<int>(t) * per;
      for (int step = 0; step < steps[t] && s.ok(); ++step) {
        auto r = exe.Run(trainer[t], &scope, JobBatch(step, begin, begin + per), {loss});
        s = r.status();
        if (s.ok()) out.losses[t].push_back(TensorToVector<float>((*r)[0])[0]);
        if (s.ok() && spec.after_step) {
          JobControl mine = control;
          mine.client = &client;
          mine.trainer = static_cast<int>(t);
          spec.after_step(static_cast<int>(t), step, mine);
        }
      }
      if (s.ok()) out.final[t] = params();
      s.Update(exe.Close());
    });
  }
  for (auto& th : threads) th.join();
  for (size_t p = 0; p < ps.size(); ++p) {
    if (ps[p].thread.joinable()) ps[p].thread.join();
    if (out.pserver_status[p].ok()) out.pserver_status[p] = ps[p].status;
    out.pserver_stats.push_back(ps[p].server ? ps[p].server->stats() : PserverStats{});
  }
  if (faulty) out.faults = faulty->stats();
  ps.clear();
  return out;
}

}  // namespace oar
