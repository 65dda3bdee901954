// `while` and `while_grad`, as Fluid and Paddle 2.x run them.
//
// while: runs sub_block while Condition (one bool) holds, each step in a
// scope of its own (kept in StepScopes for the gradient). Before a step, the
// dense inputs X that the block does not update in place and that are not
// persistable are snapshotted into the step scope, so the gradient sees the
// values that step read even where the loop later overwrote them (an RNN
// state assigned at the end of each step). With is_test, each step's scope
// is dropped at once and nothing is kept.
//
// while_grad: walks the step scopes backwards. Each step it links the
// outside output gradients (Out@GRAD) into the step scope under their
// inside names (original_output_grad), runs the gradient block there, and
// sums each input's gradient into the outside X@GRAD — except for inputs
// that are also outputs (the loop's arrays and counters), whose gradient
// the step's value replaces. Then it drops the step scope.
//
// Thread-safety: kernels are stateless; the scopes are the executor's.
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/framework/scope.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

constexpr char kCopySuffix[] = "@TMP_COPY";

absl::StatusOr<bool> Condition(const ExecutionContext& ctx) {
  const Tensor* c = ctx.Input("Condition");
  if (c == nullptr || !c->initialized() || c->numel() != 1 || c->dtype() != DataType::kBool) {
    return absl::InvalidArgumentError(
        absl::StrCat("while: Condition (", InputLabel(ctx.op(), "Condition"), ") must be one bool"));
  }
  if (c->place().is_host()) return c->data<bool>()[0];
  Tensor host;
  OAR_RETURN_IF_ERROR(c->CopyTo(CPUPlace(), &host));
  return host.data<bool>()[0];
}

void DropSteps(Scope* scope, StepScopes* steps) {
  for (Scope* s : steps->scopes) scope->DeleteScope(s);
  steps->scopes.clear();
}

// The inputs a step must not snapshot: persistable variables, and those
// an op of the block both reads and writes (counters, arrays).
absl::flat_hash_set<std::string> NoCopyNames(const ProgramDesc& program, int32_t block) {
  absl::flat_hash_set<std::string> names;
  for (const auto& [name, desc] : program.Block(0).vars()) {
    if (desc.persistable) names.insert(name);
  }
  const BlockDesc& b = program.Block(block);
  for (size_t i = 0; i < b.OpSize(); ++i) {
    const OpDesc& op = b.Op(i);
    for (const auto& [slot, ins] : op.inputs) {
      for (const std::string& in : ins) {
        for (const auto& [oslot, outs] : op.outputs) {
          if (std::find(outs.begin(), outs.end(), in) != outs.end()) names.insert(in);
        }
      }
    }
  }
  return names;
}

absl::Status WhileKernel(const ExecutionContext& ctx) {
  Scope* scope = ctx.scope();
  BlockRunner* runner = ctx.runner();
  if (scope == nullptr || runner == nullptr) {
    return absl::FailedPreconditionError("while: needs an executor that can run sub-blocks");
  }
  const int32_t block = ctx.Attr<BlockRef>("sub_block").idx;
  if (runner->IsRunning(block)) {
    return absl::InvalidArgumentError(absl::StrCat("while: sub_block ", block, " is already running"));
  }
  Variable* steps_var = ctx.OutputVar("StepScopes");
  if (steps_var == nullptr) return absl::InvalidArgumentError("while: output StepScopes is missing");
  StepScopes* steps = steps_var->GetMutable<StepScopes>();
  DropSteps(scope, steps);  // a previous run's, never walked back
  const bool is_test = ctx.Attr<bool>("is_test");
  const absl::flat_hash_set<std::string> no_copy =
      is_test ? absl::flat_hash_set<std::string>{} : NoCopyNames(runner->program(), block);
  OAR_ASSIGN_OR_RETURN(bool go, Condition(ctx));
  while (go) {
    Scope& step = scope->NewScope();
    std::vector<std::string> copies;
    if (!is_test) {
      steps->scopes.push_back(&step);
      for (const std::string& name : ctx.op().Input("X")) {
        if (no_copy.contains(name)) continue;
        const Variable* v = scope->FindVar(name);
        if (v == nullptr || !v->IsType<Tensor>() || !v->Get<Tensor>().initialized()) continue;
        // A second owner of the buffer: a write to the input gets a fresh one.
        *step.Var(name + kCopySuffix)->GetMutable<Tensor>() = v->Get<Tensor>();
        copies.push_back(name);
      }
    }
    absl::Status s = runner->RunBlock(block, &step);
    if (!s.ok()) {
      if (is_test) scope->DeleteScope(&step);
      return s;
    }
    for (const std::string& name : copies) step.Rename(name + kCopySuffix, name);
    if (is_test) scope->DeleteScope(&step);
    OAR_ASSIGN_OR_RETURN(go, Condition(ctx));
  }
  return absl::OkStatus();
}

template <typename T>
void AddTo(const Tensor& g, Tensor* acc) {
  Tensor sum;
  T* o = sum.mutable_data<T>(acc->dims());
  const T* a = acc->data<T>();
  const T* b = g.data<T>();
  for (int64_t i = 0, n = acc->numel(); i < n; ++i) o[i] = a[i] + b[i];
  sum.set_lod(acc->lod());
  *acc = std::move(sum);
}

// acc += g (acc takes a copy of g while it has no value).
absl::Status Accumulate(const std::string& name, const Tensor& g, Tensor* acc) {
  if (!g.initialized() || g.numel() == 0) return absl::OkStatus();
  if (!acc->initialized() || acc->numel() == 0) {
    OAR_RETURN_IF_ERROR(g.CopyTo(CPUPlace(), acc));
    return absl::OkStatus();
  }
  if (acc->dims() != g.dims() || acc->dtype() != g.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat("while_grad: gradient '", name, "' is ", g.dims().ToString(),
                                                   " in one step and ", acc->dims().ToString(), " in another"));
  }
  switch (g.dtype()) {
    case DataType::kFloat32:
      AddTo<float>(g, acc);
      break;
    case DataType::kFloat64:
      AddTo<double>(g, acc);
      break;
    default:
      return absl::UnimplementedError(absl::StrCat("while_grad: gradient '", name, "' is not float"));
  }
  return absl::OkStatus();
}

// A zero of the shape and type of `like`.
void ZerosLike(const Tensor& like, Tensor* out) {
  out->Resize(like.dims());
  std::memset(out->mutable_data(like.dtype(), CPUPlace()), 0, out->nbytes());
  out->set_lod(like.lod());
}

// Links outside gradient `outer` into the step scope as `inside`.
absl::Status Link(const std::string& outer_name, Variable* outer, Scope* step, const std::string& inside) {
  Variable* in = step->Var(inside);
  if (outer->IsType<Tensor>()) {
    *in->GetMutable<Tensor>() = outer->Get<Tensor>();
  } else if (outer->IsType<TensorList>()) {
    *in->GetMutable<TensorList>() = outer->Get<TensorList>();
  } else {
    return absl::UnimplementedError(
        absl::StrCat("while_grad: output gradient '", outer_name, "' is neither a tensor nor a tensor array"));
  }
  return absl::OkStatus();
}

// The value of the forward variable an output gradient belongs to.
const Variable* ForwardOf(const Scope& scope, const std::string& grad) {
  const size_t at = grad.find("@GRAD");
  return at == std::string::npos ? nullptr : scope.FindVar(grad.substr(0, at));
}

absl::Status WhileGradKernel(const ExecutionContext& ctx) {
  Scope* scope = ctx.scope();
  BlockRunner* runner = ctx.runner();
  if (scope == nullptr || runner == nullptr) {
    return absl::FailedPreconditionError("while_grad: needs an executor that can run sub-blocks");
  }
  if (ctx.Attr<bool>("is_test")) return absl::InvalidArgumentError("while_grad: the forward while ran with is_test");
  const int32_t block = ctx.Attr<BlockRef>("sub_block").idx;
  Variable* steps_var = ctx.InputVar("StepScopes");
  if (steps_var == nullptr || !steps_var->IsType<StepScopes>()) {
    return absl::FailedPreconditionError("while_grad: StepScopes holds no steps; run the forward while first");
  }
  StepScopes* steps = steps_var->GetMutable<StepScopes>();
  const std::vector<std::string>& og_out = ctx.op().Input(GradVarName("Out"));
  const std::vector<std::string> og_in = ctx.Attr<std::vector<std::string>>("original_output_grad");
  if (og_out.size() != og_in.size()) {
    return absl::InvalidArgumentError(absl::StrCat("while_grad: ", og_out.size(), " output gradients but ",
                                                   og_in.size(), " names in original_output_grad"));
  }
  const std::vector<std::string>& xs = ctx.op().Input("X");
  const std::vector<std::string>& xgs = ctx.op().Output(GradVarName("X"));
  if (xs.size() != xgs.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("while_grad: ", xs.size(), " inputs X but ", xgs.size(), " gradients X@GRAD"));
  }
  for (size_t i = 0; i < xgs.size(); ++i) {  // each step adds into a fresh sum
    const bool io = std::find(og_out.begin(), og_out.end(), xgs[i]) != og_out.end();
    if (xgs[i] == kEmptyVarName || io) continue;
    if (Variable* v = scope->FindVar(xgs[i]); v != nullptr && v->IsType<Tensor>()) *v->GetMutable<Tensor>() = Tensor();
  }
  for (auto it = steps->scopes.rbegin(); it != steps->scopes.rend(); ++it) {
    Scope* step = *it;
    for (size_t i = 0; i < og_out.size(); ++i) {
      Variable* outer = scope->FindVar(og_out[i]);
      if (outer == nullptr) continue;
      if (outer->IsType<Tensor>() && !outer->Get<Tensor>().initialized()) {
        const Variable* fwd = ForwardOf(*scope, og_out[i]);
        if (fwd == nullptr || !fwd->IsType<Tensor>() || !fwd->Get<Tensor>().initialized()) continue;
        ZerosLike(fwd->Get<Tensor>(), outer->GetMutable<Tensor>());
      }
      if (!outer->IsInitialized()) continue;
      OAR_RETURN_IF_ERROR(Link(og_out[i], outer, step, og_in[i]));
    }
    OAR_RETURN_IF_ERROR(runner->RunBlock(block, step));
    for (size_t i = 0; i < xgs.size(); ++i) {
      if (xgs[i] == kEmptyVarName) continue;
      const Variable* inner = step->FindLocalVar(GradVarName(xs[i]));
      if (inner == nullptr) continue;
      Variable* outer = scope->FindVar(xgs[i]);
      if (outer == nullptr) outer = scope->Var(xgs[i]);
      const bool io = std::find(og_out.begin(), og_out.end(), xgs[i]) != og_out.end();
      if (io) {  // the step's value is the gradient so far
        if (const Variable* now = step->FindLocalVar(xgs[i])) {
          if (now->IsType<TensorList>())
            *outer->GetMutable<TensorList>() = now->Get<TensorList>();
          else if (now->IsType<Tensor>() && now->Get<Tensor>().initialized())
            *outer->GetMutable<Tensor>() = now->Get<Tensor>();
        }
        continue;
      }
      if (inner->IsType<Tensor>()) {
        OAR_RETURN_IF_ERROR(Accumulate(xgs[i], inner->Get<Tensor>(), outer->GetMutable<Tensor>()));
      } else if (inner->IsType<TensorList>()) {
        const TensorList& g = inner->Get<TensorList>();
        TensorList* acc = outer->GetMutable<TensorList>();
        if (acc->size() < g.size()) acc->resize(g.size());
        for (size_t k = 0; k < g.size(); ++k) OAR_RETURN_IF_ERROR(Accumulate(xgs[i], g[k], &(*acc)[k]));
      } else if (inner->IsInitialized()) {
        return absl::UnimplementedError(
            absl::StrCat("while_grad: the gradient of '", xs[i],
                         "' inside the loop is sparse (SelectedRows); Oar sums only "
                         "dense gradients across steps: make the lookup inside the loop is_sparse=False"));
      }
    }
    scope->DeleteScope(step);
  }
  steps->scopes.clear();
  // Inputs nothing flowed back to have a zero gradient, not none.
  for (size_t i = 0; i < xgs.size(); ++i) {
    if (xgs[i] == kEmptyVarName) continue;
    Variable* outer = scope->FindVar(xgs[i]);
    const Variable* x = scope->FindVar(xs[i]);
    if (outer == nullptr || x == nullptr || !x->IsType<Tensor>() || !x->Get<Tensor>().initialized()) continue;
    if (outer->IsType<Tensor>() && !outer->Get<Tensor>().initialized()) {
      ZerosLike(x->Get<Tensor>(), outer->GetMutable<Tensor>());
    }
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterWhileOps(OpRegistry* r) {
  r->Register("while")
      .Input("X", kDuplicable | kDispensable | kReadAnywhere)
      .Input("Condition", kDuplicable | kReadAnywhere)
      .Output("Out", kDuplicable | kDispensable)
      .Output("StepScopes")
      .Attr("sub_block", BlockRef{0})
      .Attr("is_test", false)
      .Attr("skip_eager_deletion_vars", std::vector<std::string>{})
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(AnyKernelDtype)
      .Kernel<float>(WhileKernel);
  r->Register("while_grad")
      .Input("X", kDuplicable | kDispensable | kReadAnywhere)
      .Input("Out", kDuplicable | kDispensable | kReadAnywhere)
      .Input(GradVarName("Out"), kDuplicable | kDispensable | kReadAnywhere)
      .Input("StepScopes", kReadAnywhere)
      .Output(GradVarName("X"), kDuplicable | kDispensable)
      .Attr("sub_block", BlockRef{0})
      .Attr("is_test", false)
      .Attr("original_output_grad", std::vector<std::string>{})
      .Attr("skip_eager_deletion_vars", std::vector<std::string>{})
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(AnyKernelDtype)
      .Kernel<float>(WhileGradKernel);
}

}  // namespace oar
