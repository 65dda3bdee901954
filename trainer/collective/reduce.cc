#include "trainer/collective/reduce.h"

#include <Eigen/Core>

#include "absl/strings/str_cat.h"

namespace oar {
namespace {

template <typename T>
void Add(void* dst, const void* src, size_t n) {
  T* d = static_cast<T*>(dst);
  const T* s = static_cast<const T*>(src);
  for (size_t i = 0; i < n; ++i) d[i] += s[i];
}

template <typename T>
void AddOf(void* dst, const void* a, const void* b, size_t n) {
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) d[i] = x[i] + y[i];
}

absl::Status NotSummable(DataType t) {
  return absl::InvalidArgumentError(
      absl::StrCat("cannot sum ", DataTypeName(t), " tensors (float32, float64, float16, int32 and int64 add)"));
}

}  // namespace

bool Summable(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat64 || t == DataType::kFloat16 || t == DataType::kInt32 ||
         t == DataType::kInt64;
}

absl::Status SumInto(DataType t, void* dst, const void* src, size_t n) {
  switch (t) {
    case DataType::kFloat32:
      Add<float>(dst, src, n);
      return absl::OkStatus();
    case DataType::kFloat64:
      Add<double>(dst, src, n);
      return absl::OkStatus();
    case DataType::kFloat16:
      Add<Eigen::half>(dst, src, n);
      return absl::OkStatus();
    case DataType::kInt32:
      Add<int32_t>(dst, src, n);
      return absl::OkStatus();
    case DataType::kInt64:
      Add<int64_t>(dst, src, n);
      return absl::OkStatus();
    default:
      return NotSummable(t);
  }
}

absl::Status SumOf(DataType t, void* dst, const void* a, const void* b, size_t n) {
  switch (t) {
    case DataType::kFloat32:
      AddOf<float>(dst, a, b, n);
      return absl::OkStatus();
    case DataType::kFloat64:
      AddOf<double>(dst, a, b, n);
      return absl::OkStatus();
    case DataType::kFloat16:
      AddOf<Eigen::half>(dst, a, b, n);
      return absl::OkStatus();
    case DataType::kInt32:
      AddOf<int32_t>(dst, a, b, n);
      return absl::OkStatus();
    case DataType::kInt64:
      AddOf<int64_t>(dst, a, b, n);
      return absl::OkStatus();
    default:
      return NotSummable(t);
  }
}

}  // namespace oar
