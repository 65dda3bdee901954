#include "tests/common/ops/op_test_util.h"

#include <random>

#include "common/device/device_memory.h"
#include "common/framework/prepared_block.h"
#include "common/framework/selected_rows_util.h"
#include "gtest/gtest.h"

namespace oar::testing {

absl::Status RunOps(const std::vector<OpDesc>& ops, Scope* scope) { return RunOpsOn(ops, scope, CPUPlace()); }

absl::Status RunOpsOn(const std::vector<OpDesc>& ops, Scope* scope, const Place& place) {
  ProgramDesc program;
  BlockDesc* block = program.MutableBlock(0);
  for (const OpDesc& op : ops) *block->AppendOp() = op;
  auto prepared = PreparedBlock::Create(program, 0, OpRegistry::Global(), place);
  if (!prepared.ok()) return prepared.status();
  absl::Status s = (*prepared)->Bind(scope, scope);
  if (s.ok()) s = (*prepared)->Run();
  if (s.ok()) s = SyncPlace(place);
  return s;
}

OpDesc MakeOp(const std::string& type, OpDesc::VarMap inputs, OpDesc::VarMap outputs,
              std::map<std::string, Attribute> attrs) {
  OpDesc op;
  op.type = type;
  op.inputs = std::move(inputs);
  op.outputs = std::move(outputs);
  op.attrs = std::move(attrs);
  return op;
}

void SetTensor(Scope* scope, const std::string& name, const Tensor& t) { *scope->Var(name)->GetMutable<Tensor>() = t; }

const Tensor& GetTensor(const Scope& scope, const std::string& name) {
  static const Tensor kEmpty;
  const Variable* v = scope.FindVar(name);
  return (v != nullptr && v->IsType<Tensor>()) ? v->Get<Tensor>() : kEmpty;
}

template <typename T>
Tensor GetDense(const Scope& scope, const std::string& name) {
  const Variable* v = scope.FindVar(name);
  if (v != nullptr && v->IsType<SelectedRows>()) return Densify<T>(v->Get<SelectedRows>());
  return GetTensor(scope, name);
}
template Tensor GetDense<float>(const Scope&, const std::string&);
template Tensor GetDense<double>(const Scope&, const std::string&);

template <typename T>
Tensor RandomTensor(const DDim& dims, double lo, double hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  Tensor t;
  T* p = t.mutable_data<T>(dims);
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(d(rng));
  return t;
}
template Tensor RandomTensor<float>(const DDim&, double, double, uint64_t);
template Tensor RandomTensor<double>(const DDim&, double, double, uint64_t);

namespace {

// Forward once with the given inputs; returns Σ w·out (weights by output).
template <typename T>
double Loss(const OpDesc& op, const std::map<std::string, Tensor>& inputs,
            const std::map<std::string, Tensor>& weights) {
  Scope scope;
  for (const auto& [name, t] : inputs) {
    Tensor copy;
    copy.CopyFrom(t);
    SetTensor(&scope, name, copy);
  }
  absl::Status s = RunOps({op}, &scope);
  EXPECT_TRUE(s.ok()) << s;
  double loss = 0;
  for (const auto& [name, w] : weights) {
    const Tensor& out = GetTensor(scope, name);
    for (int64_t i = 0; i < out.numel(); ++i)
      loss += static_cast<double>(out.template data<T>()[i]) * static_cast<double>(w.template data<T>()[i]);
  }
  return loss;
}

}  // namespace

template <typename T>
void ExpectGradientsMatch(const OpDesc& fwd, const std::map<std::string, Tensor>& inputs,
                          const std::vector<std::string>& check, GradCheckOptions o) {
  const OpInfo* info = OpRegistry::Global().Find(fwd.type);
  ASSERT_NE(info, nullptr) << fwd.type;
  ASSERT_TRUE(info->HasGrad()) << fwd.type << " has no grad maker";

  // Forward once to learn output shapes, then fix random loss weights.
  Scope scope;
  for (const auto& [name, t] : inputs) SetTensor(&scope, name, t);
  ASSERT_TRUE(RunOps({fwd}, &scope).ok());
  std::vector<std::string> outs = o.loss_outputs;
  if (outs.empty()) {
    for (const auto& name : fwd.OutputArgNames()) {
      const Tensor& t = GetTensor(scope, name);
      if (t.initialized() && t.dtype() == DataTypeOf<T>::value) outs.push_back(name);
    }
  }
  std::map<std::string, Tensor> weights;
  uint64_t seed = 7;
  for (const auto& name : outs) {
    weights[name] = RandomTensor<T>(GetTensor(scope, name).dims(), 0.5, 1.5, seed++);
  }

  // Analytic: grad ops with out@GRAD = weights (zeros for other outputs).
  Scope gscope;
  for (const auto& [name, t] : inputs) SetTensor(&gscope, name, t);
  ASSERT_TRUE(RunOps({fwd}, &gscope).ok());
  for (const auto& name : fwd.OutputArgNames()) {
    const Tensor& out = GetTensor(gscope, name);
    if (!out.initialized() || out.dtype() != DataTypeOf<T>::value) continue;  // not written, or not float
    Tensor g;
    if (weights.count(name)) {
      g.CopyFrom(weights[name]);
    } else {
      T* p = g.mutable_data<T>(out.dims());
      std::fill(p, p + g.numel(), T(0));
    }
    SetTensor(&gscope, GradVarName(name), g);
  }
  std::vector<OpDesc> grad_ops = info->grad_maker()(fwd);
  absl::Status s = RunOps(grad_ops, &gscope);
  ASSERT_TRUE(s.ok()) << s;

  for (const auto& name : check) {
    const Tensor analytic = GetDense<T>(gscope, GradVarName(name));
    ASSERT_TRUE(analytic.initialized()) << "no gradient computed for " << name;
    const Tensor& x = inputs.at(name);
    ASSERT_EQ(analytic.dims(), x.dims()) << name;
    int mismatches = 0;
    for (int64_t i = 0; i < x.numel() && mismatches < 5; ++i) {
      std::map<std::string, Tensor> plus = inputs, minus = inputs;
      Tensor xp, xm;
      xp.CopyFrom(x);
      xm.CopyFrom(x);
      xp.data<T>()[i] += static_cast<T>(o.eps);
      xm.data<T>()[i] -= static_cast<T>(o.eps);
      plus[name] = xp;
      minus[name] = xm;
      double numeric = (Loss<T>(fwd, plus, weights) - Loss<T>(fwd, minus, weights)) / (2 * o.eps);
      double a = analytic.template data<T>()[i];
      double err = std::abs(a - numeric) / std::max(1.0, std::abs(numeric));
      if (err > o.tolerance) {
        ++mismatches;
        ADD_FAILURE() << fwd.type << ": d/d" << name << "[" << i << "] analytic " << a << " vs numeric " << numeric
                      << " (relative error " << err << ")";
      }
    }
  }
}

template void ExpectGradientsMatch<float>(const OpDesc&, const std::map<std::string, Tensor>&,
                                          const std::vector<std::string>&, GradCheckOptions);
template void ExpectGradientsMatch<double>(const OpDesc&, const std::map<std::string, Tensor>&,
                                           const std::vector<std::string>&, GradCheckOptions);

}  // namespace oar::testing
