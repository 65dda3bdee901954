// A pserver program set for rpc_bench: `n` parameters "p<i>" of `numel`
// floats, each with its optimize block (sgd or adam; sync with more than one
// trainer: sum of the trainers' "p<i>@GRAD.trainer_<t>" and scale 1/N
// first), and a startup program that fills parameters, optimizer state and
// the learning rate with constants.
//
// Thread-safety: stateless.
#pragma once

#include <string>
#include <vector>

#include "common/framework/program_desc.h"
#include "pserver/parameter_server.h"

namespace oar::bench {

struct BenchPserver {
  ProgramDesc main, startup;
  PserverConfig config;
};

inline BenchPserver MakeBenchPserver(int n, int64_t numel, bool adam, int fanin) {
  BenchPserver b;
  BlockDesc* g = b.main.MutableBlock(0);
  BlockDesc* s = b.startup.MutableBlock(0);
  auto declare = [&](const std::string& name, std::vector<int64_t> shape, bool persistable) {
    for (BlockDesc* blk : {g, s}) {
      VarDesc* v = blk->Var(name);
      v->shape = shape;
      v->persistable = persistable;
    }
    if (persistable) {
      OpDesc* fill = s->AppendOp();
      fill->type = "fill_constant";
      fill->SetOutput("Out", {name});
      fill->SetAttr("shape", std::vector<int64_t>(shape));
      fill->SetAttr("value", name.find("pow") != std::string::npos ? 0.9f : name == "lr" ? 0.01f : 0.5f);
    }
  };
  declare("lr", {1}, true);
  for (int i = 0; i < n; ++i) {
    const std::string p = "p" + std::to_string(i), grad = p + "@GRAD";
    declare(p, {numel}, true);
    declare(grad, {numel}, false);
    BlockDesc* ob = b.main.AppendBlock(0);
    const int id = static_cast<int>(b.main.NumBlocks() - 1);
    b.config.optimize_blocks.push_back(id);
    b.config.grad_to_block_id[grad] = id;
    if (fanin > 1) {
      std::vector<std::string> copies;
      for (int t = 0; t < fanin; ++t) {
        copies.push_back(grad + ".trainer_" + std::to_string(t));
        declare(copies.back(), {numel}, false);
      }
      OpDesc* sum = ob->AppendOp();
      sum->type = "sum";
      sum->SetInput("X", copies);
      sum->SetOutput("Out", {grad});
      OpDesc* scale = ob->AppendOp();
      scale->type = "scale";
      scale->SetInput("X", {grad});
      scale->SetOutput("Out", {grad});
      scale->SetAttr("scale", 1.0f / static_cast<float>(fanin));
    }
    OpDesc* opt = ob->AppendOp();
    opt->SetInput("Param", {p});
    opt->SetInput("Grad", {grad});
    opt->SetInput("LearningRate", {"lr"});
    opt->SetOutput("ParamOut", {p});
    if (adam) {
      opt->type = "adam";
      for (const auto& [slot, suffix, shape] :
           std::vector<std::tuple<std::string, std::string, int64_t>>{{"Moment1", "_m1", numel},
                                                                      {"Moment2", "_m2", numel},
                                                                      {"Beta1Pow", "_b1pow", 1},
                                                                      {"Beta2Pow", "_b2pow", 1}}) {
        declare(p + suffix, {shape}, true);
        opt->SetInput(slot, {p + suffix});
        if (slot.rfind("Moment", 0) == 0) opt->SetOutput(slot + "Out", {p + suffix});
      }
    } else {
      opt->type = "sgd";
    }
  }
  b.config.endpoint = "127.0.0.1:0";
  b.config.fanin = fanin;
  b.config.sync_mode = true;
  return b;
}

}  // namespace oar::bench
