#include "common/api/optimizer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/api/backward.h"
#include "common/api/clip.h"
#include "common/api/layer_helper.h"
#include "common/api/layers.h"
#include "common/api/regularizer.h"
#include "common/api/unique_name.h"

namespace oar {
namespace optimizer {

namespace {
constexpr OpRole kOptimizeRole = OpRole::kOptimize;
}

ParamsGrads Optimizer::minimize(const Var& loss, Program* startup, const std::vector<std::string>& parameter_list,
                                const std::set<std::string>& no_grad_set) {
  if (!loss.valid()) return {};
  ParamsGrads pg = append_backward(loss, parameter_list, no_grad_set);
  if (!loss.program()->status().ok()) return {};
  apply_gradients(pg, startup);
  return pg;
}

void Optimizer::apply_gradients(ParamsGrads params_grads, Program* startup) {
  if (params_grads.empty()) return;
  main_ = params_grads[0].first.program();
  startup_ = startup ? startup : default_startup_program();
  std::sort(params_grads.begin(), params_grads.end(),
            [](const auto& a, const auto& b) { return a.first.name() < b.first.name(); });
  // Layers called from here append to the parameters' programs.
  ProgramGuard guard(main_, startup_);
  params_grads = append_gradient_clip_ops(params_grads);
  params_grads = append_regularization_ops(params_grads, regularization_);
  if (!main_->status().ok() || params_grads.empty()) return;
  if (!lr_var_.valid()) {
    lr_var_ = layers::create_global_var({1}, learning_rate_, DataType::kFloat32, true,
                                        unique_name::Generate("learning_rate"));
  }
  std::vector<Var> params;
  for (const auto& [p, g] : params_grads) params.push_back(p);
  CreateAccumulators(params);
  for (const auto& [p, g] : params_grads) {
    if (!g.valid() || !p.desc().trainable) continue;
    RoleGuard role(main_, kOptimizeRole, {p.name(), g.name()});
    Var lr = LearningRateFor(p);
    if (!lr.valid()) return;
    AppendOptimizeOp(p, g, lr);
  }
  FinishUpdate(params_grads);
}

Var Optimizer::LearningRateFor(const Var& param) {
  float mult = param.desc().learning_rate;
  if (mult == 1.0f) return lr_var_;
  return layers::scale(lr_var_, mult);  // Fluid: global_lr * param_lr
}

Var Optimizer::AddAccumulator(const std::string& name, const Var& param, float fill, std::vector<int64_t> shape) {
  auto& slot = accumulators_[name][param.name()];
  if (slot.valid()) return slot;
  if (shape.empty()) shape = param.shape();
  std::string n = unique_name::Generate(absl::StrCat(param.name(), "_", name));
  LayerHelper h("optimizer");
  Var v = h.CreateGlobal(n, param.dtype(), shape);
  v.set_stop_gradient(true);
  h.InitInStartup(v.desc(), initializer::Constant(fill));
  slot = v;
  return v;
}

Var Optimizer::GetAccumulator(const std::string& name, const Var& param) const {
  auto it = accumulators_.find(name);
  if (it == accumulators_.end()) return Var();
  auto jt = it->second.find(param.name());
  return jt == it->second.end() ? Var() : jt->second;
}

bool Optimizer::AppendOp(const std::string& type, const std::map<std::string, std::vector<Var>>& inputs,
                         const std::map<std::string, std::vector<Var>>& outputs,
                         std::map<std::string, Attribute> attrs) {
  LayerHelper h(type, type);  // optimizer ops create no names
  return h.AppendOp(type, inputs, outputs, std::move(attrs)) != nullptr;
}

// ---- SGD ----

void SGD::AppendOptimizeOp(const Var& p, const Var& g, const Var& lr) {
  AppendOp("sgd", {{"Param", {p}}, {"Grad", {g}}, {"LearningRate", {lr}}}, {{"ParamOut", {p}}}, {});
}

// ---- Momentum ----

void Momentum::CreateAccumulators(const std::vector<Var>& params) {
  for (const Var& p : params) AddAccumulator("velocity", p);
}

void Momentum::AppendOptimizeOp(const Var& p, const Var& g, const Var& lr) {
  Var v = GetAccumulator("velocity", p);
  AppendOp("momentum", {{"Param", {p}}, {"Grad", {g}}, {"Velocity", {v}}, {"LearningRate", {lr}}},
           {{"ParamOut", {p}}, {"VelocityOut", {v}}}, {{"mu", momentum_}, {"use_nesterov", use_nesterov_}});
}

// ---- Adagrad family, Adamax, RMSProp, Ftrl, LarsMomentum ----

void Adagrad::CreateAccumulators(const std::vector<Var>& params) {
  for (const Var& p : params) AddAccumulator("moment", p, init_);
}
void Adagrad::AppendOptimizeOp(const Var& p, const Var& g, const Var& lr) {
  Var m = GetAccumulator("moment", p);
  AppendOp("adagrad", {{"Param", {p}}, {"Grad", {g}}, {"Moment", {m}}, {"LearningRate", {lr}}},
           {{"ParamOut", {p}}, {"MomentOut", {m}}}, {{"epsilon", epsilon_}});
}

void DecayedAdagrad::CreateAccumulators(const std::vector<Var>& params) {
  for (const Var& p : params) AddAccumulator("moment", p);
}
void DecayedAdagrad::AppendOptimizeOp(const Var& p, const Var& g, const Var& lr) {
  Var m = GetAccumulator("moment", p);
  AppendOp("decayed_adagrad", {{"Param", {p}}, {"Grad", {g}}, {"Moment", {m}}, {"LearningRate", {lr}}},
           {{"ParamOut", {p}}, {"MomentOut", {m}}}, {{"epsilon", epsilon_}, {"decay", decay_}});
}

void Adamax::CreateAccumulators(const std::vector<Var>& params) {
  for (const Var& p : params) {
    AddAccumulator("moment", p);
    AddAccumulator("inf_norm", p);
    AddAccumulator("beta1_pow_acc", p, beta1_, {1});
  }
}
void Adamax::AppendOptimizeOp(const Var& p, const Var& g, const Var& lr) {
  Var m = GetAccumulator("moment", p), u = GetAccumulator("inf_norm", p), b1 = GetAccumulator("beta1_pow_acc", p);
  AppendOp(
      "adamax",
      {{"Param", {p}}, {"Grad", {g}}, {"LearningRate", {lr}}, {"Moment", {m}}, {"InfNorm", {u}}, {"Beta1Pow", {b1}}},
      {{"ParamOut", {p}}, {"MomentOut", {m}}, {"InfNormOut", {u}}},
      {{"beta1", beta1_}, {"beta2", beta2_}, {"epsilon", epsilon_}});
}
void Adamax::FinishUpdate(const ParamsGrads& params_grads) {
  for (const auto& [p, g] : params_grads) {
    if (!g.valid() || !p.desc().trainable) continue;
    RoleGuard role(p.program(), OpRole::kOptimize, {p.name(), g.name()});
    Var b1 = GetAccumulator("beta1_pow_acc", p);
    AppendOp("scale", {{"X", {b1}}}, {{"Out", {b1}}}, {{"scale", beta1_}});
  }
}

void RMSProp::CreateAccumulators(const std::vector<Var>& params) {
  for (const Var& p : params) {
    AddAccumulator("momentum", p);
    AddAccumulator("mean_square", p);
    AddAccumulator("mean_grad", p);
  }
}
void RMSProp::AppendOptimizeOp(const Var& p, const Var& g, const Var& lr) {
  Var mom = GetAccumulator("momentum", p), ms = GetAccumulator("mean_square", p), mg = GetAccumulator("mean_grad", p);
  AppendOp("rmsprop",
           {{"Param", {p}},
            {"Grad", {g}},
            {"Moment", {mom}},
            {"MeanSquare", {ms}},
            {"MeanGrad", {mg}},
            {"LearningRate", {lr}}},
           {{"ParamOut", {p}}, {"MomentOut", {mom}}, {"MeanSquareOut", {ms}}, {"MeanGradOut", {mg}}},
           {{"epsilon", epsilon_}, {"decay", rho_}, {"momentum", momentum_}, {"centered", centered_}});
}

void Ftrl::CreateAccumulators(const std::vector<Var>& params) {
  for (const Var& p : params) {
    AddAccumulator("squared", p);
    AddAccumulator("linear", p);
  }
}
void Ftrl::AppendOptimizeOp(const Var& p, const Var& g, const Var& lr) {
  Var sq = GetAccumulator("squared", p), lin = GetAccumulator("linear", p);
  AppendOp("ftrl",
           {{"Param", {p}},
            {"Grad", {g}},
            {"SquaredAccumulator", {sq}},
            {"LinearAccumulator", {lin}},
            {"LearningRate", {lr}}},
           {{"ParamOut", {p}}, {"SquaredAccumOut", {sq}}, {"LinearAccumOut", {lin}}},
           {{"l1", l1_}, {"l2", l2_}, {"lr_power", lr_power_}});
}

void LarsMomentum::CreateAccumulators(const std::vector<Var>& params) {
  for (const Var& p : params) AddAccumulator("velocity", p);
}
void LarsMomentum::AppendOptimizeOp(const Var& p, const Var& g, const Var& lr) {
  Var v = GetAccumulator("velocity", p);
  AppendOp("lars_momentum", {{"Param", {p}}, {"Grad", {g}}, {"Velocity", {v}}, {"LearningRate", {lr}}},
           {{"ParamOut", {p}}, {"VelocityOut", {v}}},
           {{"mu", momentum_}, {"lars_coeff", coeff_}, {"lars_weight_decay", decay_}});
}

// ---- Adam ----

void Adam::CreateAccumulators(const std::vector<Var>& params) {
  for (const Var& p : params) {
    AddAccumulator("moment1", p);
    AddAccumulator("moment2", p);
    AddAccumulator("beta1_pow_acc", p, beta1_, {1});
    AddAccumulator("beta2_pow_acc", p, beta2_, {1});
  }
}

void Adam::AppendOptimizeOp(const Var& p, const Var& g, const Var& lr) {
  Var m1 = GetAccumulator("moment1", p), m2 = GetAccumulator("moment2", p);
  Var b1 = GetAccumulator("beta1_pow_acc", p), b2 = GetAccumulator("beta2_pow_acc", p);
  AppendOp("adam",
           {{"Param", {p}},
            {"Grad", {g}},
            {"LearningRate", {lr}},
            {"Moment1", {m1}},
            {"Moment2", {m2}},
            {"Beta1Pow", {b1}},
            {"Beta2Pow", {b2}}},
           {{"ParamOut", {p}}, {"Moment1Out", {m1}}, {"Moment2Out", {m2}}},
           {{"beta1", beta1_}, {"beta2", beta2_}, {"epsilon", epsilon_}, {"lazy_mode", lazy_mode_}});
}

// Fluid 1.x advances the beta powers with two scale ops per parameter.
void Adam::FinishUpdate(const ParamsGrads& params_grads) {
  for (const auto& [p, g] : params_grads) {
    if (!g.valid() || !p.desc().trainable) continue;
    RoleGuard role(p.program(), OpRole::kOptimize, {p.name(), g.name()});
    Var b1 = GetAccumulator("beta1_pow_acc", p), b2 = GetAccumulator("beta2_pow_acc", p);
    AppendOp("scale", {{"X", {b1}}}, {{"Out", {b1}}}, {{"scale", beta1_}});
    AppendOp("scale", {{"X", {b2}}}, {{"Out", {b2}}}, {{"scale", beta2_}});
  }
}

}  // namespace optimizer
}  // namespace oar
