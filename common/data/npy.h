// NumPy's array files as Tensors: `.npy` (np.save; format versions 1.0,
// 2.0 and 3.0) and `.npz` (np.savez, stored or deflated, through libzip).
// Little-endian and one-byte element types Oar has a DataType for: float16,
// float32, float64, int8, int16, int32, int64, uint8, bool. A Fortran-order
// array is reordered to C order. Errors name the file (and the member of an
// .npz) and what is wrong: not an .npy, a big-endian or unsupported dtype
// ("<u4"), a header that does not parse, data shorter or longer than the
// header's shape says.
//
//   OAR_ASSIGN_OR_RETURN(Tensor x, ReadNpy("data/x.npy"));
//   OAR_ASSIGN_OR_RETURN(auto arrays, ReadNpz("data.npz"));  // "x" → Tensor
//   OAR_RETURN_IF_ERROR(WriteNpy("out/x.npy", x));
//
// Thread-safety: stateless functions.
#pragma once

#include <map>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "common/framework/tensor.h"

namespace oar {

// Parses an .npy file's bytes; `what` names it in errors.
absl::StatusOr<Tensor> ParseNpy(absl::string_view bytes, const std::string& what);

absl::StatusOr<Tensor> ReadNpy(const std::string& path);

// Every `<name>.npy` member of an .npz, by name (without ".npy").
absl::StatusOr<std::map<std::string, Tensor>> ReadNpz(const std::string& path);

// Writes `t` as numpy.save would (format 1.0, C order, little-endian).
absl::Status WriteNpy(const std::string& path, const Tensor& t);

}  // namespace oar
