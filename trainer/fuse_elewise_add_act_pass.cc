#include "trainer/fuse_elewise_add_act_pass.h"

#include <set>

namespace oar {
namespace {

bool IsFusableAct(const std::string& type, const std::string& suffix) {
  return type == "relu" + suffix || type == "sigmoid" + suffix || type == "tanh" + suffix;
}

bool Single(const std::vector<std::string>& args) { return args.size() == 1 && args[0] != kEmptyVarName; }

// The attributes of `a` then `b` (b's win, as in Fluid), with op_role_var the
// union of both so the gradients they announce stay announced.
void MergeAttrs(const OpDesc& a, const OpDesc& b, OpDesc* fused) {
  for (const auto& [k, v] : a.attrs) fused->SetAttr(k, v);
  for (const auto& [k, v] : b.attrs) fused->SetAttr(k, v);
  auto role_var = a.GetAttr<std::vector<std::string>>(kOpRoleVarAttr);
  for (const auto& s : b.GetAttr<std::vector<std::string>>(kOpRoleVarAttr)) role_var.push_back(s);
  if (!role_var.empty()) fused->SetAttr(kOpRoleVarAttr, role_var);
}

}  // namespace

FuseCounts FuseElewiseAddAct(BlockDesc* block) {
  FuseCounts counts;
  for (size_t i = 0; i + 1 < block->OpSize(); ++i) {
    const OpDesc& first = block->Op(i);
    const OpDesc& second = block->Op(i + 1);
    if (first.type == "elementwise_add" && IsFusableAct(second.type, "") && Single(first.Output("Out")) &&
        Single(second.Input("X")) && first.Output("Out")[0] == second.Input("X")[0] && Single(second.Output("Out")) &&
        second.Output("Out")[0] != second.Input("X")[0]) {
      OpDesc fused;
      fused.type = "fused_elemwise_activation";
      fused.SetInput("X", first.Input("X"));
      fused.SetInput("Y", first.Input("Y"));
      fused.SetOutput("Out", second.Output("Out"));
      fused.SetOutput("IntermediateOut", first.Output("Out"));
      MergeAttrs(second, first, &fused);
      fused.SetAttr("save_intermediate_out", true);
      fused.SetAttr("functor_list", std::vector<std::string>{second.type, first.type});
      *block->MutableOp(i) = std::move(fused);
      block->RemoveOps(i + 1, i + 2);
      ++counts.forward;
      continue;
    }
    const std::string dx = GradVarName("X");
    const std::string dout = GradVarName("Out");
    if (IsFusableAct(first.type, "_grad") && second.type == "elementwise_add_grad" && Single(first.Output(dx)) &&
        Single(second.Input(dout)) && first.Output(dx)[0] == second.Input(dout)[0]) {
      OpDesc fused;
      fused.type = "fused_elemwise_activation_grad";
      fused.SetInput("X", {});
      fused.SetInput("IntermediateOut", {});
      fused.SetInput("Y", second.Input("Y"));
      fused.SetInput("Out", first.Input("Out"));
      fused.SetInput(dout, first.Input(dout));
      fused.SetOutput(dx, second.Output(dx));
      fused.SetOutput(GradVarName("Y"), second.Output(GradVarName("Y")));
      fused.SetOutput(GradVarName("IntermediateOut"), first.Output(dx));
      MergeAttrs(first, second, &fused);
      fused.SetAttr("save_intermediate_out", false);
      fused.SetAttr("functor_list", std::vector<std::string>{first.type, second.type});
      *block->MutableOp(i) = std::move(fused);
      block->RemoveOps(i + 1, i + 2);
      ++counts.backward;
    }
  }
  return counts;
}

}  // namespace oar
