#include "cli/model_build.h"

#include "absl/strings/str_cat.h"
#include "common/api/optimizer.h"
#include "common/api/unique_name.h"
#include "common/base/status.h"
#include "common/data/batcher.h"

namespace oar::cli {

// Gives a [batch, 784] image tensor the shape the model's feed declares
// (e.g. [batch, 1, 28, 28]) without copying.
void ShapeLikeFeed(const Var& feed, Tensor* t) {
  std::vector<int64_t> shape = feed.shape();
  if (shape.empty()) return;
  shape[0] = t->dims()[0];
  DDim d(shape);
  if (d.numel() == t->numel()) t->Resize(d);
}

absl::StatusOr<EvalResult> Evaluate(Executor& exe, const ModelPrograms& p, Scope* scope, const Dataset& test,
                                    int64_t batch_size) {
  Batcher batches(test, batch_size, /*shuffle=*/false);
  batches.Reset();
  Tensor x, y;
  EvalResult r;
  int64_t seen = 0;
  while (batches.Next(&x, &y)) {
    ShapeLikeFeed(p.vars.feeds[0], &x);
    OAR_ASSIGN_OR_RETURN(auto out,
                         exe.Run(p.test.desc(), scope, {{p.vars.feeds[0].name(), x}, {p.vars.feeds[1].name(), y}},
                                 {p.vars.loss.name(), p.vars.accuracy.name()}));
    const int64_t n = x.dims()[0];
    r.loss += out[0].data<float>()[0] * n;
    r.accuracy += out[1].data<float>()[0] * n;
    seen += n;
  }
  if (seen > 0) {
    r.loss /= seen;
    r.accuracy /= seen;
  }
  return r;
}

namespace {

// Random initializers → fill_constant(value), same shape and dtype.
void MakeInitializersConstant(BlockDesc* startup, float value) {
  for (size_t i = 0; i < startup->OpSize(); ++i) {
    OpDesc* op = startup->MutableOp(i);
    if (op->type != "uniform_random" && op->type != "gaussian_random" && op->type != "truncated_gaussian_random") {
      continue;
    }
    OpDesc c;
    c.type = "fill_constant";
    c.outputs = op->outputs;
    for (const char* keep : {"shape", "dtype", kOpRoleAttr}) {
      if (op->HasAttr(keep)) c.attrs[keep] = op->attrs[keep];
    }
    c.SetAttr("value", value);
    *op = c;
  }
}

}  // namespace

absl::Status RequireFashionMnistModel(const std::string& model) {
  const ModelSpec* spec = FindModel(model);
  if (spec == nullptr || spec->dataset == "fashion-mnist") return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("model ", model,
                                                 " trains from MultiSlot files, not Fashion-MNIST: use "
                                                 "oar async-train --model ",
                                                 model, " (data from oar gen-ctr-data)"));
}

absl::StatusOr<std::unique_ptr<ModelPrograms>> BuildModel(const BuildOptions& o) {
  const ModelSpec* spec = FindModel(o.model);
  if (spec == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown model '", o.model, "' (available: ", ModelNames(), ")"));
  }
  std::unique_ptr<optimizer::Optimizer> opt;
  if (o.optimizer == "sgd") {
    opt = std::make_unique<optimizer::SGD>(o.learning_rate);
  } else if (o.optimizer == "momentum") {
    opt = std::make_unique<optimizer::Momentum>(o.learning_rate, 0.9f);
  } else if (o.optimizer == "adam") {
    opt = std::make_unique<optimizer::Adam>(o.learning_rate);
  } else if (o.optimizer == "lazy_adam") {  // Fluid's Adam(lazy_mode=True): sparse rows only
    opt = std::make_unique<optimizer::Adam>(o.learning_rate, 0.9f, 0.999f, 1e-8f, /*lazy_mode=*/true);
  } else if (o.optimizer == "adagrad") {
    opt = std::make_unique<optimizer::Adagrad>(o.learning_rate);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown optimizer '", o.optimizer, "' (use sgd, momentum, adam, lazy_adam or adagrad)"));
  }
  if (!(o.learning_rate > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("learning rate must be positive, got ", o.learning_rate));
  }
  auto p = std::make_unique<ModelPrograms>();
  UniqueNameGuard names;
  p->main.set_random_seed(o.seed);
  p->startup.set_random_seed(o.seed);
  {
    ProgramGuard guard(&p->main, &p->startup);
    p->vars = spec->build();
    p->test = p->main.clone(/*for_test=*/true);
    if (spec->learning_rate) {
      const int64_t steps = (spec->train_examples + o.batch_size - 1) / std::max<int64_t>(1, o.batch_size);
      opt->set_learning_rate(spec->learning_rate(o.learning_rate, steps));
    }
    opt->minimize(p->vars.loss);
  }
  if (!p->main.status().ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model ", o.model, " failed to build: ", p->main.status().message()));
  }
  if (o.constant_init) MakeInitializersConstant(p->startup.global_block(), *o.constant_init);
  return p;
}

}  // namespace oar::cli
