#include "common/framework/prepared_block.h"

#include <algorithm>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/framework/nan_inf_check.h"
#include "common/framework/place_transfer.h"
#include "common/framework/run_env.h"
#include "common/profiler/profiler.h"

namespace oar {

namespace proto = paddle::framework::proto;

absl::StatusOr<std::unique_ptr<PreparedBlock>> PreparedBlock::Create(const ProgramDesc& program, int block_id,
                                                                     const OpRegistry& registry, Place place,
                                                                     const RunEnv* env, OpsAdded added) {
  if (block_id < 0 || block_id >= static_cast<int>(program.NumBlocks())) {
    return absl::InvalidArgumentError(
        absl::StrCat("block ", block_id, " does not exist (program has ", program.NumBlocks(), " blocks)"));
  }
  auto copy = std::make_unique<ProgramDesc>(program);
  std::unique_ptr<PreparedBlock> pb(new PreparedBlock(std::move(copy), block_id, place, &registry, env));
  BlockDesc* block = pb->program_->MutableBlock(block_id);
  pb->added_ = added.front + added.back <= block->OpSize() ? added : OpsAdded{};
  for (size_t i = 0; i < block->OpSize(); ++i) {
    OpDesc* op = block->MutableOp(i);
    auto info = registry.Get(op->type);
    if (!info.ok()) return Annotate(info.status(), pb->Where(i));
    OAR_RETURN_IF_ERROR(Annotate((*info)->CheckAndFill(op), pb->Where(i)));
    pb->ops_.push_back(OpRuntime{op, *info, {}, {}, {}, nullptr, DataType::kFloat32, place});
  }
  return pb;
}

std::string PreparedBlock::Where(size_t i) const {
  const BlockDesc& blk = program_->Block(block_id_);
  const OpDesc& op = blk.Op(i);
  const std::string in_block = absl::StrCat("block ", block_id_, ", ");
  const size_t own = blk.OpSize() - added_.front - added_.back;
  if (i < added_.front || i >= added_.front + own) {
    const std::vector<std::string>& var = op.type == "fetch" ? op.Input("X") : op.Output("Out");
    return absl::StrCat(in_block, "the ", op.type, " of '", var.empty() ? "" : var[0], "'");
  }
  return absl::StrCat(in_block, "op #", i - added_.front);
}

namespace {

void InitVariable(const VarDesc& desc, Variable* var) {
  if (var->IsInitialized()) return;
  switch (desc.type) {
    case proto::VarType::SELECTED_ROWS:
      var->GetMutable<SelectedRows>();
      break;
    case proto::VarType::FEED_MINIBATCH:
    case proto::VarType::FETCH_LIST:
    case proto::VarType::LOD_TENSOR_ARRAY:
      var->GetMutable<TensorList>();
      break;
    case proto::VarType::STEP_SCOPES:
      var->GetMutable<StepScopes>();
      break;
    default:
      var->GetMutable<Tensor>();
      break;
  }
}

}  // namespace

absl::Status PreparedBlock::Bind(Scope* scope, Scope* local) {
  if (bound_scope_ == scope && bound_local_ == local) return absl::OkStatus();
  const BlockDesc& blk = block();
  for (const auto& [name, desc] : blk.vars()) {
    InitVariable(desc, desc.persistable ? scope->Var(name) : local->Var(name));
  }
  for (OpRuntime& op : ops_) {
    op.binding.inputs.clear();
    op.binding.outputs.clear();
    for (const auto& [slot, args] : op.desc->inputs) {
      BoundSlot bs{&slot, {}};
      for (const SlotSpec& spec : op.info->inputs()) {
        if (spec.name == slot) bs.read_anywhere = spec.read_anywhere;
      }
      for (const auto& a : args) bs.vars.push_back(a == kEmptyVarName ? nullptr : local->FindVar(a));
      op.binding.inputs.push_back(std::move(bs));
    }
    op.zero_d_outputs.clear();
    for (const auto& [slot, args] : op.desc->outputs) {
      BoundSlot bs{&slot, {}};
      for (const auto& a : args) {
        Variable* v = nullptr;
        if (a != kEmptyVarName) {
          v = local->FindVar(a);
          if (v == nullptr) v = local->Var(a);  // undeclared output: a temporary
          const VarDesc* d = blk.FindVarRecursive(a);
          if (d != nullptr && d->type == proto::VarType::LOD_TENSOR && d->shape.empty() && !d->persistable) {
            op.zero_d_outputs.push_back(v);
          }
        }
        bs.vars.push_back(v);
      }
      op.binding.outputs.push_back(std::move(bs));
    }
    op.in_place.clear();
    for (const BoundSlot& in : op.binding.inputs) {
      for (const Variable* v : in.vars) {
        if (v == nullptr) continue;
        for (const BoundSlot& out : op.binding.outputs) {
          for (size_t k = 0; k < out.vars.size(); ++k) {
            if (out.vars[k] != v) continue;
            op.in_place.push_back({out.vars[k], in.name, out.name, &op.desc->outputs.at(*out.name)[k]});
          }
        }
      }
    }
  }
  bound_scope_ = scope;
  bound_local_ = local;
  return absl::OkStatus();
}

absl::Status PreparedBlock::CheckInputsSet(const OpRuntime& op) const {
  for (const SlotSpec& spec : op.info->inputs()) {
    if (spec.dispensable) continue;
    const auto* vars = FindBoundSlot(op.binding.inputs, spec.name);
    if (vars == nullptr) continue;  // CheckAndFill guarantees required slots exist
    for (size_t i = 0; i < vars->size(); ++i) {
      const Variable* v = (*vars)[i];
      bool set = v != nullptr && v->IsInitialized() && (!v->IsType<Tensor>() || v->Get<Tensor>().initialized());
      if (!set) {
        return absl::FailedPreconditionError(
            absl::StrCat(op.desc->type, ": input ", spec.name, " ('", op.desc->Input(spec.name)[i],
                         "') has no value; feed it, or run the startup program first"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status PreparedBlock::InferShape(OpRuntime& op, RuntimeInferShapeContext* ictx) const {
  InferShapeFn infer = op.info->infer_shape();
  if (infer == nullptr) return absl::OkStatus();
  // Inference resizes an in-place output, and so its input too: a kernel
  // would then read the input as if it had the new shape. Keep the shapes
  // of inputs that hold data to check (and restore) them.
  absl::InlinedVector<DDim, 2> before;
  for (const InPlaceArg& a : op.in_place) {
    const bool has_data = a.var->IsType<Tensor>() && a.var->Get<Tensor>().initialized();
    before.push_back(has_data ? a.var->Get<Tensor>().dims() : DDim{-1});
  }
  OAR_RETURN_IF_ERROR(infer(*ictx));
  OAR_RETURN_IF_ERROR(ictx->status());
  for (Variable* v : op.zero_d_outputs) {
    if (!v->IsType<Tensor>()) continue;
    Tensor* t = v->GetMutable<Tensor>();
    if (t->dims() == DDim{1}) t->Resize(DDim{});
  }
  for (size_t j = 0; j < op.in_place.size(); ++j) {
    const InPlaceArg& a = op.in_place[j];
    if (before[j].HasUnknown() || !a.var->IsType<Tensor>()) continue;
    const DDim now = a.var->Get<Tensor>().dims();
    if (now == before[j] || (op.info->in_place_may_reshape() && now.numel() == before[j].numel())) continue;
    for (size_t r = 0; r < op.in_place.size(); ++r) {  // leave the variables as they were
      if (!before[r].HasUnknown() && op.in_place[r].var->IsType<Tensor>()) {
        op.in_place[r].var->GetMutable<Tensor>()->Resize(before[r]);
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat(op.desc->type, ": output ", *a.out_slot, " ('", *a.name, "') is also input ", *a.in_slot,
                     "; in place its shape would change from ", before[j].ToString(), " to ", now.ToString(),
                     ", which the kernel cannot do: give the output its own variable"));
  }
  return absl::OkStatus();
}

absl::Status PreparedBlock::RunOp(OpRuntime& op) {
  Profiler* profiler = env_ != nullptr ? env_->profiler : nullptr;
  absl::Status s;
  if (profiler == nullptr) {
    s = RunOpBody(op);
  } else {
    const absl::Time start = absl::Now();
    s = RunOpBody(op);
    profiler->Record(op.desc->type, "op", start, absl::Now());
  }
  if (s.ok() && CheckNanInf()) s = CheckOutputsFinite(*op.desc, op.binding);
  return s;
}

absl::Status PreparedBlock::RunOpBody(OpRuntime& op) {
  OAR_RETURN_IF_ERROR(CheckInputsSet(op));
  RuntimeInferShapeContext ictx(*op.desc, op.binding);
  OAR_RETURN_IF_ERROR(InferShape(op, &ictx));
  ExecutionContext ctx(*op.desc, op.binding, op.kernel_place, bound_local_, this, env_);
  ctx.set_sparse_output_dims(&ictx.sparse_output_dims());
  DataType dtype = op.info->KernelDtype(ctx);
  if (op.kernel == nullptr || dtype != op.kernel_dtype) {
    OAR_ASSIGN_OR_RETURN(auto chosen, op.info->ChooseKernel(place_, dtype));
    op.kernel = chosen.first;
    op.kernel_place = chosen.second;  // ctx sees it: it holds a reference
    op.kernel_dtype = dtype;
    if (env_ != nullptr && env_->on_kernel_chosen) env_->on_kernel_chosen(*op.desc, dtype, op.kernel_place);
  }
  // On a GPU block, inputs move to where the kernel reads them.
  if (!place_.is_cpu()) OAR_RETURN_IF_ERROR(MoveInputsTo(*op.desc, op.binding, op.kernel_place));
  // An in-place kernel reads its input through a pointer taken before it
  // asks for the output buffer; when another owner shares that buffer (an RPC
  // reply in flight, a fetched value) mutable_data gives the output a fresh
  // one, and the other owner may let the old one go while the kernel still
  // reads it. So it does for read-only memory (a view of what a pserver
  // lends), whose mapping may go with the last tensor over it. Hold such
  // buffers until the kernel returns (only those: a hold on an unshared
  // buffer would itself force the copy).
  absl::InlinedVector<std::shared_ptr<const void>, 4> alive;
  for (const InPlaceArg& a : op.in_place) {
    const Variable* v = a.var;
    // A SelectedRows' values likewise (scale in place on a merged sparse
    // gradient that an RPC send still holds).
    const Tensor* t = v->IsType<Tensor>()         ? &v->Get<Tensor>()
                      : v->IsType<SelectedRows>() ? &v->Get<SelectedRows>().value
                                                  : nullptr;
    if (t != nullptr && t->initialized() && (t->BufferShared() || !t->Writable())) alive.push_back(t->KeepAlive());
  }
  absl::Status s = op.kernel(ctx);
  if (!IsRunOnHostInstead(s) || op.kernel_place.is_host()) return s;
  return RunOnHost(op, dtype, s);
}

// The GPU kernel handed this call to the CPU kernel (RunOnHostInstead): the
// inputs move to the host and it runs there, said once per op type.
absl::Status PreparedBlock::RunOnHost(OpRuntime& op, DataType dtype, const absl::Status& why) {
  OAR_ASSIGN_OR_RETURN(KernelFn cpu, op.info->FindKernel(Place::Kind::kCPU, dtype));
  SayRunsOnHostOnce(op.desc->type + " (call)", why.message());
  static const Place host = CPUPlace();
  OAR_RETURN_IF_ERROR(MoveInputsTo(*op.desc, op.binding, host));
  RuntimeInferShapeContext ictx(*op.desc, op.binding);
  OAR_RETURN_IF_ERROR(InferShape(op, &ictx));
  ExecutionContext ctx(*op.desc, op.binding, host, bound_local_, this, env_);
  ctx.set_sparse_output_dims(&ictx.sparse_output_dims());
  return cpu(ctx);
}

bool PreparedBlock::IsRunning(int32_t idx) const {
  for (const PreparedBlock* b = this; b != nullptr; b = b->parent_) {
    if (b->block_id_ == idx) return true;
  }
  return false;
}

absl::Status PreparedBlock::RunBlock(int32_t idx, Scope* scope) {
  if (IsRunning(idx)) {
    return absl::InvalidArgumentError(
        absl::StrCat("block ", idx, " is already running: a block cannot run itself or a block that runs it"));
  }
  SubBlock* entry;
  {
    absl::MutexLock lock(&sub_blocks_mu_);
    std::unique_ptr<SubBlock>& slot = sub_blocks_[idx];
    if (slot == nullptr) slot = std::make_unique<SubBlock>();
    entry = slot.get();  // stays put: entries are never erased
  }
  // Held over the run: the sub-block's binding belongs to this run. Ops of
  // different sub-blocks still run at once (each has its own lock), and a
  // sub-block's own sub-blocks lock further down the tree, never back up it.
  absl::MutexLock lock(&entry->mu);
  std::unique_ptr<PreparedBlock>& sub = entry->block;
  if (sub == nullptr) {
    OAR_ASSIGN_OR_RETURN(sub, Create(*program_, idx, *registry_, place_, env_));
    sub->parent_ = this;
  }
  OAR_RETURN_IF_ERROR(sub->Bind(bound_scope_, scope));
  absl::Status s = sub->Run();
  sub->Unbind();
  return s;
}

absl::Status PreparedBlock::RunOpAt(size_t i) {
  if (bound_scope_ == nullptr) {
    return absl::FailedPreconditionError("PreparedBlock::RunOpAt called before Bind");
  }
  return Annotate(RunOp(ops_[i]), Where(i));
}

absl::Status PreparedBlock::Run() {
  if (bound_scope_ == nullptr) {
    return absl::FailedPreconditionError("PreparedBlock::Run called before Bind");
  }
  for (size_t i = 0; i < ops_.size(); ++i) {
    absl::Status s = RunOp(ops_[i]);
    if (!s.ok()) return Annotate(s, Where(i));
  }
  return absl::OkStatus();
}

}  // namespace oar
