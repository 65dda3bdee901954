#include "common/api/layers.h"

#include "absl/strings/str_cat.h"
#include "common/api/layer_helper.h"
#include "common/api/unique_name.h"

namespace oar {
namespace layers {

Var data(const std::string& name, std::vector<int64_t> shape, DataType dtype, int32_t lod_level,
         bool append_batch_size) {
  Program* main = default_main_program();
  if (append_batch_size) shape.insert(shape.begin(), -1);
  BlockDesc* block = main->global_block();
  if (block->HasVar(name)) {
    main->RecordError(absl::InvalidArgumentError(absl::StrCat("data: variable '", name, "' already exists")));
    return Var();
  }
  VarDesc* v = block->Var(name);
  v->dtype = dtype;
  v->shape = shape;
  v->lod_level = lod_level;
  v->stop_gradient = true;
  v->need_check_feed = true;
  return Var(main, block, name);
}

Var fc(const std::vector<Var>& inputs, int64_t size, const std::string& act, const ParamAttr& param_attr,
       const ParamAttr& bias_attr, int32_t num_flatten_dims, const std::string& name) {
  LayerHelper h("fc", name);
  if (inputs.empty()) {
    h.Fail("needs at least one input");
    return Var();
  }
  for (const Var& in : inputs)
    if (!h.Ok({in})) return Var();
  if (size <= 0) {
    h.Fail(absl::StrCat("size must be positive, got ", size));
    return Var();
  }
  std::vector<Var> products;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Var& in = inputs[i];
    std::vector<int64_t> s = in.shape();
    if (num_flatten_dims < 1 || num_flatten_dims >= static_cast<int>(s.size())) {
      h.Fail(absl::StrCat("num_flatten_dims=", num_flatten_dims, " is out of range for input '", in.name(),
                          "' of rank ", s.size()));
      return Var();
    }
    int64_t k = 1;
    for (size_t j = num_flatten_dims; j < s.size(); ++j) k *= s[j];
    ParamAttr attr = param_attr;
    if (inputs.size() > 1 && !attr.name.empty()) attr.name = absl::StrCat(attr.name, "_", i);
    Var w = h.CreateParameter(attr, {k, size}, in.dtype(), /*is_bias=*/false);
    if (!w.valid()) return Var();
    Var tmp = h.CreateTmp(in.dtype());
    if (!h.AppendOp("mul", {{"X", {in}}, {"Y", {w}}}, {{"Out", {tmp}}},
                    {{"x_num_col_dims", num_flatten_dims}, {"y_num_col_dims", int32_t{1}}})) {
      return Var();
    }
    products.push_back(tmp);
  }
  Var pre_bias = products[0];
  if (products.size() > 1) {
    pre_bias = h.CreateTmp(inputs[0].dtype());
    if (!h.AppendOp("sum", {{"X", products}}, {{"Out", {pre_bias}}}, {{"use_mkldnn", false}})) return Var();
  }
  return h.AppendActivation(h.AppendBias(pre_bias, num_flatten_dims, bias_attr), act);
}

Var fc(const Var& input, int64_t size, const std::string& act, const ParamAttr& param_attr, const ParamAttr& bias_attr,
       int32_t num_flatten_dims, const std::string& name) {
  return fc(std::vector<Var>{input}, size, act, param_attr, bias_attr, num_flatten_dims, name);
}

namespace {

// One op "type" from X to a new Out, named after the layer.
Var Unary(const std::string& type, const Var& x, const std::string& name, std::map<std::string, Attribute> attrs = {}) {
  LayerHelper h(type, name);
  if (!h.Ok({x})) return Var();
  Var out = h.CreateTmp(x.dtype());
  if (!h.AppendOp(type, {{"X", {x}}}, {{"Out", {out}}}, std::move(attrs))) return Var();
  return out;
}

Var Elementwise(const std::string& type, const Var& x, const Var& y, int32_t axis, const std::string& act) {
  LayerHelper h(type);
  if (!h.Ok({x, y})) return Var();
  Var out = h.CreateTmp(x.dtype());
  if (!h.AppendOp(type, {{"X", {x}}, {"Y", {y}}}, {{"Out", {out}}}, {{"axis", axis}})) return Var();
  return h.AppendActivation(out, act);
}

}  // namespace

Var relu(const Var& x, const std::string& name) { return Unary("relu", x, name); }
Var sigmoid(const Var& x, const std::string& name) { return Unary("sigmoid", x, name); }
Var tanh(const Var& x, const std::string& name) { return Unary("tanh", x, name); }
Var square(const Var& x, const std::string& name) { return Unary("square", x, name); }
Var softmax(const Var& x, bool use_cudnn, const std::string& name, int32_t axis) {
  return Unary("softmax", x, name, {{"axis", axis}, {"use_cudnn", use_cudnn}});
}

Var scale(const Var& x, float s, float bias, bool bias_after_scale, const std::string& act, const std::string& name) {
  LayerHelper h("scale", name);
  Var out = Unary("scale", x, h.name(), {{"scale", s}, {"bias", bias}, {"bias_after_scale", bias_after_scale}});
  return h.AppendActivation(out, act);
}

Var elementwise_add(const Var& x, const Var& y, int32_t axis, const std::string& act) {
  return Elementwise("elementwise_add", x, y, axis, act);
}
Var elementwise_sub(const Var& x, const Var& y, int32_t axis, const std::string& act) {
  return Elementwise("elementwise_sub", x, y, axis, act);
}
Var elementwise_mul(const Var& x, const Var& y, int32_t axis, const std::string& act) {
  return Elementwise("elementwise_mul", x, y, axis, act);
}
Var elementwise_div(const Var& x, const Var& y, int32_t axis, const std::string& act) {
  return Elementwise("elementwise_div", x, y, axis, act);
}

Var matmul(const Var& x, const Var& y, bool tx, bool ty, float alpha, const std::string& name) {
  LayerHelper h("matmul", name);
  if (!h.Ok({x, y})) return Var();
  Var out = h.CreateTmp(x.dtype());
  if (!h.AppendOp("matmul", {{"X", {x}}, {"Y", {y}}}, {{"Out", {out}}},
                  {{"transpose_X", tx}, {"transpose_Y", ty}, {"alpha", alpha}})) {
    return Var();
  }
  return out;
}

Var sums(const std::vector<Var>& xs) {
  LayerHelper h("sum");
  for (const Var& x : xs)
    if (!h.Ok({x})) return Var();
  if (xs.empty()) {
    h.Fail("needs at least one input");
    return Var();
  }
  Var out = h.CreateTmp(xs[0].dtype());
  if (!h.AppendOp("sum", {{"X", xs}}, {{"Out", {out}}}, {{"use_mkldnn", false}})) return Var();
  return out;
}

Var cross_entropy(const Var& input, const Var& label, bool soft_label, int32_t ignore_index) {
  LayerHelper h("cross_entropy");
  if (!h.Ok({input, label})) return Var();
  Var out = h.CreateTmp(input.dtype());
  if (!h.AppendOp("cross_entropy", {{"X", {input}}, {"Label", {label}}}, {{"Y", {out}}},
                  {{"soft_label", soft_label}, {"ignore_index", ignore_index}})) {
    return Var();
  }
  return out;
}

Var softmax_with_cross_entropy(const Var& logits, const Var& label, bool soft_label, int32_t ignore_index,
                               bool numeric_stable_mode, Var* softmax_out) {
  LayerHelper h("softmax_with_cross_entropy");
  if (!h.Ok({logits, label})) return Var();
  Var sm = h.CreateTmp(logits.dtype());
  Var loss = h.CreateTmp(logits.dtype());
  if (!h.AppendOp(
          "softmax_with_cross_entropy", {{"Logits", {logits}}, {"Label", {label}}},
          {{"Softmax", {sm}}, {"Loss", {loss}}},
          {{"soft_label", soft_label}, {"ignore_index", ignore_index}, {"numeric_stable_mode", numeric_stable_mode}})) {
    return Var();
  }
  if (softmax_out != nullptr) *softmax_out = sm;
  return loss;
}

Var square_error_cost(const Var& input, const Var& label) {
  LayerHelper h("square_error_cost");
  if (!h.Ok({input, label})) return Var();
  Var minus = h.CreateTmp(input.dtype());
  if (!h.AppendOp("elementwise_sub", {{"X", {input}}, {"Y", {label}}}, {{"Out", {minus}}})) return Var();
  Var sq = h.CreateTmp(input.dtype());
  if (!h.AppendOp("square", {{"X", {minus}}}, {{"Out", {sq}}})) return Var();
  return sq;
}

Var mean(const Var& x, const std::string& name) { return Unary("mean", x, name); }

std::pair<Var, Var> topk(const Var& input, int32_t k, const std::string& name) {
  LayerHelper h("top_k", name);
  if (!h.Ok({input})) return {};
  Var values = h.CreateTmp(input.dtype());
  Var indices = h.CreateTmp(DataType::kInt64);
  if (!h.AppendOp("top_k", {{"X", {input}}}, {{"Out", {values}}, {"Indices", {indices}}}, {{"k", k}})) {
    return {};
  }
  values.set_stop_gradient(true);
  indices.set_stop_gradient(true);
  return {values, indices};
}

Var accuracy(const Var& input, const Var& label, int32_t k) {
  LayerHelper h("accuracy");
  if (!h.Ok({input, label})) return Var();
  auto [values, indices] = topk(input, k);
  if (!values.valid()) return Var();
  Var acc = h.CreateTmp(DataType::kFloat32, true);
  Var correct = h.CreateTmp(DataType::kInt32, true);
  Var total = h.CreateTmp(DataType::kInt32, true);
  if (!h.AppendOp("accuracy", {{"Out", {values}}, {"Indices", {indices}}, {"Label", {label}}},
                  {{"Accuracy", {acc}}, {"Correct", {correct}}, {"Total", {total}}})) {
    return Var();
  }
  return acc;
}

Var fill_constant(const std::vector<int64_t>& shape, DataType dtype, float value, bool force_cpu) {
  LayerHelper h("fill_constant");
  if (!h.Ok({})) return Var();
  Var out = h.CreateTmp(dtype, true);
  if (!h.AppendOp(
          "fill_constant", {}, {{"Out", {out}}},
          {{"shape", shape}, {"dtype", static_cast<int32_t>(dtype)}, {"value", value}, {"force_cpu", force_cpu}})) {
    return Var();
  }
  return out;
}

Var create_global_var(const std::vector<int64_t>& shape, float value, DataType dtype, bool persistable,
                      const std::string& name, bool force_cpu) {
  LayerHelper h("global_var");
  if (!h.Ok({})) return Var();
  std::string n = name.empty() ? unique_name::Generate("global_var") : name;
  Var v = h.CreateGlobal(n, dtype, shape);
  v.mutable_desc()->persistable = persistable;
  v.set_stop_gradient(true);
  h.InitInStartup(v.desc(), initializer::Constant(value, force_cpu));
  return v;
}

}  // namespace layers
}  // namespace oar
