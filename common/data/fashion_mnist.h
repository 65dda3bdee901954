// Fashion-MNIST (and MNIST, same layout) from the IDX files of the Debian
// package dataset-fashion-mnist: images as float32 [N, 784] scaled to [0, 1]
// (pixel / 255; Fluid's reader used [-1, 1], which trains this MLP about half
// a point worse in two epochs), labels as int64 [N, 1].
//
//   OAR_ASSIGN_OR_RETURN(Dataset train, LoadFashionMnist(kFashionMnistDir, "train"));
//
// Thread-safety: stateless.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "common/framework/tensor.h"

namespace oar {

inline constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

struct Dataset {
  Tensor images;  // float32 [N, 784]
  Tensor labels;  // int64 [N, 1]
  int64_t size() const { return images.dims().size() ? images.dims()[0] : 0; }
};

// Loads split "train" or "t10k" from `dir`. Errors name the missing or
// malformed file and how to get it.
absl::StatusOr<Dataset> LoadFashionMnist(const std::string& dir, const std::string& split);

}  // namespace oar
