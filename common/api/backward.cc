#include "common/api/backward.h"

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/api/layer_helper.h"
#include "common/framework/op_registry.h"

namespace oar {
namespace {

constexpr int32_t kBackward = static_cast<int32_t>(OpRole::kBackward);
constexpr int32_t kLoss = static_cast<int32_t>(OpRole::kLoss);

bool IsGradName(const std::string& n) { return absl::StrContains(n, kGradSuffix); }

// The forward variable a gradient name refers to: "x@GRAD@RENAME@1" → "x".
std::string ForwardName(const std::string& grad) { return grad.substr(0, grad.find(kGradSuffix)); }

// Indices of the ops whose outputs (transitively) reach `loss`.
std::vector<size_t> OpPathToLoss(const BlockDesc& block, size_t loss_op, const std::string& loss,
                                 const std::set<std::string>& no_grad) {
  std::set<std::string> wanted = {loss};
  std::vector<size_t> path;
  for (size_t i = loss_op + 1; i-- > 0;) {
    const OpDesc& op = block.Op(i);
    bool relevant = false;
    for (const auto& o : op.OutputArgNames()) relevant |= wanted.count(o) > 0;
    if (!relevant) continue;
    path.push_back(i);
    for (const auto& in : op.InputArgNames()) {
      if (!no_grad.count(in)) wanted.insert(in);
    }
  }
  return path;  // reverse program order: the order grad ops are made in
}

// Fluid's _addup_repetitive_outputs_: a gradient written by several grad ops
// is renamed per writer and summed before its first reader (or at the end).
void AddUpRepeatedOutputs(std::vector<OpDesc>* ops) {
  std::map<std::string, std::vector<std::string>> renamed;  // grad → its pieces
  std::map<std::string, int> rename_count;
  std::vector<std::pair<size_t, OpDesc>> pending;  // (insert before index, sum op)
  auto make_sum = [](const std::vector<std::string>& parts, const std::string& out) {
    OpDesc sum;
    sum.type = "sum";
    sum.SetInput("X", parts);
    sum.SetOutput("Out", {out});
    sum.SetAttr("use_mkldnn", false);
    return sum;
  };
  for (size_t idx = 0; idx < ops->size(); ++idx) {
    OpDesc& op = (*ops)[idx];
    for (const auto& in : op.InputArgNames()) {
      auto it = renamed.find(in);
      if (it != renamed.end() && it->second.size() > 1) {
        pending.emplace_back(idx, make_sum(it->second, in));
        it->second = {in};
      }
    }
    const auto inputs = op.InputArgNames();
    // Output positions in slot order; earlier ones may need renaming when a
    // later one turns out to write the same gradient.
    std::vector<std::pair<std::string, size_t>> positions;
    for (const auto& [slot, args] : op.outputs) {
      for (size_t k = 0; k < args.size(); ++k) positions.emplace_back(slot, k);
    }
    for (size_t pi = 0; pi < positions.size(); ++pi) {
      const std::string name = op.outputs[positions[pi].first][positions[pi].second];
      if (name == kEmptyVarName || std::find(inputs.begin(), inputs.end(), name) != inputs.end()) {
        continue;  // in-place
      }
      auto& parts = renamed[name];
      if (parts.empty()) {
        parts.push_back(name);
        continue;
      }
      if (parts.size() == 1) {
        // Rename the first writer (an earlier op, or an earlier slot of this
        // op), earlier readers of it, and pending sums.
        std::string first = absl::StrCat(name, "@RENAME@", rename_count[name]++);
        for (size_t j = 0; j < idx; ++j) {
          (*ops)[j].RenameInput(name, first);
          (*ops)[j].RenameOutput(name, first);
        }
        for (auto& p : pending) p.second.RenameInput(name, first);
        for (size_t pj = 0; pj < pi; ++pj) {
          std::string& earlier = op.outputs[positions[pj].first][positions[pj].second];
          if (earlier == name) earlier = first;
        }
        parts[0] = first;
      }
      std::string next = absl::StrCat(name, "@RENAME@", rename_count[name]++);
      parts.push_back(next);
      op.outputs[positions[pi].first][positions[pi].second] = next;
    }
  }
  for (const auto& [name, parts] : renamed) {
    if (parts.size() > 1) pending.emplace_back(ops->size(), make_sum(parts, name));
  }
  for (size_t i = pending.size(); i-- > 0;) {
    ops->insert(ops->begin() + static_cast<std::ptrdiff_t>(pending[i].first), pending[i].second);
  }
}

// Fluid's _remove_no_grad_branch_: drops grad ops with no live output, or
// whose every incoming gradient is known to be absent.
std::vector<OpDesc> RemoveNoGradBranch(std::vector<OpDesc> ops, std::set<std::string> no_grad_grads) {
  std::vector<OpDesc> kept;
  for (OpDesc& op : ops) {
    bool all_out_dead = true;  // also when every output slot is empty
    for (const auto& o : op.OutputArgNames()) {
      if (o != kEmptyVarName && !no_grad_grads.count(o)) all_out_dead = false;
    }
    bool all_in_dead = true, any_grad_in = false;
    for (const auto& in : op.InputArgNames()) {
      if (!IsGradName(in)) continue;
      any_grad_in = true;
      if (!no_grad_grads.count(in)) all_in_dead = false;
    }
    if (all_out_dead) continue;
    if (any_grad_in && all_in_dead) {
      for (const auto& o : op.OutputArgNames()) no_grad_grads.insert(o);
      continue;
    }
    kept.push_back(std::move(op));
  }
  return kept;
}

}  // namespace

std::vector<std::pair<Var, Var>> append_backward(const Var& loss, const std::vector<std::string>& parameter_list,
                                                 const std::set<std::string>& user_no_grad) {
  if (!loss.valid()) return {};
  Program* program = loss.program();
  if (!program->status().ok()) return {};
  BlockDesc* block = loss.block();
  auto fail = [&](const std::string& msg) {
    program->RecordError(absl::InvalidArgumentError(absl::StrCat("append_backward: ", msg)));
    return std::vector<std::pair<Var, Var>>{};
  };
  if (loss.desc().dtype != DataType::kFloat32 && loss.desc().dtype != DataType::kFloat64) {
    return fail(absl::StrCat("loss '", loss.name(), "' must be float32 or float64"));
  }

  // The op that computes the loss, marked Forward|Loss.
  size_t loss_op = block->OpSize();
  for (size_t i = block->OpSize(); i-- > 0 && loss_op == block->OpSize();) {
    for (const auto& o : block->Op(i).OutputArgNames())
      if (o == loss.name()) loss_op = i;
  }
  if (loss_op == block->OpSize()) return fail(absl::StrCat("no op computes loss '", loss.name(), "'"));
  block->MutableOp(loss_op)->SetAttr(kOpRoleAttr, static_cast<int32_t>(OpRole::kForward) | kLoss);

  std::set<std::string> no_grad = user_no_grad;
  for (const auto& [name, v] : block->vars()) {
    if (v.stop_gradient || !IsFloating(v.dtype)) no_grad.insert(name);
  }
  std::set<std::string> no_grad_grads;
  for (const auto& n : no_grad) no_grad_grads.insert(GradVarName(n));

  // Grad ops in reverse forward order.
  const OpRegistry& registry = OpRegistry::Global();
  std::vector<OpDesc> grad_ops;
  for (size_t i : OpPathToLoss(*block, loss_op, loss.name(), no_grad)) {
    const OpDesc& fwd = block->Op(i);
    const OpInfo* info = registry.Find(fwd.type);
    if (info == nullptr || !info->HasGrad()) {
      return fail(absl::StrCat("op #", i, " (", fwd.type, ") lies on the path to the loss but has no gradient"));
    }
    for (OpDesc g : info->grad_maker()(fwd)) {
      // Fluid drops a no-grad argument from a one-variable slot (leaving the
      // slot empty) and marks it @EMPTY@ in a list, keeping positions.
      for (auto& [slot, args] : g.outputs) {
        for (auto& a : args)
          if (no_grad_grads.count(a)) a = kEmptyVarName;
        if (args.size() == 1 && args[0] == kEmptyVarName) args.clear();
      }
      g.SetAttr(kOpRoleAttr, kBackward);
      g.SetAttr(kOpRoleVarAttr, std::vector<std::string>{});
      grad_ops.push_back(std::move(g));
    }
  }
  AddUpRepeatedOutputs(&grad_ops);
  grad_ops = RemoveNoGradBranch(std::move(grad_ops), no_grad_grads);

  // loss@GRAD = 1, then the grad ops, each checked and shape-inferred.
  OpDesc* fill = block->AppendOp();
  fill->type = "fill_constant";
  fill->SetOutput("Out", {GradVarName(loss.name())});
  fill->SetAttr("shape", std::vector<int64_t>{1});
  fill->SetAttr("value", 1.0f);
  fill->SetAttr("dtype", static_cast<int32_t>(loss.desc().dtype));
  fill->SetAttr("force_cpu", false);
  fill->SetAttr(kOpRoleAttr, kBackward | kLoss);
  std::vector<OpDesc*> appended = {fill};
  for (OpDesc& g : grad_ops) {
    OpDesc* op = block->AppendOp();
    *op = std::move(g);
    appended.push_back(op);
  }
  for (OpDesc* op : appended) {
    for (const auto& out : op->OutputArgNames()) {
      if (out == kEmptyVarName || block->HasVar(out)) continue;
      VarDesc* gv = block->Var(out);
      if (const VarDesc* fv = block->FindVarRecursive(ForwardName(out)); fv && fv != gv) {
        gv->dtype = fv->dtype;
        gv->shape = fv->shape;
        gv->lod_level = fv->lod_level;
      }
    }
    absl::Status s = CheckAndInferOp(registry, op, block);
    if (!s.ok()) return fail(std::string(s.message()));
  }

  // (param, grad) pairs, and op_role_var on each gradient's last writer.
  std::vector<std::string> params = parameter_list.empty() ? program->parameters() : parameter_list;
  std::vector<std::pair<Var, Var>> result;
  for (const auto& p : params) {
    const VarDesc* pv = block->FindVar(p);
    if (pv == nullptr) return fail(absl::StrCat("parameter '", p, "' is not in the loss's block"));
    std::string g = GradVarName(p);
    if (!pv->trainable || !block->HasVar(g) || no_grad.count(p)) continue;
    for (size_t i = block->OpSize(); i-- > 0;) {
      const auto outs = block->Op(i).OutputArgNames();
      if (std::find(outs.begin(), outs.end(), g) == outs.end()) continue;
      OpDesc* op = block->MutableOp(i);
      auto role_var = op->GetAttr<std::vector<std::string>>(kOpRoleVarAttr);
      role_var.insert(role_var.begin(), {p, g});
      op->SetAttr(kOpRoleVarAttr, role_var);
      break;
    }
    result.emplace_back(Var(program, block, p), Var(program, block, g));
  }
  return result;
}

}  // namespace oar
