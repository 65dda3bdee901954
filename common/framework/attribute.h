// Attribute: the value of one op attribute. The variant's alternative index is
// the AttrType number (Fluid's INT=0 ... LONGS=11, then Paddle 2.x's
// FLOAT64S=12 ... SCALARS=17), so conversion to and from OpDesc.Attr is a
// switch on the index.
//
// Thread-safety: a value type.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/framework.pb.h"

namespace oar {

// A sub-block reference (AttrType BLOCK) and a list of them (BLOCKS).
struct BlockRef {
  int32_t idx = 0;
  friend bool operator==(const BlockRef& a, const BlockRef& b) { return a.idx == b.idx; }
};
struct BlockRefs {
  std::vector<int32_t> idx;
  friend bool operator==(const BlockRefs& a, const BlockRefs& b) { return a.idx == b.idx; }
};

// Paddle 2.x: an attribute naming a variable (VAR) or several (VARS).
struct VarRef {
  std::string name;
  friend bool operator==(const VarRef& a, const VarRef& b) { return a.name == b.name; }
};
struct VarRefs {
  std::vector<std::string> names;
  friend bool operator==(const VarRefs& a, const VarRefs& b) { return a.names == b.names; }
};
// Paddle 2.x's typed scalar (SCALAR) and a list of them (SCALARS); `value`
// holds a bool, an integer or a real as a double (a complex one keeps its
// real part and is_complex).
struct ScalarValue {
  int32_t type = 3;  // Scalar.Type: BOOLEAN 1, LONG 2, FLOAT64 3, COMPLEX128 4
  double value = 0;
  bool is_complex = false;
  friend bool operator==(const ScalarValue& a, const ScalarValue& b) {
    return a.type == b.type && a.value == b.value && a.is_complex == b.is_complex;
  }
};
struct ScalarValues {
  std::vector<ScalarValue> values;
  friend bool operator==(const ScalarValues& a, const ScalarValues& b) { return a.values == b.values; }
};

using Attribute =
    std::variant<int32_t, float, std::string, std::vector<int32_t>, std::vector<float>, std::vector<std::string>, bool,
                 std::vector<bool>, BlockRef, int64_t, BlockRefs, std::vector<int64_t>, std::vector<double>, VarRef,
                 VarRefs, double, ScalarValue, ScalarValues>;

// Fills `out` (name and type included) from `value`.
void AttributeToProto(const std::string& name, const Attribute& value, paddle::framework::proto::OpDesc::Attr* out);
// Reads a proto attribute; InvalidArgument for an unknown type.
absl::StatusOr<Attribute> AttributeFromProto(const paddle::framework::proto::OpDesc::Attr& attr);
// Human-readable value: 1, 0.5, "relu", [1, 2], block[1].
std::string AttributeToString(const Attribute& value);
// Fluid's AttrType name: "INT", "FLOATS", ...
std::string AttrTypeName(size_t index);

// Converts between numeric kinds (INT, LONG, FLOAT, BOOLEAN) when `value`'s
// kind differs from `want_index`; returns false where no sensible conversion
// exists. Used to accept, say, an int64 where an int32 attribute is declared.
bool CoerceAttribute(size_t want_index, Attribute* value);

}  // namespace oar
