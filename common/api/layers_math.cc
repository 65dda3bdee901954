// Math, reduction and control layers of fluid.layers.
#include <cctype>

#include "absl/strings/str_cat.h"
#include "common/api/layer_helper.h"
#include "common/api/layers.h"

namespace oar {
namespace layers {

namespace {

Var Unary(const std::string& type, const Var& x, const std::string& name, std::map<std::string, Attribute> attrs = {},
          DataType out_dtype = DataType::kFloat32, bool keep_dtype = true) {
  LayerHelper h(type, name);
  if (!h.Ok({x})) return Var();
  Var out = h.CreateTmp(keep_dtype ? x.dtype() : out_dtype);
  if (!h.AppendOp(type, {{"X", {x}}}, {{"Out", {out}}}, std::move(attrs))) return Var();
  return out;
}

Var Binary(const std::string& type, const Var& x, const Var& y, std::map<std::string, Attribute> attrs,
           const std::string& act = "", DataType out_dtype = DataType::kFloat32, bool keep_dtype = true) {
  LayerHelper h(type);
  if (!h.Ok({x, y})) return Var();
  Var out = h.CreateTmp(keep_dtype ? x.dtype() : out_dtype);
  if (!h.AppendOp(type, {{"X", {x}}, {"Y", {y}}}, {{"Out", {out}}}, std::move(attrs))) return Var();
  return h.AppendActivation(out, act);
}

Var Reduce(const std::string& type, const Var& input, const std::vector<int32_t>& dim, bool keep_dim,
           const std::string& name) {
  return Unary(
      type, input, name,
      {{"dim", dim.empty() ? std::vector<int32_t>{0} : dim}, {"keep_dim", keep_dim}, {"reduce_all", dim.empty()}});
}

}  // namespace

Var exp(const Var& x, const std::string& name) { return Unary("exp", x, name); }
Var sqrt(const Var& x, const std::string& name) { return Unary("sqrt", x, name); }
Var cos(const Var& x, const std::string& name) { return Unary("cos", x, name); }
Var floor(const Var& x, const std::string& name) { return Unary("floor", x, name); }
Var ceil(const Var& x, const std::string& name) { return Unary("ceil", x, name); }
Var abs(const Var& x, const std::string& name) { return Unary("abs", x, name); }

Var elementwise_max(const Var& x, const Var& y, int32_t axis, const std::string& act) {
  return Binary("elementwise_max", x, y, {{"axis", axis}}, act);
}
Var elementwise_min(const Var& x, const Var& y, int32_t axis, const std::string& act) {
  return Binary("elementwise_min", x, y, {{"axis", axis}}, act);
}
Var elementwise_pow(const Var& x, const Var& y, int32_t axis, const std::string& act) {
  return Binary("elementwise_pow", x, y, {{"axis", axis}}, act);
}

Var reduce_sum(const Var& input, const std::vector<int32_t>& dim, bool keep_dim, const std::string& name) {
  return Reduce("reduce_sum", input, dim, keep_dim, name);
}
Var reduce_mean(const Var& input, const std::vector<int32_t>& dim, bool keep_dim, const std::string& name) {
  return Reduce("reduce_mean", input, dim, keep_dim, name);
}

Var clip(const Var& x, float min, float max, const std::string& name) {
  return Unary("clip", x, name, {{"min", min}, {"max", max}});
}
Var clip_by_norm(const Var& x, float max_norm, const std::string& name) {
  return Unary("clip_by_norm", x, name, {{"max_norm", max_norm}});
}

Var cast(const Var& x, DataType dtype) {
  if (!x.valid()) return Var();
  return Unary("cast", x, "",
               {{"in_dtype", static_cast<int32_t>(x.dtype())}, {"out_dtype", static_cast<int32_t>(dtype)}}, dtype,
               false);
}

Var increment(const Var& x, float value, bool in_place) {
  LayerHelper h("increment");
  if (!h.Ok({x})) return Var();
  Var out = in_place ? x : h.CreateTmp(x.dtype());
  if (!h.AppendOp("increment", {{"X", {x}}}, {{"Out", {out}}}, {{"step", value}})) return Var();
  return out;
}

Var less_than(const Var& x, const Var& y, bool force_cpu) {
  LayerHelper h("less_than");
  if (!h.Ok({x, y})) return Var();
  Var cond = h.CreateTmp(DataType::kBool, true);
  if (!h.AppendOp("less_than", {{"X", {x}}, {"Y", {y}}}, {{"Out", {cond}}}, {{"force_cpu", force_cpu}})) return Var();
  return cond;
}

Var logical_not(const Var& x, const std::string& name) {
  return Unary("logical_not", x, name, {}, DataType::kBool, false);
}
Var logical_and(const Var& x, const Var& y, const std::string& name) {
  LayerHelper h("logical_and", name);
  if (!h.Ok({x, y})) return Var();
  Var out = h.CreateTmp(DataType::kBool, true);
  if (!h.AppendOp("logical_and", {{"X", {x}}, {"Y", {y}}}, {{"Out", {out}}})) return Var();
  return out;
}

Var assign(const Var& input, Var output) {
  LayerHelper h("assign");
  if (!h.Ok({input})) return Var();
  if (!output.valid()) output = h.CreateTmp(input.dtype());
  if (!h.AppendOp("assign", {{"X", {input}}}, {{"Out", {output}}})) return Var();
  return output;
}

Var merge_selected_rows(const Var& x, const std::string& name) { return Unary("merge_selected_rows", x, name); }

Var sequence_pool(const Var& input, const std::string& pool_type, bool is_test, float pad_value) {
  LayerHelper h("sequence_pool");
  if (!h.Ok({input})) return Var();
  std::string upper = pool_type;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  Var out = h.CreateTmp(input.dtype());
  Var max_index = h.CreateTmp(DataType::kInt32, true);
  if (!h.AppendOp("sequence_pool", {{"X", {input}}}, {{"Out", {out}}, {"MaxIndex", {max_index}}},
                  {{"pooltype", upper}, {"is_test", is_test}, {"pad_value", pad_value}})) {
    return Var();
  }
  return out;
}

Var embedding(const Var& input, std::vector<int64_t> size, bool is_sparse, bool is_distributed, int64_t padding_idx,
              const ParamAttr& param_attr, DataType dtype) {
  LayerHelper h("embedding");
  if (!h.Ok({input})) return Var();
  if (size.size() != 2) {
    h.Fail("size must be [rows, width]");
    return Var();
  }
  Var w = h.CreateParameter(param_attr, size, dtype, false);
  if (!w.valid()) return Var();
  Var out = h.CreateTmp(dtype);
  if (padding_idx < -1) padding_idx += size[0];  // Fluid: negative counts from the end
  if (!h.AppendOp("lookup_table", {{"Ids", {input}}, {"W", {w}}}, {{"Out", {out}}},
                  {{"is_sparse", is_sparse},
                   {"is_distributed", is_distributed},
                   {"remote_prefetch", false},
                   {"padding_idx", padding_idx}})) {
    return Var();
  }
  return out;
}

Var autoincreased_step_counter(const std::string& counter_name, int64_t begin, int64_t step) {
  LayerHelper h("global_step_counter");
  if (!h.Ok({})) return Var();
  BlockDesc* global = h.main()->global_block();
  if (global->HasVar(counter_name)) return Var(h.main(), global, counter_name);
  Var counter = h.CreateGlobal(counter_name, DataType::kInt64, {1});
  counter.set_stop_gradient(true);
  h.InitInStartup(counter.desc(), initializer::Constant(static_cast<float>(begin - 1), /*force_cpu=*/true));
  OpDesc* op = global->PrependOp();
  op->type = "increment";
  op->SetInput("X", {counter_name});
  op->SetOutput("Out", {counter_name});
  op->SetAttr("step", static_cast<float>(step));
  op->SetAttr(kOpRoleAttr, static_cast<int32_t>(h.main()->current_role));
  op->SetAttr(kOpRoleVarAttr, h.main()->current_role_var);
  return counter;
}

}  // namespace layers
}  // namespace oar
