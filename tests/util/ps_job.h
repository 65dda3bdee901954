// A transpiled pserver job's pservers, running in the test process on the
// in-process transport, with every trainer's programs: JobModel's network
// (tests/util/inproc_job.h) transpiled by DistributeTranspiler with the
// given config for `trainers` trainers and two pservers, each pserver a
// ParameterServer configured from its listen_and_serv, serving on a thread
// of its own until every trainer completed. The trainers are the test's
// (TrainerSide): the communicator tests drive them step by step.
//
//   DistributeTranspilerConfig c;
//   c.sync_mode = false;
//   c.geo_sgd_mode = true;
//   PserverJob job(c, /*trainers=*/2);
//   TrainerSide t0(job);
//   ASSERT_TRUE(t0.exe.Run(job.trainer_startup[0], &t0.scope).ok());
//
// Thread-safety: test-only; jobs share the in-process endpoints 127.0.0.1:7300
// and 7301, so one at a time per process.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tests/util/inproc_job.h"

namespace oar {

// PserverJob's Build for a sliced sparse table: int64 ids -> an is_sparse
// embedding "emb" [4096, 8] (two blocks over the two pservers) -> fc(1) ->
// square error against "y" -> mean, trained by SGD at `lr`.
inline std::function<std::string(Program*, Program*)> SparseEmbeddingNet(float lr) {
  return [lr](Program* main, Program* startup) {
    startup->set_random_seed(3);
    ProgramGuard g(main, startup);
    ParamAttr emb_attr;
    emb_attr.name = "emb";
    Var ids = layers::data("ids", {1}, DataType::kInt64);
    Var emb = layers::embedding(ids, {4096, 8}, /*is_sparse=*/true, false, -1, emb_attr);
    Var loss = layers::mean(layers::square_error_cost(layers::fc(emb, 1), layers::data("y", {1})));
    optimizer::SGD(lr).minimize(loss);
    return loss.name();
  };
}

struct PserverJob {
  rpc::InProcessTransport transport{rpc::RpcOptions{.deadline_ms = 20000}};
  std::vector<std::string> eps = {"127.0.0.1:7300", "127.0.0.1:7301"};
  std::vector<ProgramDesc> trainer, trainer_startup;  // per trainer
  // Per trainer, after transpile(): for split_params() and config() only (the
  // programs it edited are gone).
  std::vector<std::unique_ptr<DistributeTranspiler>> transpilers;
  std::string loss;
  std::vector<std::unique_ptr<ProgramDesc>> programs;  // the servers read them while they run
  std::vector<std::unique_ptr<Scope>> scopes;
  std::vector<std::unique_ptr<ParameterServer>> servers;
  std::vector<std::thread> threads;
  std::vector<absl::Status> results;

  // `build` writes another network into (main, startup) and returns its
  // loss's name; null: JobModel's with SGD.
  using Build = std::function<std::string(Program* main, Program* startup)>;
  PserverJob(const DistributeTranspilerConfig& config, int trainers, const Build& build = nullptr) {
    OpRegistry::ExtendGlobal(RegisterPserverOps);
    OpRegistry::ExtendGlobal(RegisterDistOps);
    for (int id = 0; id < trainers; ++id) {
      UniqueNameGuard names;
      Program main, startup;
      if (build) {
        loss = build(&main, &startup);
      } else {
        JobModel m("sgd");
        loss = m.loss.name();
        main = m.main;
        startup = m.startup;
      }
      DistributeTranspiler t(config);
      const absl::Status s = t.transpile(id, &main, absl::StrJoin(eps, ","), trainers, config.sync_mode, &startup);
      EXPECT_TRUE(s.ok()) << s;
      transpilers.push_back(std::make_unique<DistributeTranspiler>(t));
      trainer.push_back(*t.get_trainer_program());
      trainer_startup.push_back(*t.get_trainer_startup_program());
      if (id == 0) Serve(t);
    }
  }
  ~PserverJob() {
    for (auto& th : threads) th.join();
  }
  // Ends pservers whose trainers never completed.
  void Stop() {
    for (auto& server : servers) server->Stop();
  }

 private:
  void Serve(const DistributeTranspiler& t) {
    results.assign(eps.size(), absl::OkStatus());
    for (size_t p = 0; p < eps.size(); ++p) {
      auto [program, startup] = *t.get_pserver_programs(eps[p]);
      programs.push_back(std::make_unique<ProgramDesc>(std::move(program)));
      scopes.push_back(std::make_unique<Scope>());
      EXPECT_TRUE(Executor().Run(startup, scopes.back().get()).ok());
      const BlockDesc& b0 = programs.back()->Block(0);
      auto c = ListenAndServConfig(b0.Op(b0.OpSize() - 1));
      EXPECT_TRUE(c.ok()) << c.status();
      c->transport = &transport;
      c->timeout_ms = 20000;
      auto server = ParameterServer::Create(*c, *programs.back(), scopes.back().get());
      EXPECT_TRUE(server.ok()) << server.status();
      EXPECT_TRUE((*server)->Start().ok());
      servers.push_back(std::move(*server));
    }
    // Once `servers` no longer grows: each thread reads its element.
    for (size_t p = 0; p < eps.size(); ++p) threads.emplace_back([this, p] { results[p] = servers[p]->Run(); });
  }
};

// A trainer's client, executor and scope; its communicator goes in env.
struct TrainerSide {
  explicit TrainerSide(PserverJob& job)
      : client(&job.transport, {.deadline_ms = 20000}),
        env(rpc::ClientEnv(&client)),
        exe(CPUPlace(), ExecutorOptions{.env = &env}) {}

  rpc::RpcClient client;
  RunEnv env;
  Executor exe;
  Scope scope;
};

}  // namespace oar
