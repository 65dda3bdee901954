// Optimizers, after fluid.optimizer: minimize(loss) appends the backward pass
// and then, for each (param, grad) sorted by parameter name, the update op
// with op_role Optimize and op_role_var [param, grad]. Learning rate and
// accumulators are persistable variables ("learning_rate_0",
// "fc_0.w_0_moment1_0", ...) initialized by fill_constant in the startup
// program, with Fluid's names and shapes.
//
//   optimizer::Adam(0.001).minimize(loss);
//
// Thread-safety: externally synchronized.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/api/param_attr.h"
#include "common/api/program.h"

namespace oar {
namespace optimizer {

using ParamsGrads = std::vector<std::pair<Var, Var>>;

class Optimizer {
 public:
  explicit Optimizer(float learning_rate) : learning_rate_(learning_rate) {}
  virtual ~Optimizer() = default;

  // A learning-rate variable (e.g. from a learning_rate_scheduler function)
  // instead of a constant; used as the global learning rate as is.
  void set_learning_rate(const Var& lr) { lr_var_ = lr; }
  // Weight decay applied to every parameter without its own regularizer
  // (Fluid's `regularization` constructor argument).
  void set_regularization(RegularizerPtr r) { regularization_ = std::move(r); }

  // Backward + optimization pass. Returns the (param, grad) pairs updated;
  // errors are recorded in the loss's program.
  ParamsGrads minimize(const Var& loss, Program* startup = nullptr, const std::vector<std::string>& parameter_list = {},
                       const std::set<std::string>& no_grad_set = {});
  // Just the optimization pass over given pairs (Fluid's apply_gradients).
  void apply_gradients(ParamsGrads params_grads, Program* startup = nullptr);

  // The global learning-rate variable (created on first use).
  Var global_learning_rate() const { return lr_var_; }

 protected:
  // Op type and per-optimizer accumulators; see each subclass.
  virtual void CreateAccumulators(const std::vector<Var>& params) {}
  virtual void AppendOptimizeOp(const Var& param, const Var& grad, const Var& lr) = 0;
  virtual void FinishUpdate(const ParamsGrads& params_grads) {}

  // Creates "<param>_<name>_N", persistable, filled with `fill` in startup.
  Var AddAccumulator(const std::string& name, const Var& param, float fill = 0.0f, std::vector<int64_t> shape = {});
  Var GetAccumulator(const std::string& name, const Var& param) const;
  // Appends an op of `type` to the param's program (role already set).
  bool AppendOp(const std::string& type, const std::map<std::string, std::vector<Var>>& inputs,
                const std::map<std::string, std::vector<Var>>& outputs, std::map<std::string, Attribute> attrs);

  float learning_rate_;
  RegularizerPtr regularization_;

 private:
  Var LearningRateFor(const Var& param);

  Program* main_ = nullptr;
  Program* startup_ = nullptr;
  Var lr_var_;
  std::map<std::string, std::map<std::string, Var>> accumulators_;  // name → param → var
};

class SGD : public Optimizer {
 public:
  explicit SGD(float learning_rate) : Optimizer(learning_rate) {}

 protected:
  void AppendOptimizeOp(const Var& param, const Var& grad, const Var& lr) override;
};

class Momentum : public Optimizer {
 public:
  Momentum(float learning_rate, float momentum, bool use_nesterov = false)
      : Optimizer(learning_rate), momentum_(momentum), use_nesterov_(use_nesterov) {}

 protected:
  void CreateAccumulators(const std::vector<Var>& params) override;
  void AppendOptimizeOp(const Var& param, const Var& grad, const Var& lr) override;

 private:
  float momentum_;
  bool use_nesterov_;
};

// Adagrad ("moment"), DecayedAdagrad ("moment"), Adamax ("moment",
// "inf_norm", "beta1_pow_acc"), RMSProp ("momentum", "mean_square",
// "mean_grad"), Ftrl ("squared", "linear") and LarsMomentum ("velocity"),
// with Fluid's defaults and accumulator names.
class Adagrad : public Optimizer {
 public:
  explicit Adagrad(float learning_rate, float epsilon = 1e-6f, float initial_accumulator_value = 0.0f)
      : Optimizer(learning_rate), epsilon_(epsilon), init_(initial_accumulator_value) {}

 protected:
  void CreateAccumulators(const std::vector<Var>& params) override;
  void AppendOptimizeOp(const Var& param, const Var& grad, const Var& lr) override;

 private:
  float epsilon_, init_;
};

class DecayedAdagrad : public Optimizer {
 public:
  explicit DecayedAdagrad(float learning_rate, float decay = 0.95f, float epsilon = 1e-6f)
      : Optimizer(learning_rate), decay_(decay), epsilon_(epsilon) {}

 protected:
  void CreateAccumulators(const std::vector<Var>& params) override;
  void AppendOptimizeOp(const Var& param, const Var& grad, const Var& lr) override;

 private:
  float decay_, epsilon_;
};

class Adamax : public Optimizer {
 public:
  explicit Adamax(float learning_rate = 0.001f, float beta1 = 0.9f, float beta2 = 0.999f, float epsilon = 1e-8f)
      : Optimizer(learning_rate), beta1_(beta1), beta2_(beta2), epsilon_(epsilon) {}

 protected:
  void CreateAccumulators(const std::vector<Var>& params) override;
  void AppendOptimizeOp(const Var& param, const Var& grad, const Var& lr) override;
  void FinishUpdate(const ParamsGrads& params_grads) override;

 private:
  float beta1_, beta2_, epsilon_;
};

class RMSProp : public Optimizer {
 public:
  explicit RMSProp(float learning_rate, float rho = 0.95f, float epsilon = 1e-6f, float momentum = 0.0f,
                   bool centered = false)
      : Optimizer(learning_rate), rho_(rho), epsilon_(epsilon), momentum_(momentum), centered_(centered) {}

 protected:
  void CreateAccumulators(const std::vector<Var>& params) override;
  void AppendOptimizeOp(const Var& param, const Var& grad, const Var& lr) override;

 private:
  float rho_, epsilon_, momentum_;
  bool centered_;
};

class Ftrl : public Optimizer {
 public:
  explicit Ftrl(float learning_rate, float l1 = 0.0f, float l2 = 0.0f, float lr_power = -0.5f)
      : Optimizer(learning_rate), l1_(l1), l2_(l2), lr_power_(lr_power) {}

 protected:
  void CreateAccumulators(const std::vector<Var>& params) override;
  void AppendOptimizeOp(const Var& param, const Var& grad, const Var& lr) override;

 private:
  float l1_, l2_, lr_power_;
};

class LarsMomentum : public Optimizer {
 public:
  LarsMomentum(float learning_rate, float momentum, float lars_coeff = 0.001f, float lars_weight_decay = 0.0005f)
      : Optimizer(learning_rate), momentum_(momentum), coeff_(lars_coeff), decay_(lars_weight_decay) {}

 protected:
  void CreateAccumulators(const std::vector<Var>& params) override;
  void AppendOptimizeOp(const Var& param, const Var& grad, const Var& lr) override;

 private:
  float momentum_, coeff_, decay_;
};

class Adam : public Optimizer {
 public:
  explicit Adam(float learning_rate = 0.001f, float beta1 = 0.9f, float beta2 = 0.999f, float epsilon = 1e-8f,
                bool lazy_mode = false)
      : Optimizer(learning_rate), beta1_(beta1), beta2_(beta2), epsilon_(epsilon), lazy_mode_(lazy_mode) {}

 protected:
  void CreateAccumulators(const std::vector<Var>& params) override;
  void AppendOptimizeOp(const Var& param, const Var& grad, const Var& lr) override;
  void FinishUpdate(const ParamsGrads& params_grads) override;

 private:
  float beta1_, beta2_, epsilon_;
  bool lazy_mode_;
};

}  // namespace optimizer
}  // namespace oar
