// Networks for the transpiler tests, built with the layers API:
//  - FcNet: Fluid's test_dist_transpiler network, x[1000] → fc(1000) named
//    fc_w/fc_b → square_error_cost(y[1]) → mean, with a chosen optimizer,
//    LR schedule, and L2 decay + clip on fc_w;
//  - Transpile(): runs a DistributeTranspiler over a fresh copy of a net and
//    collects the trainer, trainer-startup and every pserver program pair.
//
// Thread-safety: test-only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "common/api/clip.h"
#include "common/api/layers.h"
#include "common/api/learning_rate_scheduler.h"
#include "common/api/optimizer.h"
#include "common/api/regularizer.h"
#include "common/api/unique_name.h"
#include "common/base/status.h"
#include "gtest/gtest.h"
#include "transpiler/distribute_transpiler.h"

namespace oar {

struct FcNetOptions {
  std::string optimizer = "sgd";  // sgd | adam | rmsprop
  std::string lr = "constant";    // constant | exponential | piecewise
  bool l2_and_clip = false;       // L2Decay + GradientClipByValue on fc_w
};

struct FcNet {
  UniqueNameGuard names;
  Program main, startup;

  explicit FcNet(const FcNetOptions& o = {}) {
    ProgramGuard g(&main, &startup);
    Var x = layers::data("x", {1000});
    ParamAttr w;
    w.name = "fc_w";
    if (o.l2_and_clip) {
      w.regularizer = regularizer::L2Decay(1e-4f);
      w.gradient_clip = GradientClipByValue(0.1f, -0.1f);
    }
    ParamAttr b;
    b.name = "fc_b";
    Var pred = layers::fc(x, 1000, "", w, b);
    Var y = layers::data("y", {1});
    Var loss = layers::mean(layers::square_error_cost(pred, y));
    std::unique_ptr<optimizer::Optimizer> opt;
    if (o.optimizer == "adam") {
      opt = std::make_unique<optimizer::Adam>(0.01f);
    } else if (o.optimizer == "rmsprop") {
      opt = std::make_unique<optimizer::RMSProp>(0.01f);
    } else {
      opt = std::make_unique<optimizer::SGD>(0.1f);
    }
    if (o.lr == "exponential") opt->set_learning_rate(layers::exponential_decay(1.0f, 100000, 0.5f, true));
    if (o.lr == "piecewise") opt->set_learning_rate(layers::piecewise_decay({10000, 20000}, {1.0f, 0.5f, 0.1f}));
    opt->minimize(loss);
    EXPECT_TRUE(main.status().ok()) << main.status();
  }
};

struct TranspiledSet {
  ProgramDesc trainer, trainer_startup;
  std::vector<ProgramDesc> pserver, pserver_startup;  // per endpoint, in order
};

inline const char kTwoPservers[] = "127.0.0.1:6174,127.0.0.1:6175";

inline absl::StatusOr<TranspiledSet> TranspileNet(const FcNetOptions& net_options,
                                                  DistributeTranspilerConfig config = {}, int trainer_id = 0,
                                                  int trainers = 2, bool sync = true,
                                                  const std::string& pservers = kTwoPservers) {
  FcNet net(net_options);
  DistributeTranspiler t(config);
  OAR_RETURN_IF_ERROR(t.transpile(trainer_id, &net.main.desc(), pservers, trainers, sync, &net.startup.desc()));
  TranspiledSet out;
  OAR_ASSIGN_OR_RETURN(out.trainer, t.get_trainer_program(/*wait_port=*/false));
  OAR_ASSIGN_OR_RETURN(out.trainer_startup, t.get_trainer_startup_program());
  for (absl::string_view ep : absl::StrSplit(pservers, ',')) {
    OAR_ASSIGN_OR_RETURN(auto pair, t.get_pserver_programs(std::string(ep)));
    out.pserver.push_back(std::move(pair.first));
    out.pserver_startup.push_back(std::move(pair.second));
  }
  return out;
}

// The first op of `type` in `b` (a test failure when there is none).
inline const OpDesc& OnlyOp(const BlockDesc& b, const std::string& type) {
  for (size_t i = 0; i < b.OpSize(); ++i) {
    if (b.Op(i).type == type) return b.Op(i);
  }
  static const OpDesc none;
  ADD_FAILURE() << "no " << type << " op";
  return none;
}

// FcNet's forward and backward ops (up to fc_b's gradient), as Fluid's
// Python layers write them.
inline const std::vector<std::string>& FcNetForwardBackward() {
  static const std::vector<std::string> ops = {
      "mul",         "elementwise_add",      "elementwise_sub",     "square", "mean", "fill_constant", "mean_grad",
      "square_grad", "elementwise_sub_grad", "elementwise_add_grad"};
  return ops;
}

inline std::vector<std::string> OpTypes(const BlockDesc& block) {
  std::vector<std::string> out;
  for (size_t i = 0; i < block.OpSize(); ++i) out.push_back(block.Op(i).type);
  return out;
}

}  // namespace oar
