#include "cli/model_build.h"

#include "absl/strings/str_cat.h"
#include "common/api/optimizer.h"
#include "common/api/unique_name.h"

namespace oar::cli {

absl::StatusOr<std::unique_ptr<ModelPrograms>> BuildModel(const BuildOptions& o) {
  const ModelSpec* spec = FindModel(o.model);
  if (spec == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown model '", o.model, "' (available: ", ModelNames(), ")"));
  }
  std::unique_ptr<optimizer::Optimizer> opt;
  if (o.optimizer == "sgd") {
    opt = std::make_unique<optimizer::SGD>(o.learning_rate);
  } else if (o.optimizer == "momentum") {
    opt = std::make_unique<optimizer::Momentum>(o.learning_rate, 0.9f);
  } else if (o.optimizer == "adam") {
    opt = std::make_unique<optimizer::Adam>(o.learning_rate);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown optimizer '", o.optimizer, "' (use sgd, momentum or adam)"));
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
  return p;
}

}  // namespace oar::cli
