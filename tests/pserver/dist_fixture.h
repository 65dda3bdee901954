// A hand-laid distributed program set for the pserver tests (the transpiler
// issue builds these automatically): a linear model y = fc(x) with SGD,
// split into
//  - the single-process reference (main + startup),
//  - a trainer program: forward + backward, then send(grads), send_barrier,
//    recv(params), fetch_barrier (sync) or send + recv (async); and a
//    trainer startup that pulls the parameters (recv + fetch_barrier),
//  - a pserver program: block 0 = listen_and_serv, one optimize block per
//    parameter: sum of the trainers' `<grad>.trainer_<i>` and scale 1/N
//    (sync, N > 1), then the reference's sgd op.
//
// Thread-safety: test-only.
#pragma once

#include <chrono>
#include <cmath>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/api/layers.h"
#include "common/api/optimizer.h"
#include "common/api/unique_name.h"
#include "common/framework/executor.h"
#include "common/framework/op_registry.h"
#include "pserver/parameter_server.h"
#include "pserver/pserver_ops.h"
#include "tests/util/serving_net.h"
#include "trainer/dist_ops.h"

namespace oar {

struct DistPrograms {
  UniqueNameGuard names;
  Program main, startup;  // the reference
  Var loss;
  std::vector<std::pair<std::string, std::string>> params_grads;
  ProgramDesc trainer, trainer_startup, pserver;

  DistPrograms(const std::string& ep, int trainers, bool sync) {
    OpRegistry::ExtendGlobal(RegisterPserverOps);
    OpRegistry::ExtendGlobal(RegisterDistOps);
    main.set_random_seed(7);
    startup.set_random_seed(7);
    {
      ProgramGuard g(&main, &startup);
      Var x = layers::data("x", {4});
      Var y = layers::data("y", {1});
      loss = layers::mean(layers::square_error_cost(layers::fc(x, 1), y));
      optimizer::SGD(0.1f).minimize(loss);
    }
    const BlockDesc& ref = main.desc().Block(0);
    // Trainer: the reference without its optimize ops, plus the RPC ops.
    trainer = main.desc();
    BlockDesc* tb = trainer.MutableBlock(0);
    std::vector<OpDesc> sgd_ops;
    for (size_t i = tb->OpSize(); i-- > 0;) {
      if (tb->Op(i).type == "sgd") {
        sgd_ops.insert(sgd_ops.begin(), tb->Op(i));
        tb->RemoveOps(i, i + 1);
      }
    }
    std::vector<std::string> grads, params;
    for (const auto& op : sgd_ops) {
      params.push_back(op.Input("Param")[0]);
      grads.push_back(op.Input("Grad")[0]);
      params_grads.emplace_back(params.back(), grads.back());
    }
    const std::vector<std::string> eps(params.size(), ep);
    OpDesc* send = tb->AppendOp();
    send->type = "send";
    send->SetInput("X", grads);
    send->SetAttr("epmap", eps);
    if (sync) {
      OpDesc* sb = tb->AppendOp();
      sb->type = "send_barrier";
      sb->SetAttr("endpoints", std::vector<std::string>{ep});
    }
    OpDesc* recv = tb->AppendOp();
    recv->type = "recv";
    recv->SetOutput("Out", params);
    recv->SetAttr("epmap", eps);
    if (sync) {
      OpDesc* fb = tb->AppendOp();
      fb->type = "fetch_barrier";
      fb->SetAttr("endpoints", std::vector<std::string>{ep});
    }
    // Trainer startup: pull the pserver's parameters.
    BlockDesc* sb = trainer_startup.MutableBlock(0);
    for (const auto& p : params) *sb->Var(p) = *ref.FindVar(p);
    OpDesc* pull = sb->AppendOp();
    pull->type = "recv";
    pull->SetOutput("Out", params);
    pull->SetAttr("epmap", eps);
    if (sync) {
      OpDesc* fb = sb->AppendOp();
      fb->type = "fetch_barrier";
      fb->SetAttr("endpoints", std::vector<std::string>{ep});
    }
    // Pserver: block 0 declares parameters, the learning rate and every
    // gradient copy; blocks 1.. optimize.
    BlockDesc* p0 = pserver.MutableBlock(0);
    std::vector<std::string> grad_to_block;
    std::vector<int32_t> blocks;
    for (size_t k = 0; k < sgd_ops.size(); ++k) {
      const OpDesc& sgd = sgd_ops[k];
      for (const auto& n : {sgd.Input("Param")[0], sgd.Input("LearningRate")[0], sgd.Input("Grad")[0]}) {
        *p0->Var(n) = *ref.FindVar(n);
      }
      p0->Var(sgd.Input("Grad")[0])->persistable = true;  // as Fluid declares the merged gradient
      BlockDesc* ob = pserver.AppendBlock(0);
      const int32_t id = static_cast<int32_t>(pserver.NumBlocks() - 1);
      blocks.push_back(id);
      grad_to_block.push_back(sgd.Input("Grad")[0] + ":" + std::to_string(id));
      if (sync && trainers > 1) {
        std::vector<std::string> copies;
        for (int t = 0; t < trainers; ++t) {
          const std::string c = sgd.Input("Grad")[0] + ".trainer_" + std::to_string(t);
          VarDesc* v = p0->Var(c);
          *v = *ref.FindVar(sgd.Input("Grad")[0]);
          v->name = c;
          copies.push_back(c);
        }
        OpDesc* sum = ob->AppendOp();
        sum->type = "sum";
        sum->SetInput("X", copies);
        sum->SetOutput("Out", {sgd.Input("Grad")[0]});
        OpDesc* scale = ob->AppendOp();
        scale->type = "scale";
        scale->SetInput("X", {sgd.Input("Grad")[0]});
        scale->SetOutput("Out", {sgd.Input("Grad")[0]});
        scale->SetAttr("scale", 1.0f / static_cast<float>(trainers));
      }
      *ob->AppendOp() = sgd;
    }
    OpDesc* ls = p0->PrependOp();
    ls->type = "listen_and_serv";
    ls->SetAttr("endpoint", ep);
    ls->SetAttr("Fanin", int32_t{trainers});
    ls->SetAttr("optimize_blocks", BlockRefs{blocks});
    ls->SetAttr("grad_to_block_id", grad_to_block);
    ls->SetAttr("sync_mode", sync);
    ls->SetAttr("distributed_mode", int32_t{sync ? 0 : 1});
  }

  // Sample i of step s: deterministic values.
  static FeedMap Batch(int step, int begin, int end) {
    std::vector<float> xs, ys;
    for (int i = begin; i < end; ++i) {
      float target = 0.5f;
      for (int k = 0; k < 4; ++k) {
        const float v = std::sin(0.7f * (i + 1) * (k + 1) + 0.1f * step);
        xs.push_back(v);
        target += (k + 1) * 0.3f * v;
      }
      ys.push_back(target);
    }
    const int64_t n = end - begin;
    return {{"x", MakeTensor<float>({n, 4}, xs)}, {"y", MakeTensor<float>({n, 1}, ys)}};
  }
};

// A config for `d`'s pserver program as its listen_and_serv says (fan-in
// `fanin`), on 127.0.0.1 with a free port, over `transport`.
inline PserverConfig PserverConfigOf(const DistPrograms& d, int fanin, int timeout_ms, rpc::Transport* transport) {
  const OpDesc& ls = d.pserver.Block(0).Op(0);
  PserverConfig c;
  c.endpoint = "127.0.0.1:0";
  c.fanin = fanin;
  c.optimize_blocks = ls.GetAttr<BlockRefs>("optimize_blocks").idx;
  c.grad_to_block_id = *ParseGradToBlockId(ls.GetAttr<std::vector<std::string>>("grad_to_block_id"));
  c.timeout_ms = timeout_ms;
  c.transport = transport;
  return c;
}

// Waits (up to 10 s) for a pserver's port file; "127.0.0.1:<port>", or ""
// when it never appeared.
inline std::string WaitForPortFile(const std::string& path) {
  for (int i = 0; i < 1000; ++i) {
    std::ifstream in(path);
    std::string port;
    if (in >> port) return "127.0.0.1:" + port;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return "";
}

}  // namespace oar
