#include "common/api/math_ops.h"

#include "common/api/layer_helper.h"
#include "common/api/unique_name.h"

namespace oar {
namespace math {
namespace {

// A temporary named tmp_N in the current block.
Var Tmp(DataType dtype) {
  Program* p = default_main_program();
  std::string n = unique_name::Generate("tmp");
  VarDesc* v = p->current_block()->Var(n);
  v->dtype = dtype;
  return Var(p, p->current_block(), n);
}

Var Binary(const std::string& type, const Var& x, const Var& y, DataType out_dtype) {
  if (!x.valid() || !y.valid()) return Var();
  Var out = Tmp(out_dtype);
  LayerHelper h(type, type);
  if (!h.AppendOp(type, {{"X", {x}}, {"Y", {y}}}, {{"Out", {out}}}, {{"axis", int32_t{-1}}})) return Var();
  return out;
}

}  // namespace

Var Scalar(float value) {
  Var v = Tmp(DataType::kFloat32);
  LayerHelper h("fill_constant", "fill_constant");
  if (!h.AppendOp("fill_constant", {}, {{"Out", {v}}},
                  {{"dtype", static_cast<int32_t>(DataType::kFloat32)},
                   {"shape", std::vector<int64_t>{1}},
                   {"value", value},
                   {"force_cpu", true}})) {
    return Var();
  }
  return v;
}

Var Scale(const Var& x, float scale, float bias) {
  if (!x.valid()) return Var();
  Var out = Tmp(x.dtype());
  LayerHelper h("scale", "scale");
  if (!h.AppendOp("scale", {{"X", {x}}}, {{"Out", {out}}},
                  {{"scale", scale}, {"bias", bias}, {"bias_after_scale", true}})) {
    return Var();
  }
  return out;
}

Var Pow(const Var& x, float exponent) { return Binary("elementwise_pow", x, Scalar(exponent), x.dtype()); }
Var RPow(float base, const Var& x) { return Binary("elementwise_pow", Scalar(base), x, DataType::kFloat32); }
Var RDiv(float numerator, const Var& x) { return Binary("elementwise_div", Scalar(numerator), x, DataType::kFloat32); }
Var Less(const Var& x, float y) { return Binary("less_than", x, Scalar(y), DataType::kBool); }

}  // namespace math
}  // namespace oar
