// nce (fluid.layers.nce, paddle.static.nn.nce): noise-contrastive
// estimation, as Fluid computes it. Each example keeps its true labels and
// draws num_neg_samples negatives from the op's sampler — uniform over the
// classes, log-uniform (Zipf-like), or a custom distribution by Walker's
// alias tables (CustomDistProbs/Alias/AliasProbs) — seeded anew from `seed`
// on every run, as Paddle does (seed 0: a fresh random seed). SampleLabels
// holds [true labels, negatives] per example, SampleLogits the sigmoid of
// w·x + b for each, and Cost Σ −log(o/(o+b)) over the true labels plus
// Σ −log(b/(o+b)) over the negatives, with b = P(class)·num_neg_samples,
// times SampleWeight. With is_sparse, Weight@GRAD is a SelectedRows of the
// sampled classes (sorted).
//
// Thread-safety: stateless kernels (each run makes its own sampler).
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/framework/selected_rows.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

// Paddle's samplers over [0, range], with its engines and distributions.
class Sampler {
 public:
  virtual ~Sampler() = default;
  virtual int64_t Sample() = 0;
  virtual double Probability(int64_t v) const = 0;

 protected:
  static uint64_t Seed(int32_t seed) { return seed != 0 ? static_cast<uint32_t>(seed) : std::random_device{}(); }
};

class UniformSampler : public Sampler {
 public:
  UniformSampler(int64_t range, int32_t seed)
      : engine_(Seed(seed)), dist_(0, static_cast<int>(range)), p_(1.0 / (range + 1)) {}
  int64_t Sample() override { return dist_(engine_); }
  double Probability(int64_t) const override { return p_; }

 private:
  std::mt19937_64 engine_;
  std::uniform_int_distribution<> dist_;
  double p_;
};

class LogUniformSampler : public Sampler {
 public:
  LogUniformSampler(int64_t range, int32_t seed)
      : range_(range), log_range_(std::log(range + 1.0)), engine_(Seed(seed)) {}
  int64_t Sample() override {
    const int64_t v = static_cast<int64_t>(std::exp(dist_(engine_) * log_range_)) - 1;
    return v % range_;  // float round-off may reach range_
  }
  double Probability(int64_t v) const override { return std::log((v + 2.0) / (v + 1.0)) / log_range_; }

 private:
  int64_t range_;
  double log_range_;
  std::mt19937_64 engine_;
  std::uniform_real_distribution<> dist_{0, 1};
};

class CustomSampler : public Sampler {
 public:
  CustomSampler(int64_t range, const float* probs, const int32_t* alias, const float* alias_probs, int32_t seed)
      : engine_(Seed(seed)),
        index_(0, static_cast<int>(range)),
        probs_(probs),
        alias_(alias),
        alias_probs_(alias_probs) {}
  int64_t Sample() override {
    const int i = index_(engine_);
    const double p = real_(engine_);
    if (p > alias_probs_[i]) return alias_[i] == -1 ? i : alias_[i];
    return i;
  }
  double Probability(int64_t v) const override { return probs_[v]; }

 private:
  std::mt19937_64 engine_;
  std::uniform_int_distribution<> index_;
  std::uniform_real_distribution<> real_{0, 1};
  const float* probs_;
  const int32_t* alias_;
  const float* alias_probs_;
};

absl::StatusOr<std::unique_ptr<Sampler>> MakeSampler(const ExecutionContext& ctx) {
  const int64_t classes = ctx.Attr<int32_t>("num_total_classes");
  const int32_t seed = ctx.Attr<int32_t>("seed");
  switch (ctx.Attr<int32_t>("sampler")) {
    case 0:
      return std::unique_ptr<Sampler>(new UniformSampler(classes - 1, seed));
    case 1:
      return std::unique_ptr<Sampler>(new LogUniformSampler(classes - 1, seed));
    case 2: {
      const Tensor* probs = ctx.Input("CustomDistProbs");
      const Tensor* alias = ctx.Input("CustomDistAlias");
      const Tensor* alias_probs = ctx.Input("CustomDistAliasProbs");
      for (const Tensor* t : {probs, alias, alias_probs}) {
        if (t == nullptr || t->numel() != classes) {
          return absl::InvalidArgumentError(absl::StrCat(
              "nce: sampler custom_dist needs CustomDistProbs, CustomDistAlias and CustomDistAliasProbs of ", classes,
              " entries each"));
        }
      }
      return std::unique_ptr<Sampler>(new CustomSampler(classes - 1, probs->data<float>(), alias->data<int32_t>(),
                                                        alias_probs->data<float>(), seed));
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat("nce: sampler ", ctx.Attr<int32_t>("sampler"),
                                                     " is not 0 (uniform), 1 (log_uniform) or 2 (custom_dist)"));
  }
}

// Paddle 2.x sets remote_prefetch with is_sparse; it prefetches rows from
// pservers only where a transpiler filled epmap.
absl::Status LocalWeight(const ExecutionContext& ctx) {
  if (ctx.Attr<bool>("remote_prefetch") && !ctx.Attr<std::vector<std::string>>("epmap").empty()) {
    return absl::UnimplementedError(
        "nce: remote_prefetch of Weight's rows from the pservers in epmap is not implemented; transpile with the "
        "table on the trainer (is_distributed=False)");
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status NceKernel(const ExecutionContext& ctx) {
  OAR_RETURN_IF_ERROR(LocalWeight(ctx));
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "Input"));
  OAR_ASSIGN_OR_RETURN(const Tensor* label, RequireInput(ctx, "Label"));
  OAR_ASSIGN_OR_RETURN(const Tensor* w, RequireInput(ctx, "Weight"));
  OAR_RETURN_IF_ERROR(RequireDtype<int64_t>(ctx, "Label", *label));
  const int64_t n = x->dims()[0], d = x->numel() / std::max<int64_t>(n, 1);
  const int64_t classes = ctx.Attr<int32_t>("num_total_classes");
  const int64_t num_true = label->dims().size() == 2 ? label->dims()[1] : 1;
  const auto custom = ctx.Attr<std::vector<int32_t>>("custom_neg_classes");
  const int64_t negs = custom.empty() ? ctx.Attr<int32_t>("num_neg_samples") : static_cast<int64_t>(custom.size());
  if (w->dims().size() != 2 || w->dims()[0] != classes || w->dims()[1] != d || label->dims()[0] != n) {
    return absl::InvalidArgumentError(absl::StrCat("nce: Weight", w->dims().ToString(), " must be [", classes, ", ", d,
                                                   "] for Input", x->dims().ToString(), " and Label",
                                                   label->dims().ToString(), " one row per example"));
  }
  OAR_ASSIGN_OR_RETURN(std::unique_ptr<Sampler> sampler, MakeSampler(ctx));
  const int64_t cols = num_true + negs;
  int64_t* labels = ctx.Output("SampleLabels")->mutable_data<int64_t>(DDim{n, cols});
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < num_true; ++j) labels[i * cols + j] = label->data<int64_t>()[i * num_true + j];
    for (int64_t j = 0; j < negs; ++j) {
      labels[i * cols + num_true + j] = custom.empty() ? sampler->Sample() : custom[static_cast<size_t>(j)];
    }
  }
  for (int64_t k = 0; k < n * cols; ++k) {
    if (labels[k] < 0 || labels[k] >= classes) {
      return absl::InvalidArgumentError(
          absl::StrCat("nce: label ", labels[k], " (example ", k / cols, ") is not a class in [0, ", classes, ")"));
    }
  }
  const Tensor* bias = ctx.Input("Bias");
  const Tensor* sw = ctx.Input("SampleWeight");
  T* logits = ctx.Output("SampleLogits")->mutable_data<T>(DDim{n, cols});
  T* cost = ctx.Output("Cost")->mutable_data<T>(DDim{n, 1});
  const T* xp = x->data<T>();
  const T* wp = w->data<T>();
  for (int64_t i = 0; i < n; ++i) {
    cost[i] = T(0);
    const T weight = sw == nullptr ? T(1) : sw->data<T>()[i];
    for (int64_t j = 0; j < cols; ++j) {
      const int64_t c = labels[i * cols + j];
      T z = bias == nullptr ? T(0) : bias->data<T>()[c];
      for (int64_t k = 0; k < d; ++k) z += xp[i * d + k] * wp[c * d + k];
      const T o = T(1) / (T(1) + std::exp(-z));
      logits[i * cols + j] = o;
      const T b = static_cast<T>(static_cast<float>(sampler->Probability(c)) * static_cast<float>(negs));
      cost[i] += weight * (j < num_true ? -std::log(o / (o + b)) : -std::log(b / (o + b)));
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status NceGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "Input"));
  OAR_ASSIGN_OR_RETURN(const Tensor* w, RequireInput(ctx, "Weight"));
  OAR_ASSIGN_OR_RETURN(const Tensor* out, RequireInput(ctx, "SampleLogits"));
  OAR_ASSIGN_OR_RETURN(const Tensor* labels_t, RequireInput(ctx, "SampleLabels"));
  OAR_ASSIGN_OR_RETURN(const Tensor* dcost, RequireInput(ctx, GradVarName("Cost")));
  const Tensor* label = ctx.Input("Label");
  const int64_t num_true = label == nullptr ? 1 : (label->dims().size() == 2 ? label->dims()[1] : 1);
  const int64_t n = labels_t->dims()[0], cols = labels_t->dims()[1], d = w->dims()[1];
  const int64_t classes = w->dims()[0];
  const auto custom = ctx.Attr<std::vector<int32_t>>("custom_neg_classes");
  const int64_t negs = custom.empty() ? ctx.Attr<int32_t>("num_neg_samples") : static_cast<int64_t>(custom.size());
  OAR_ASSIGN_OR_RETURN(std::unique_ptr<Sampler> sampler, MakeSampler(ctx));
  const Tensor* sw = ctx.Input("SampleWeight");
  const int64_t* labels = labels_t->data<int64_t>();
  std::vector<T> g(static_cast<size_t>(n * cols));
  for (int64_t k = 0; k < n * cols; ++k) {
    const int64_t i = k / cols;
    const T b = static_cast<T>(static_cast<float>(sampler->Probability(labels[k])) * static_cast<float>(negs));
    const T o = out->data<T>()[k];
    const T weight = sw == nullptr ? T(1) : sw->data<T>()[i];
    g[k] = (k % cols < num_true ? weight * (b / (o + b)) * (o - T(1)) : weight * (o * (T(1) - o) / (o + b))) *
           dcost->data<T>()[i];
  }
  if (Tensor* db = ctx.Output(GradVarName("Bias"))) {
    const Tensor* bias = ctx.Input("Bias");
    T* p = db->mutable_data<T>(bias != nullptr ? bias->dims() : DDim{classes});
    std::fill(p, p + db->numel(), T(0));
    for (int64_t k = 0; k < n * cols; ++k) p[labels[k]] += g[k];
  }
  const T* xp = x->data<T>();
  if (Variable* dw_var = ctx.OutputVar(GradVarName("Weight"))) {
    if (ctx.Attr<bool>("is_sparse")) {
      const std::set<int64_t> sorted(labels, labels + n * cols);
      SelectedRows* sr = dw_var->GetMutable<SelectedRows>();
      sr->rows.assign(sorted.begin(), sorted.end());
      sr->height = classes;
      std::map<int64_t, int64_t> at;
      for (size_t r = 0; r < sr->rows.size(); ++r) at[sr->rows[r]] = static_cast<int64_t>(r);
      T* v = sr->value.mutable_data<T>(DDim{static_cast<int64_t>(sr->rows.size()), d});
      std::fill(v, v + sr->value.numel(), T(0));
      for (int64_t k = 0; k < n * cols; ++k) {
        T* row = v + at[labels[k]] * d;
        for (int64_t e = 0; e < d; ++e) row[e] += xp[(k / cols) * d + e] * g[k];
      }
    } else {
      T* dw = ctx.Output(GradVarName("Weight"))->mutable_data<T>(w->dims());
      std::fill(dw, dw + w->numel(), T(0));
      for (int64_t k = 0; k < n * cols; ++k) {
        for (int64_t e = 0; e < d; ++e) dw[labels[k] * d + e] += xp[(k / cols) * d + e] * g[k];
      }
    }
  }
  if (Tensor* dx_t = ctx.Output(GradVarName("Input"))) {
    T* dx = dx_t->mutable_data<T>(x->dims());
    std::fill(dx, dx + x->numel(), T(0));
    const T* wp = w->data<T>();
    for (int64_t k = 0; k < n * cols; ++k) {
      for (int64_t e = 0; e < d; ++e) dx[(k / cols) * d + e] += wp[labels[k] * d + e] * g[k];
    }
  }
  return absl::OkStatus();
}

void GradVarType(const OpDesc& op, BlockDesc* block) { SetSparseGradType(op, block, GradVarName("Weight")); }

}  // namespace

void RegisterNceOp(OpRegistry* r) {
  auto common = [](OpInfo& i) -> OpInfo& {
    return i.Input("Input")
        .Input("Label")
        .Input("Weight")
        .Input("Bias", kDispensable)
        .Input("SampleWeight", kDispensable)
        .Input("CustomDistProbs", kDispensable)
        .Input("CustomDistAlias", kDispensable)
        .Input("CustomDistAliasProbs", kDispensable)
        .Attr("num_total_classes", int32_t{2})
        .Attr("num_neg_samples", int32_t{10})
        .Attr("sampler", int32_t{0})
        .Attr("seed", int32_t{0})
        .Attr("is_sparse", false)
        .Attr("is_test", false)
        .Attr("custom_neg_classes", std::vector<int32_t>{})
        .Attr("remote_prefetch", false)
        .Attr("trainer_id", int32_t{0})
        .Attr("height_sections", std::vector<int64_t>{})
        .Attr("epmap", std::vector<std::string>{})
        .Attr("table_names", std::vector<std::string>{})
        .SetInferShape(NoShapeInference);
  };
  common(r->Register("nce"))
      .Output("Cost")
      .Output("SampleLogits")
      .Output("SampleLabels")
      .SetGradMaker(GradOpMaker({"Input", "Label", "Weight", "Bias", "SampleWeight", "CustomDistProbs",
                                 "CustomDistAlias", "CustomDistAliasProbs"},
                                {"SampleLogits", "SampleLabels"}, {"Cost"}, {"Input", "Weight", "Bias"}))
      .Kernel<float>(NceKernel<float>)
      .Kernel<double>(NceKernel<double>);
  common(r->Register("nce_grad").NotInPlace())
      .Input("SampleLogits")
      .Input("SampleLabels")
      .Input(GradVarName("Cost"))
      .Output(GradVarName("Input"), kDispensable)
      .Output(GradVarName("Weight"), kDispensable)
      .Output(GradVarName("Bias"), kDispensable)
      .SetInferVarType(GradVarType)
      .Kernel<float>(NceGradKernel<float>)
      .Kernel<double>(NceGradKernel<double>);
}

}  // namespace oar
