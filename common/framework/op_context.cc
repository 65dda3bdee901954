#include "common/framework/op_context.h"

namespace oar {

namespace {
bool HasRealArg(const std::vector<std::string>& args) {
  for (const auto& a : args)
    if (a != kEmptyVarName) return true;
  return false;
}
}  // namespace

bool InferShapeContext::HasInput(const std::string& slot) const { return HasRealArg(op_.Input(slot)); }
bool InferShapeContext::HasOutput(const std::string& slot) const { return HasRealArg(op_.Output(slot)); }

const std::vector<Variable*>* FindBoundSlot(const std::vector<BoundSlot>& slots, const std::string& slot) {
  for (const auto& s : slots) {
    if (*s.name == slot) return &s.vars;
  }
  return nullptr;
}

// ---- build time ----

const VarDesc* CompileTimeInferShapeContext::InVar(const std::string& slot, size_t i) const {
  const auto& args = op().Input(slot);
  if (i >= args.size() || args[i] == kEmptyVarName) return nullptr;
  return block_->FindVarRecursive(args[i]);
}

DDim CompileTimeInferShapeContext::InputDim(const std::string& slot, size_t i) const {
  const VarDesc* v = InVar(slot, i);
  return v ? DDim(v->shape) : DDim();
}

DataType CompileTimeInferShapeContext::InputDtype(const std::string& slot, size_t i) const {
  const VarDesc* v = InVar(slot, i);
  return v ? v->dtype : DataType::kFloat32;
}

namespace {
// The output's VarDesc: the visible one (possibly in an ancestor block),
// else a new one in `block`.
VarDesc* OutVar(BlockDesc* block, const std::string& name) {
  VarDesc* v = block->FindMutableVarRecursive(name);
  return v ? v : block->Var(name);
}
}  // namespace

void CompileTimeInferShapeContext::SetOutputDim(const std::string& slot, const DDim& dims, size_t i) {
  const auto& args = op().Output(slot);
  if (i >= args.size() || args[i] == kEmptyVarName) return;
  OutVar(block_, args[i])->shape = dims.ToVector();
}

void CompileTimeInferShapeContext::SetOutputDtype(const std::string& slot, DataType dtype, size_t i) {
  const auto& args = op().Output(slot);
  if (i >= args.size() || args[i] == kEmptyVarName) return;
  OutVar(block_, args[i])->dtype = dtype;
}

// ---- run time ----

namespace {
const Tensor* AsTensor(const Variable* v) {
  if (v == nullptr) return nullptr;
  if (v->IsType<Tensor>()) return &v->Get<Tensor>();
  if (v->IsType<SelectedRows>()) return &v->Get<SelectedRows>().value;
  return nullptr;
}
Variable* At(const std::vector<BoundSlot>& slots, const std::string& slot, size_t i) {
  const auto* vars = FindBoundSlot(slots, slot);
  return (vars == nullptr || i >= vars->size()) ? nullptr : (*vars)[i];
}
}  // namespace

DDim RuntimeInferShapeContext::InputDim(const std::string& slot, size_t i) const {
  const Variable* v = At(binding_.inputs, slot, i);
  if (v != nullptr && v->IsType<SelectedRows>()) {
    // A SelectedRows stands for its full [height, ...] tensor; with no rows
    // its width is unknown (an empty value may be [0] alone, as MergeRows
    // leaves a merge of nothing).
    const SelectedRows& s = v->Get<SelectedRows>();
    DDim d = s.value.dims();
    if (d.size() == 0 || (s.rows.empty() && d.size() == 1)) return DDim{-1};
    d[0] = s.height;
    return d;
  }
  if (v != nullptr && v->IsType<SparseTable>()) return DDim{-1, v->Get<SparseTable>().width()};  // rows grow
  const Tensor* t = AsTensor(v);
  return t ? t->dims() : DDim();
}

DataType RuntimeInferShapeContext::InputDtype(const std::string& slot, size_t i) const {
  const Tensor* t = AsTensor(At(binding_.inputs, slot, i));
  return t ? t->dtype() : DataType::kFloat32;
}

void RuntimeInferShapeContext::SetOutputDim(const std::string& slot, const DDim& dims, size_t i) {
  Variable* v = At(binding_.outputs, slot, i);
  if (v == nullptr || v->IsType<SparseTable>()) return;  // a table sizes itself
  if (v->IsType<SelectedRows>()) {                       // sparse outputs size themselves; a dense kernel gets `dims`
    if (!dims.HasUnknown()) sparse_output_dims_.emplace_back(v, dims);
    return;
  }
  if (dims.HasUnknown()) {
    if (status_.ok()) {
      const auto& args = op().Output(slot);
      status_ = Error("output ", slot, " ('", i < args.size() ? args[i] : "?", "') has shape ", dims.ToString(),
                      "; a run-time shape cannot have a negative dimension");
    }
    return;
  }
  v->GetMutable<Tensor>()->Resize(dims);
}

void RuntimeInferShapeContext::ShareLoD(const std::string& in, const std::string& out) {
  const Tensor* src = AsTensor(At(binding_.inputs, in, 0));
  Variable* dst = At(binding_.outputs, out, 0);
  if (src == nullptr || dst == nullptr || !dst->IsType<Tensor>()) return;
  dst->GetMutable<Tensor>()->set_lod(src->lod());
}

// ---- kernels ----

Variable* ExecutionContext::InputVar(const std::string& slot, size_t i) const { return At(binding_.inputs, slot, i); }
Variable* ExecutionContext::OutputVar(const std::string& slot, size_t i) const { return At(binding_.outputs, slot, i); }
size_t ExecutionContext::InputSize(const std::string& slot) const {
  const auto* vars = FindBoundSlot(binding_.inputs, slot);
  return vars ? vars->size() : 0;
}
const Tensor* ExecutionContext::Input(const std::string& slot, size_t i) const {
  const Variable* v = InputVar(slot, i);
  return (v != nullptr && v->IsType<Tensor>()) ? &v->Get<Tensor>() : nullptr;
}
std::vector<const Tensor*> ExecutionContext::MultiInput(const std::string& slot) const {
  std::vector<const Tensor*> out;
  for (size_t i = 0, n = InputSize(slot); i < n; ++i) out.push_back(Input(slot, i));
  return out;
}
Tensor* ExecutionContext::AsDenseOutput(Variable* v) const {
  if (v == nullptr) return nullptr;
  if (v->IsType<Tensor>()) return v->GetMutable<Tensor>();
  // A SelectedRows (or nothing) becomes a tensor; give it the dense shape
  // inference gave the variable, or a dense kernel would size its writes
  // from its inputs and overrun a fresh rank-0 tensor.
  DDim dims;
  if (sparse_output_dims_ != nullptr) {
    for (const auto& [var, d] : *sparse_output_dims_) {
      if (var == v) dims = d;
    }
  }
  const bool was_sparse = v->IsType<SelectedRows>();
  Tensor* t = v->GetMutable<Tensor>();
  if (was_sparse) t->Resize(dims);
  return t;
}
Tensor* ExecutionContext::Output(const std::string& slot, size_t i) const { return AsDenseOutput(OutputVar(slot, i)); }
std::vector<Tensor*> ExecutionContext::MultiOutput(const std::string& slot) const {
  std::vector<Tensor*> out;
  const auto* vars = FindBoundSlot(binding_.outputs, slot);
  if (vars == nullptr) return out;
  for (Variable* v : *vars) out.push_back(AsDenseOutput(v));
  return out;
}

}  // namespace oar
