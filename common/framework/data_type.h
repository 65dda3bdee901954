// Element types of tensors. The values are Fluid's VarType.Type numbers, so a
// DataType converts to and from the proto enum by a cast.
//
// Thread-safety: stateless.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "proto/framework.pb.h"

namespace oar {

enum class DataType : int {
  kBool = paddle::framework::proto::VarType::BOOL,
  kInt16 = paddle::framework::proto::VarType::INT16,
  kInt32 = paddle::framework::proto::VarType::INT32,
  kInt64 = paddle::framework::proto::VarType::INT64,
  kFloat16 = paddle::framework::proto::VarType::FP16,
  kFloat32 = paddle::framework::proto::VarType::FP32,
  kFloat64 = paddle::framework::proto::VarType::FP64,
  kUInt8 = paddle::framework::proto::VarType::UINT8,
  kInt8 = paddle::framework::proto::VarType::INT8,
};

// Bytes per element; 0 for a value that is not an element type.
size_t SizeOf(DataType t);
// Fluid's spelling: "float32", "int64", ...
std::string DataTypeName(DataType t);
// Parses Fluid's spelling; InvalidArgument for anything else.
absl::StatusOr<DataType> ParseDataType(absl::string_view name);
// True for a proto VarType.Type value that names an element type.
bool IsElementType(int proto_type);
bool IsFloating(DataType t);

template <typename T>
struct DataTypeOf;
template <>
struct DataTypeOf<float> {
  static constexpr DataType value = DataType::kFloat32;
};
template <>
struct DataTypeOf<double> {
  static constexpr DataType value = DataType::kFloat64;
};
template <>
struct DataTypeOf<int32_t> {
  static constexpr DataType value = DataType::kInt32;
};
template <>
struct DataTypeOf<int64_t> {
  static constexpr DataType value = DataType::kInt64;
};
template <>
struct DataTypeOf<bool> {
  static constexpr DataType value = DataType::kBool;
};
template <>
struct DataTypeOf<uint8_t> {
  static constexpr DataType value = DataType::kUInt8;
};
template <>
struct DataTypeOf<int8_t> {
  static constexpr DataType value = DataType::kInt8;
};
template <>
struct DataTypeOf<int16_t> {
  static constexpr DataType value = DataType::kInt16;
};

}  // namespace oar
