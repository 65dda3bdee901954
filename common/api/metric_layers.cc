// layers::auc (declared in layers.h): Fluid 1.x's pair of auc ops.
#include "absl/strings/str_cat.h"
#include "common/api/initializer.h"
#include "common/api/layer_helper.h"
#include "common/api/layers.h"
#include "common/api/unique_name.h"

namespace oar {
namespace layers {

AucVars auc(const Var& input, const Var& label, const std::string& curve, int32_t num_thresholds, int32_t slide_steps) {
  LayerHelper h("auc");
  if (!h.Ok({input, label})) return {};
  AucVars v;
  v.auc = h.CreateTmp(DataType::kFloat64, true);
  v.batch_auc = h.CreateTmp(DataType::kFloat64, true);
  auto counts = [&](int64_t rows) {
    Var c = h.CreateGlobal(unique_name::Generate(absl::StrCat(h.name(), ".tmp")), DataType::kInt64,
                           {rows, num_thresholds + 1});
    c.set_stop_gradient(true);
    h.InitInStartup(c.desc(), initializer::Constant(0.0f, /*force_cpu=*/true));
    return c;
  };
  v.batch_stat_pos = counts(slide_steps);
  v.batch_stat_neg = counts(slide_steps);
  v.stat_pos = counts(1);
  v.stat_neg = counts(1);
  const std::map<std::string, Attribute> batch_attrs = {
      {"curve", curve}, {"num_thresholds", num_thresholds}, {"slide_steps", slide_steps}};
  const std::map<std::string, Attribute> global_attrs = {
      {"curve", curve}, {"num_thresholds", num_thresholds}, {"slide_steps", int32_t{0}}};
  if (!h.AppendOp(
          "auc",
          {{"Predict", {input}}, {"Label", {label}}, {"StatPos", {v.batch_stat_pos}}, {"StatNeg", {v.batch_stat_neg}}},
          {{"AUC", {v.batch_auc}}, {"StatPosOut", {v.batch_stat_pos}}, {"StatNegOut", {v.batch_stat_neg}}},
          batch_attrs) ||
      !h.AppendOp("auc",
                  {{"Predict", {input}}, {"Label", {label}}, {"StatPos", {v.stat_pos}}, {"StatNeg", {v.stat_neg}}},
                  {{"AUC", {v.auc}}, {"StatPosOut", {v.stat_pos}}, {"StatNegOut", {v.stat_neg}}}, global_attrs)) {
    return {};
  }
  return v;
}

}  // namespace layers
}  // namespace oar
