// Vision and shape layers of fluid.layers, and fluid.nets.simple_img_conv_pool.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/api/layer_helper.h"
#include "common/api/layers.h"

namespace oar {
namespace layers {

Var conv2d(const Var& input, int32_t num_filters, std::vector<int32_t> filter_size, std::vector<int32_t> stride,
           std::vector<int32_t> padding, std::vector<int32_t> dilation, int32_t groups, const ParamAttr& param_attr,
           const ParamAttr& bias_attr, bool use_cudnn, const std::string& act, const std::string& name) {
  LayerHelper h("conv2d", name);
  if (!h.Ok({input})) return Var();
  std::vector<int64_t> in = input.shape();
  if (in.size() != 4 || in[1] <= 0) {
    h.Fail(absl::StrCat("input '", input.name(), "' must be NCHW with a known channel count"));
    return Var();
  }
  if (filter_size.size() == 1) filter_size.push_back(filter_size[0]);
  if (groups < 1 || in[1] % groups != 0) {
    h.Fail(absl::StrCat("groups=", groups, " does not divide the ", in[1], " input channels"));
    return Var();
  }
  std::vector<int64_t> filter_shape = {num_filters, in[1] / groups, filter_size[0], filter_size[1]};
  const double fan = static_cast<double>(filter_size[0]) * filter_size[1] * in[1];
  Var w = h.CreateParameter(param_attr, filter_shape, input.dtype(), false,
                            initializer::Normal(0.0f, static_cast<float>(std::sqrt(2.0 / fan)), 0));
  if (!w.valid()) return Var();
  Var pre_bias = h.CreateTmp(input.dtype());
  if (!h.AppendOp("conv2d", {{"Input", {input}}, {"Filter", {w}}}, {{"Output", {pre_bias}}},
                  {{"strides", stride},
                   {"paddings", padding},
                   {"dilations", dilation},
                   {"groups", groups},
                   {"use_cudnn", use_cudnn},
                   {"use_mkldnn", false}})) {
    return Var();
  }
  return h.AppendActivation(h.AppendBias(pre_bias, 1, bias_attr, 2), act);
}

Var pool2d(const Var& input, std::vector<int32_t> pool_size, const std::string& pool_type,
           std::vector<int32_t> pool_stride, std::vector<int32_t> pool_padding, bool global_pooling, bool use_cudnn,
           bool ceil_mode, const std::string& name, bool exclusive) {
  LayerHelper h("pool2d", name);
  if (!h.Ok({input})) return Var();
  auto pair = [](std::vector<int32_t> v) {
    if (v.size() == 1) v.push_back(v[0]);
    return v;
  };
  Var out = h.CreateTmp(input.dtype());
  if (!h.AppendOp("pool2d", {{"X", {input}}}, {{"Out", {out}}},
                  {{"pooling_type", pool_type},
                   {"ksize", pair(pool_size)},
                   {"global_pooling", global_pooling},
                   {"strides", pair(pool_stride)},
                   {"paddings", pair(pool_padding)},
                   {"use_cudnn", use_cudnn},
                   {"ceil_mode", ceil_mode},
                   {"use_mkldnn", false},
                   {"exclusive", exclusive}})) {
    return Var();
  }
  return out;
}

Var batch_norm(const Var& input, const std::string& act, bool is_test, float momentum, float epsilon,
               const ParamAttr& param_attr, const ParamAttr& bias_attr, const std::string& name,
               const std::string& moving_mean_name, const std::string& moving_variance_name, bool use_global_stats) {
  LayerHelper h("batch_norm", name);
  if (!h.Ok({input})) return Var();
  std::vector<int64_t> in = input.shape();
  if (in.size() < 2 || in[1] <= 0) {
    h.Fail(absl::StrCat("input '", input.name(), "' needs a known channel dimension 1"));
    return Var();
  }
  const std::vector<int64_t> shape = {in[1]};
  const DataType dt = input.dtype();
  Var scale = h.CreateParameter(param_attr, shape, dt, false, initializer::Constant(1.0f));
  Var bias = h.CreateParameter(bias_attr, shape, dt, true);
  ParamAttr mean_attr{moving_mean_name, initializer::Constant(0.0f), 1.0f, /*trainable=*/false, nullptr, nullptr};
  ParamAttr var_attr{moving_variance_name, initializer::Constant(1.0f), 1.0f, /*trainable=*/false, nullptr, nullptr};
  Var mean = h.CreateParameter(mean_attr, shape, dt, false);
  Var variance = h.CreateParameter(var_attr, shape, dt, false);
  if (!scale.valid() || !bias.valid() || !mean.valid() || !variance.valid()) return Var();
  mean.set_stop_gradient(true);
  variance.set_stop_gradient(true);
  Var saved_mean = h.CreateTmp(dt, true);
  Var saved_variance = h.CreateTmp(dt, true);
  Var out = h.CreateTmp(dt);
  if (!h.AppendOp("batch_norm",
                  {{"X", {input}}, {"Scale", {scale}}, {"Bias", {bias}}, {"Mean", {mean}}, {"Variance", {variance}}},
                  {{"Y", {out}},
                   {"MeanOut", {mean}},
                   {"VarianceOut", {variance}},
                   {"SavedMean", {saved_mean}},
                   {"SavedVariance", {saved_variance}}},
                  {{"momentum", momentum},
                   {"epsilon", epsilon},
                   {"is_test", is_test},
                   {"use_mkldnn", false},
                   {"fuse_with_relu", false},
                   {"use_global_stats", use_global_stats}})) {
    return Var();
  }
  return h.AppendActivation(out, act);
}

Var dropout(const Var& x, float dropout_prob, bool is_test, int32_t seed, const std::string& name,
            const std::string& dropout_implementation) {
  LayerHelper h("dropout", name);
  if (!h.Ok({x})) return Var();
  Var out = h.CreateTmp(x.dtype());
  Var mask = h.CreateTmp(x.dtype(), true);
  if (!h.AppendOp("dropout", {{"X", {x}}}, {{"Out", {out}}, {"Mask", {mask}}},
                  {{"dropout_prob", dropout_prob},
                   {"is_test", is_test},
                   {"fix_seed", seed >= 0},
                   {"seed", std::max(seed, 0)},
                   {"dropout_implementation", dropout_implementation}})) {
    return Var();
  }
  return out;
}

namespace {
// The "2" shape ops: Out plus an XShape temporary.
Var ShapeOp(const std::string& layer, const std::string& type, const Var& x, const std::string& name,
            std::map<std::string, Attribute> attrs) {
  LayerHelper h(layer, name);
  if (!h.Ok({x})) return Var();
  Var out = h.CreateTmp(x.dtype());
  Var xshape = h.CreateTmp(x.dtype(), true);
  if (!h.AppendOp(type, {{"X", {x}}}, {{"Out", {out}}, {"XShape", {xshape}}}, std::move(attrs))) return Var();
  return out;
}
}  // namespace

Var reshape(const Var& x, const std::vector<int32_t>& shape, const std::string& act, const std::string& name) {
  LayerHelper h("reshape2", name);
  return h.AppendActivation(ShapeOp("reshape2", "reshape2", x, h.name(), {{"shape", shape}}), act);
}
Var transpose(const Var& x, const std::vector<int32_t>& perm, const std::string& name) {
  return ShapeOp("transpose", "transpose2", x, name, {{"axis", perm}});
}
Var flatten(const Var& x, int32_t axis, const std::string& name) {
  return ShapeOp("flatten", "flatten2", x, name, {{"axis", axis}});
}
Var squeeze(const Var& x, const std::vector<int32_t>& axes, const std::string& name) {
  return ShapeOp("squeeze", "squeeze2", x, name, {{"axes", axes}});
}
Var unsqueeze(const Var& x, const std::vector<int32_t>& axes, const std::string& name) {
  return ShapeOp("unsqueeze", "unsqueeze2", x, name, {{"axes", axes}});
}

Var concat(const std::vector<Var>& input, int32_t axis, const std::string& name) {
  LayerHelper h("concat", name);
  for (const Var& v : input)
    if (!h.Ok({v})) return Var();
  if (input.empty()) {
    h.Fail("needs at least one input");
    return Var();
  }
  Var out = h.CreateTmp(input[0].dtype());
  if (!h.AppendOp("concat", {{"X", input}}, {{"Out", {out}}}, {{"axis", axis}})) return Var();
  return out;
}

std::vector<Var> split(const Var& input, int32_t num, const std::vector<int32_t>& sections, int32_t dim,
                       const std::string& name) {
  LayerHelper h("split", name);
  if (!h.Ok({input})) return {};
  const size_t pieces = num > 0 ? static_cast<size_t>(num) : sections.size();
  std::vector<Var> outs;
  for (size_t i = 0; i < pieces; ++i) outs.push_back(h.CreateTmp(input.dtype()));
  const int32_t axis = dim < 0 ? dim + static_cast<int32_t>(input.shape().size()) : dim;
  if (!h.AppendOp("split", {{"X", {input}}}, {{"Out", outs}},
                  {{"num", num > 0 ? num : 0}, {"sections", sections}, {"axis", axis}})) {
    return {};
  }
  return outs;
}

}  // namespace layers

namespace nets {

Var simple_img_conv_pool(const Var& input, int32_t num_filters, int32_t filter_size, int32_t pool_size,
                         int32_t pool_stride, int32_t pool_padding, const std::string& pool_type, bool global_pooling,
                         int32_t conv_stride, int32_t conv_padding, int32_t conv_dilation, int32_t conv_groups,
                         const ParamAttr& param_attr, const ParamAttr& bias_attr, const std::string& act,
                         bool use_cudnn) {
  Var conv = layers::conv2d(input, num_filters, {filter_size, filter_size}, {conv_stride, conv_stride},
                            {conv_padding, conv_padding}, {conv_dilation, conv_dilation}, conv_groups, param_attr,
                            bias_attr, use_cudnn, act);
  return layers::pool2d(conv, {pool_size, pool_size}, pool_type, {pool_stride, pool_stride},
                        {pool_padding, pool_padding}, global_pooling, use_cudnn);
}

}  // namespace nets
}  // namespace oar
