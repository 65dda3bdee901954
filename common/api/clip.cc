#include "common/api/clip.h"

#include "absl/strings/str_cat.h"
#include "common/api/layers.h"

namespace oar {
namespace {

class ByValue : public GradientClip {
 public:
  ByValue(float max, float min) : max_(max), min_(min) {}
  Var CreateOperators(std::map<std::string, Var>*, const Var&, const Var& grad) const override {
    return layers::clip(grad, min_, max_);
  }

 private:
  float max_, min_;
};

class ByNorm : public GradientClip {
 public:
  explicit ByNorm(float n) : norm_(n) {}
  Var CreateOperators(std::map<std::string, Var>*, const Var&, const Var& grad) const override {
    return layers::clip_by_norm(grad, norm_);
  }

 private:
  float norm_;
};

class ByGlobalNorm : public GradientClip {
 public:
  ByGlobalNorm(float n, std::string group) : norm_(n), group_(std::move(group)) {}

  void ProcessContext(std::map<std::string, Var>* ctx, const Var&, const Var& grad) const override {
    const std::string clip_key = group_ + "_clip";
    if (!ctx->count(clip_key)) (*ctx)[clip_key] = layers::fill_constant({1}, DataType::kFloat32, norm_);
    Var g = grad;
    if (grad.desc().type == paddle::framework::proto::VarType::SELECTED_ROWS) g = layers::merge_selected_rows(grad);
    Var local = layers::reduce_sum(layers::square(g));
    (*ctx)[absl::StrCat(group_, "#", ctx->size())] = local;  // one entry per gradient
  }

  Var CreateOperators(std::map<std::string, Var>* ctx, const Var&, const Var& grad) const override {
    const std::string scale_key = group_ + "_scale";
    if (!ctx->count(scale_key)) {
      std::vector<Var> norms;
      for (const auto& [k, v] : *ctx) {
        if (k.rfind(group_ + "#", 0) == 0) norms.push_back(v);
      }
      Var total = layers::sqrt(layers::sums(norms));
      Var clip = (*ctx)[group_ + "_clip"];
      (*ctx)[scale_key] = layers::elementwise_div(clip, layers::elementwise_max(clip, total));
    }
    return layers::elementwise_mul(grad, (*ctx)[scale_key]);
  }

 private:
  float norm_;
  std::string group_;
};

}  // namespace

GradientClipPtr GradientClipByValue(float max, float min) { return std::make_shared<ByValue>(max, min); }
GradientClipPtr GradientClipByNorm(float clip_norm) { return std::make_shared<ByNorm>(clip_norm); }
GradientClipPtr GradientClipByGlobalNorm(float clip_norm, const std::string& group_name) {
  return std::make_shared<ByGlobalNorm>(clip_norm, group_name);
}

void set_gradient_clip(const GradientClipPtr& clip, const std::vector<std::string>& param_list, Program* program) {
  if (program == nullptr) program = default_main_program();
  for (const auto& p : param_list.empty() ? program->parameters() : param_list) {
    program->param_extras[p].clip = clip;
  }
}

std::vector<std::pair<Var, Var>> append_gradient_clip_ops(const std::vector<std::pair<Var, Var>>& params_grads) {
  std::map<std::string, Var> context;
  auto clip_of = [](const Var& p) -> GradientClipPtr {
    auto it = p.program()->param_extras.find(p.name());
    return it == p.program()->param_extras.end() ? nullptr : it->second.clip;
  };
  for (const auto& [p, g] : params_grads) {
    GradientClipPtr clip = clip_of(p);
    if (!clip || !g.valid()) continue;
    RoleGuard role(p.program(), OpRole::kOptimize, {p.name(), g.name()});
    clip->ProcessContext(&context, p, g);
  }
  std::vector<std::pair<Var, Var>> out;
  for (const auto& [p, g] : params_grads) {
    GradientClipPtr clip = clip_of(p);
    if (!clip || !g.valid()) {
      out.emplace_back(p, g);
      continue;
    }
    RoleGuard role(p.program(), OpRole::kOptimize, {p.name(), g.name()});
    out.emplace_back(p, clip->CreateOperators(&context, p, g));
  }
  return out;
}

}  // namespace oar
