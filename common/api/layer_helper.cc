#include "common/api/layer_helper.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/api/unique_name.h"
#include "common/base/status.h"

namespace oar {

absl::Status CheckAndInferOp(const OpRegistry& registry, OpDesc* op, BlockDesc* block) {
  OAR_ASSIGN_OR_RETURN(const OpInfo* info, registry.Get(op->type));
  OAR_RETURN_IF_ERROR(info->CheckAndFill(op));
  if (info->infer_var_type() != nullptr) info->infer_var_type()(*op, block);
  if (info->infer_shape() != nullptr) {
    CompileTimeInferShapeContext ctx(*op, block);
    OAR_RETURN_IF_ERROR(info->infer_shape()(ctx));
  }
  return absl::OkStatus();
}

LayerHelper::LayerHelper(const std::string& layer_type, const std::string& name)
    : name_(name.empty() ? unique_name::Generate(layer_type) : name),
      main_(default_main_program()),
      startup_(default_startup_program()) {}

bool LayerHelper::Ok(std::initializer_list<Var> vars) const {
  if (!main_->status().ok()) return false;
  for (const Var& v : vars) {
    if (!v.valid()) {
      Fail("an input variable is invalid (an earlier layer failed)");
      return false;
    }
  }
  return true;
}

void LayerHelper::Fail(const std::string& message) const {
  main_->RecordError(absl::InvalidArgumentError(absl::StrCat(name_, ": ", message)));
}

Var LayerHelper::CreateTmp(DataType dtype, bool stop_gradient) const {
  std::string n = unique_name::Generate(absl::StrCat(name_, ".tmp"));
  VarDesc* v = block()->Var(n);
  v->dtype = dtype;
  v->stop_gradient = stop_gradient;
  return Var(main_, block(), n);
}

Var LayerHelper::CreateGlobal(const std::string& name, DataType dtype, const std::vector<int64_t>& shape) const {
  BlockDesc* global = main_->global_block();
  VarDesc* v = global->Var(name);
  v->dtype = dtype;
  v->shape = shape;
  v->persistable = true;
  return Var(main_, global, name);
}

void LayerHelper::InitInStartup(const VarDesc& var, const InitializerPtr& init) const {
  VarDesc* s = startup_->global_block()->Var(var.name);
  s->dtype = var.dtype;
  s->shape = var.shape;
  s->persistable = true;
  s->is_parameter = var.is_parameter;
  init->Append(*s, startup_);
}

Var LayerHelper::CreateParameter(const ParamAttr& attr, const std::vector<int64_t>& shape, DataType dtype, bool is_bias,
                                 InitializerPtr default_initializer) const {
  if (attr.disabled) return Var();
  for (int64_t d : shape) {
    if (d <= 0) {
      Fail(absl::StrCat("parameter shape must be fully known and positive, got [", absl::StrJoin(shape, ", "), "]"));
      return Var();
    }
  }
  std::string n = attr.name.empty() ? unique_name::Generate(absl::StrCat(name_, is_bias ? ".b" : ".w")) : attr.name;
  if (main_->global_block()->HasVar(n)) {
    // Layers given the same ParamAttr name share one parameter, as in Fluid
    // (e.g. one embedding table for many slots) — if they agree on it.
    const VarDesc* old = main_->global_block()->FindVar(n);
    if (old->is_parameter && old->dtype == dtype && old->shape == shape) return Var(main_, main_->global_block(), n);
    Fail(absl::StrCat("parameter '", n, "' already exists with another shape or dtype, or is not a parameter"));
    return Var();
  }
  Var p = CreateGlobal(n, dtype, shape);
  VarDesc* d = p.mutable_desc();
  d->is_parameter = true;
  d->trainable = attr.trainable;
  main_->AddParameter(n);
  InitializerPtr init = attr.initializer      ? attr.initializer
                        : default_initializer ? default_initializer
                        : is_bias             ? initializer::Constant(0.0f)
                                              : initializer::Xavier();
  InitInStartup(*d, init);
  d->learning_rate = attr.learning_rate;
  if (attr.regularizer || attr.gradient_clip) main_->param_extras[n] = {attr.regularizer, attr.gradient_clip};
  return p;
}

OpDesc* LayerHelper::AppendOp(const std::string& type, const VarList& inputs, const VarList& outputs,
                              std::map<std::string, Attribute> attrs) const {
  OpDesc* op = block()->AppendOp();
  op->type = type;
  for (const auto& [slot, vars] : inputs) {
    std::vector<std::string> names;
    for (const Var& v : vars) names.push_back(v.name());
    op->SetInput(slot, names);
  }
  for (const auto& [slot, vars] : outputs) {
    std::vector<std::string> names;
    for (const Var& v : vars) names.push_back(v.name());
    op->SetOutput(slot, names);
  }
  op->attrs = std::move(attrs);
  op->SetAttr(kOpRoleAttr, static_cast<int32_t>(main_->current_role));
  op->SetAttr(kOpRoleVarAttr, main_->current_role_var);
  absl::Status s = CheckAndInferOp(OpRegistry::Global(), op, block());
  if (!s.ok()) {
    block()->RemoveOps(block()->OpSize() - 1, block()->OpSize());
    main_->RecordError(Annotate(s, name_));
    return nullptr;
  }
  return op;
}

Var LayerHelper::AppendBias(const Var& x, int dim_start, const ParamAttr& attr, int dim_end) const {
  if (attr.disabled || !Ok({x})) return x;
  std::vector<int64_t> xs = x.shape();
  std::vector<int64_t> shape(xs.begin() + dim_start, dim_end < 0 ? xs.end() : xs.begin() + dim_end);
  Var b = CreateParameter(attr, shape, x.dtype(), /*is_bias=*/true);
  if (!b.valid()) return Var();
  Var out = CreateTmp(x.dtype());
  if (!AppendOp("elementwise_add", {{"X", {x}}, {"Y", {b}}}, {{"Out", {out}}}, {{"axis", int32_t{dim_start}}})) {
    return Var();
  }
  return out;
}

Var LayerHelper::AppendActivation(const Var& x, const std::string& act) const {
  if (act.empty() || !Ok({x})) return x;
  Var out = CreateTmp(x.dtype());
  if (!AppendOp(act, {{"X", {x}}}, {{"Out", {out}}})) return Var();
  return out;
}

}  // namespace oar
