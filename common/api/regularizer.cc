#include "common/api/regularizer.h"

#include "common/api/layer_helper.h"
#include "common/api/unique_name.h"

namespace oar {
namespace {

// A new temporary like `param` (Fluid's block.create_var with no name).
Var GeneratedVar(const Var& like, BlockDesc* block) {
  std::string n = unique_name::Generate("_generated_var");
  VarDesc* v = block->Var(n);
  v->dtype = like.dtype();
  v->shape = like.shape();
  return Var(like.program(), block, n);
}

class Decay : public WeightDecayRegularizer {
 public:
  Decay(float coeff, bool l1) : coeff_(coeff), l1_(l1) {}
  Var Append(const Var& param, const Var& grad, BlockDesc* block) const override {
    LayerHelper h(l1_ ? "l1_decay" : "l2_decay", l1_ ? "l1_decay" : "l2_decay");
    Var decay = GeneratedVar(param, block);
    Var src = param;
    if (l1_) {
      if (!h.AppendOp("sign", {{"X", {param}}}, {{"Out", {decay}}})) return Var();
      src = decay;
    }
    if (!h.AppendOp("scale", {{"X", {src}}}, {{"Out", {decay}}}, {{"scale", coeff_}})) return Var();
    return decay;
  }

 private:
  float coeff_;
  bool l1_;
};

}  // namespace

namespace regularizer {
RegularizerPtr L2Decay(float coeff) { return std::make_shared<Decay>(coeff, false); }
RegularizerPtr L1Decay(float coeff) { return std::make_shared<Decay>(coeff, true); }
}  // namespace regularizer

std::vector<std::pair<Var, Var>> append_regularization_ops(const std::vector<std::pair<Var, Var>>& params_grads,
                                                           const RegularizerPtr& regularization) {
  std::vector<std::pair<Var, Var>> out;
  for (const auto& [param, grad] : params_grads) {
    Program* prog = param.program();
    RegularizerPtr reg = regularization;
    auto it = prog->param_extras.find(param.name());
    if (it != prog->param_extras.end() && it->second.regularizer) reg = it->second.regularizer;
    if (!grad.valid() || !reg) {
      out.emplace_back(param, grad);
      continue;
    }
    RoleGuard role(prog, OpRole::kOptimize, {param.name(), grad.name()});
    BlockDesc* block = grad.block();
    Var term = reg->Append(param, grad, block);
    if (!term.valid()) return {};
    Var new_grad = grad;
    if (grad.desc().type == paddle::framework::proto::VarType::SELECTED_ROWS) {
      // The sum of a sparse gradient and a dense decay is dense: a new name.
      std::string n = grad.name() + "@NEWGRAD";
      VarDesc* v = block->Var(n);
      v->dtype = param.dtype();
      v->shape = param.shape();
      new_grad = Var(prog, block, n);
    }
    LayerHelper h("sum", "sum");
    if (!h.AppendOp("sum", {{"X", {grad, term}}}, {{"Out", {new_grad}}}, {{"use_mkldnn", false}})) return {};
    out.emplace_back(param, new_grad);
  }
  return out;
}

}  // namespace oar
