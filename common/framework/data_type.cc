#include "common/framework/data_type.h"

#include "absl/strings/str_cat.h"

namespace oar {

size_t SizeOf(DataType t) {
  switch (t) {
    case DataType::kBool:
    case DataType::kUInt8:
    case DataType::kInt8:
      return 1;
    case DataType::kInt16:
    case DataType::kFloat16:
      return 2;
    case DataType::kInt32:
    case DataType::kFloat32:
      return 4;
    case DataType::kInt64:
    case DataType::kFloat64:
      return 8;
  }
  return 0;
}

std::string DataTypeName(DataType t) {
  switch (t) {
    case DataType::kBool:
      return "bool";
    case DataType::kInt16:
      return "int16";
    case DataType::kInt32:
      return "int32";
    case DataType::kInt64:
      return "int64";
    case DataType::kFloat16:
      return "float16";
    case DataType::kFloat32:
      return "float32";
    case DataType::kFloat64:
      return "float64";
    case DataType::kUInt8:
      return "uint8";
    case DataType::kInt8:
      return "int8";
  }
  return absl::StrCat("dtype(", static_cast<int>(t), ")");
}

absl::StatusOr<DataType> ParseDataType(absl::string_view name) {
  for (DataType t : {DataType::kBool, DataType::kInt16, DataType::kInt32, DataType::kInt64, DataType::kFloat16,
                     DataType::kFloat32, DataType::kFloat64, DataType::kUInt8, DataType::kInt8}) {
    if (DataTypeName(t) == name) return t;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown data type '", name, "'"));
}

bool IsElementType(int v) { return (v >= 0 && v <= 6) || v == 20 || v == 21; }

bool IsFloating(DataType t) { return t == DataType::kFloat16 || t == DataType::kFloat32 || t == DataType::kFloat64; }

}  // namespace oar
