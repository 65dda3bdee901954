#include "examples/model_zoo.h"

#include "absl/strings/str_join.h"

namespace oar {

const std::vector<ModelSpec>& AllModels() {
  static const auto* models =
      new std::vector<ModelSpec>{FashionMlpSpec(), FashionCnnSpec(), CtrDnnSpec(false), CtrDnnSpec(true)};
  return *models;
}

const ModelSpec* FindModel(const std::string& name) {
  for (const auto& m : AllModels()) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

std::string ModelNames() {
  std::vector<std::string> names;
  for (const auto& m : AllModels()) names.push_back(m.name);
  return absl::StrJoin(names, ", ");
}

}  // namespace oar
