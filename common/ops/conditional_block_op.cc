// Branches, as Fluid's Switch/IfElse and Paddle 2.x's `cond` write them:
//
// conditional_block runs sub_block when its condition holds — one bool with
// is_scalar_condition, else "every Cond input is non-empty" — in a scope of
// its own, kept in its Scope output for the gradient (and dropped by the
// next run or by the gradient).
// conditional_block_grad runs the gradient block in that scope when the
// forward ran, and hands each gradient it made of Input to the outside
// Input@GRAD; an input the block gave no gradient, or every input when the
// branch did not run, gets zeros of its shape.
// select_input picks X[Mask] (cond's merge of the branches' results);
// select_output routes X to Out[Mask] (its gradient).
//
// The same on a CPU or a GPU place: the blocks run on the executor's place,
// the condition and mask are read back where they lie on a GPU.
//
// Thread-safety: kernels are stateless; the scopes are the executor's.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/framework/scope.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

// One scalar of `t` as int64, wherever it lies.
absl::StatusOr<int64_t> HostScalar(const Tensor& t) {
  Tensor host;
  const Tensor* h = &t;
  if (!t.place().is_host()) {
    OAR_RETURN_IF_ERROR(t.CopyTo(CPUPlace(), &host));
    h = &host;
  }
  switch (h->dtype()) {
    case DataType::kBool:
      return h->data<bool>()[0] ? 1 : 0;
    case DataType::kInt32:
      return h->data<int32_t>()[0];
    case DataType::kInt64:
      return h->data<int64_t>()[0];
    default:
      return absl::InvalidArgumentError("not a bool or integer");
  }
}

absl::StatusOr<bool> BranchRuns(const ExecutionContext& ctx) {
  const std::string& type = ctx.op().type;
  if (ctx.Attr<bool>("is_scalar_condition")) {
    const Tensor* c = ctx.Input("Cond");
    if (c == nullptr || !c->initialized() || c->numel() != 1 || c->dtype() != DataType::kBool) {
      return absl::InvalidArgumentError(
          absl::StrCat(type, ": a scalar Cond (", InputLabel(ctx.op(), "Cond"), ") must be one bool"));
    }
    OAR_ASSIGN_OR_RETURN(int64_t v, HostScalar(*c));
    return v != 0;
  }
  for (size_t i = 0; i < ctx.InputSize("Cond"); ++i) {
    const Tensor* c = ctx.Input("Cond", i);
    if (c == nullptr || !c->initialized() || c->numel() == 0) return false;
  }
  return true;
}

absl::Status CheckRunner(const ExecutionContext& ctx, int32_t block) {
  if (ctx.scope() == nullptr || ctx.runner() == nullptr) {
    return absl::FailedPreconditionError(ctx.op().type + ": needs an executor that can run sub-blocks");
  }
  if (ctx.runner()->IsRunning(block)) {
    return absl::InvalidArgumentError(absl::StrCat(
        ctx.op().type, ": sub_block ", block,
        " is already running (it is the block of this op, or one that runs it); running it again would never end"));
  }
  return absl::OkStatus();
}

absl::Status ConditionalBlockKernel(const ExecutionContext& ctx) {
  const int32_t block = ctx.Attr<BlockRef>("sub_block").idx;
  OAR_ASSIGN_OR_RETURN(const bool run, BranchRuns(ctx));
  Variable* kept = ctx.OutputVar("Scope");
  StepScopes* scopes = kept != nullptr ? kept->GetMutable<StepScopes>() : nullptr;
  if (scopes != nullptr && ctx.scope() != nullptr) {  // the last run's, if no gradient took it
    for (Scope* s : scopes->scopes) ctx.scope()->DeleteScope(s);
    scopes->scopes.clear();
  }
  if (!run) return absl::OkStatus();
  OAR_RETURN_IF_ERROR(CheckRunner(ctx, block));
  Scope& child = ctx.scope()->NewScope();
  absl::Status s = ctx.runner()->RunBlock(block, &child);
  if (scopes != nullptr && s.ok()) {
    scopes->scopes.push_back(&child);
  } else {
    ctx.scope()->DeleteScope(&child);
  }
  return s;
}

// `out` = zeros shaped like `like` (a tensor, or each element of an array).
void ZerosLike(const Variable& like, Variable* out) {
  auto zero = [](const Tensor& t, Tensor* o) {
    o->Resize(t.dims());
    std::memset(o->mutable_data(t.dtype(), CPUPlace()), 0, o->nbytes());
    o->set_lod(t.lod());
  };
  if (like.IsType<Tensor>()) {
    if (like.Get<Tensor>().initialized()) zero(like.Get<Tensor>(), out->GetMutable<Tensor>());
  } else if (like.IsType<TensorList>()) {
    const TensorList& xs = like.Get<TensorList>();
    TensorList zs(xs.size());
    for (size_t i = 0; i < xs.size(); ++i) {
      if (xs[i].initialized()) zero(xs[i], &zs[i]);
    }
    *out->GetMutable<TensorList>() = std::move(zs);
  }
}

absl::Status ConditionalBlockGradKernel(const ExecutionContext& ctx) {
  const int32_t block = ctx.Attr<BlockRef>("sub_block").idx;
  OAR_ASSIGN_OR_RETURN(const bool run, BranchRuns(ctx));
  const std::vector<std::string>& ins = ctx.op().Input("Input");
  const std::vector<std::string>& grads = ctx.op().Output(GradVarName("Input"));
  Scope* scope = ctx.scope();
  if (scope == nullptr) return absl::FailedPreconditionError("conditional_block_grad: needs an executor");
  Scope* branch = nullptr;
  if (run) {
    Variable* kept = ctx.InputVar("Scope");
    if (kept == nullptr || !kept->IsType<StepScopes>() || kept->Get<StepScopes>().scopes.empty()) {
      return absl::FailedPreconditionError(
          "conditional_block_grad: the forward branch kept no scope (Scope); run the forward conditional_block first");
    }
    branch = kept->GetMutable<StepScopes>()->scopes.front();
    kept->GetMutable<StepScopes>()->scopes.clear();
    OAR_RETURN_IF_ERROR(CheckRunner(ctx, block));
    absl::Status s = ctx.runner()->RunBlock(block, branch);
    if (!s.ok()) {
      scope->DeleteScope(branch);
      return s;
    }
  }
  for (size_t i = 0; i < grads.size() && i < ins.size(); ++i) {
    if (grads[i] == kEmptyVarName) continue;
    Variable* out = scope->FindVar(grads[i]);
    if (out == nullptr) continue;
    const Variable* inner = branch != nullptr ? branch->FindLocalVar(GradVarName(ins[i])) : nullptr;
    if (inner != nullptr && inner->IsType<Tensor>() && inner->Get<Tensor>().initialized()) {
      out->GetMutable<Tensor>()->CopyFrom(inner->Get<Tensor>());
    } else if (inner != nullptr && inner->IsType<TensorList>()) {
      *out->GetMutable<TensorList>() = inner->Get<TensorList>();
    } else if (inner != nullptr && inner->IsType<SelectedRows>()) {
      *out->GetMutable<SelectedRows>() = inner->Get<SelectedRows>();
    } else if (const Variable* x = scope->FindVar(ins[i])) {
      ZerosLike(*x, out);
    }
  }
  if (branch != nullptr) scope->DeleteScope(branch);
  return absl::OkStatus();
}

absl::StatusOr<size_t> MaskIndex(const ExecutionContext& ctx, size_t n) {
  const Tensor* m = ctx.Input("Mask");
  if (m == nullptr || !m->initialized() || m->numel() != 1) {
    return absl::InvalidArgumentError(ctx.op().type + ": Mask must hold one integer");
  }
  OAR_ASSIGN_OR_RETURN(int64_t k, HostScalar(*m));
  if (k < 0 || static_cast<size_t>(k) >= n) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": Mask is ", k, ", not in [0, ", n, ")"));
  }
  return static_cast<size_t>(k);
}

absl::Status SelectInputKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(size_t k, MaskIndex(ctx, ctx.InputSize("X")));
  const Variable* x = ctx.InputVar("X", k);
  Variable* out = ctx.OutputVar("Out");
  if (x == nullptr || !x->IsInitialized() || out == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("select_input: the chosen input ", InputLabel(ctx.op(), "X", k), " has no value"));
  }
  if (x->IsType<TensorList>())
    *out->GetMutable<TensorList>() = x->Get<TensorList>();
  else
    *out->GetMutable<Tensor>() = x->Get<Tensor>();
  return absl::OkStatus();
}

absl::Status SelectOutputKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(size_t k, MaskIndex(ctx, ctx.op().Output("Out").size()));
  const Variable* x = ctx.InputVar("X");
  Variable* out = ctx.OutputVar("Out", k);
  if (x == nullptr || !x->IsInitialized()) return absl::InvalidArgumentError("select_output: X has no value");
  if (out == nullptr) return absl::OkStatus();
  if (x->IsType<TensorList>())
    *out->GetMutable<TensorList>() = x->Get<TensorList>();
  else
    *out->GetMutable<Tensor>() = x->Get<Tensor>();
  return absl::OkStatus();
}

}  // namespace

#define OAR_ANY_PLACE(K) Kernel<float>(K).Kernel<float>(K, Place::Kind::kCUDA)

void RegisterConditionalBlockOps(OpRegistry* r) {
  r->Register("conditional_block")
      .Input("Cond", kDuplicable | kReadAnywhere)
      .Input("Input", kDuplicable | kDispensable | kReadAnywhere)
      .Output("Out", kDuplicable | kDispensable)
      .Output("Scope", kDispensable)
      .Attr("sub_block", BlockRef{0})
      .Attr("is_scalar_condition", false)
      .Attr("skip_eager_deletion_vars", std::vector<std::string>{})
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(AnyKernelDtype)
      .OAR_ANY_PLACE(ConditionalBlockKernel);
  r->Register("conditional_block_grad")
      .Input("Cond", kDuplicable | kReadAnywhere)
      .Input("Input", kDuplicable | kDispensable | kReadAnywhere)
      .Input("Out", kDuplicable | kDispensable | kReadAnywhere)
      .Input(GradVarName("Out"), kDuplicable | kDispensable | kReadAnywhere)
      .Input("Scope", kDispensable | kReadAnywhere)
      .Output(GradVarName("Input"), kDuplicable | kDispensable)
      .Attr("sub_block", BlockRef{0})
      .Attr("is_scalar_condition", false)
      .Attr("skip_eager_deletion_vars", std::vector<std::string>{})
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(AnyKernelDtype)
      .OAR_ANY_PLACE(ConditionalBlockGradKernel);
  r->Register("select_input")
      .Input("X", kDuplicable | kDispensable | kReadAnywhere)
      .Input("Mask", kReadAnywhere)
      .Output("Out")
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(AnyKernelDtype)
      .OAR_ANY_PLACE(SelectInputKernel);
  r->Register("select_output")
      .Input("X", kReadAnywhere)
      .Input("Mask", kReadAnywhere)
      .Output("Out", kDuplicable | kDispensable)
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(AnyKernelDtype)
      .OAR_ANY_PLACE(SelectOutputKernel);
}

}  // namespace oar
