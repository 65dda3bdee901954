#include "common/data/fashion_mnist.h"

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/data/idx_file.h"

namespace oar {

absl::StatusOr<Dataset> LoadFashionMnist(const std::string& dir, const std::string& split) {
  if (split != "train" && split != "t10k") {
    return absl::InvalidArgumentError(absl::StrCat("unknown split '", split, "' (use train or t10k)"));
  }
  auto read = [&](const std::string& kind) -> absl::StatusOr<IdxArray> {
    std::string path = absl::StrCat(dir, "/", split, "-", kind, "-idx", kind == "images" ? 3 : 1, "-ubyte.gz");
    auto a = ReadIdxFile(path);
    if (absl::IsNotFound(a.status())) {
      return absl::NotFoundError(absl::StrCat(a.status().message(),
                                              " (install the Debian package dataset-fashion-mnist,"
                                              " or pass --data_dir)"));
    }
    return a;
  };
  OAR_ASSIGN_OR_RETURN(IdxArray images, read("images"));
  OAR_ASSIGN_OR_RETURN(IdxArray labels, read("labels"));
  if (images.dims.size() != 3 || labels.dims.size() != 1 || images.dims[0] != labels.dims[0]) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": ", split, " images and labels disagree (expected [N, rows, cols] images and [N] labels)"));
  }
  const int64_t n = images.dims[0], pixels = images.dims[1] * images.dims[2];
  Dataset ds;
  float* img = ds.images.mutable_data<float>(DDim{n, pixels});
  for (int64_t i = 0; i < n * pixels; ++i) img[i] = images.data[i] / 255.0f;
  int64_t* lab = ds.labels.mutable_data<int64_t>(DDim{n, 1});
  for (int64_t i = 0; i < n; ++i) {
    if (labels.data[i] > 9) {
      return absl::InvalidArgumentError(
          absl::StrCat(dir, ": ", split, " label ", int{labels.data[i]}, " at index ", i, " is not a class in [0, 9]"));
    }
    lab[i] = labels.data[i];
  }
  return ds;
}

}  // namespace oar
