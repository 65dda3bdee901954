// Attribute: the value of one op attribute. The variant's alternative index is
// Fluid's AttrType number (INT=0 ... LONGS=11), so conversion to and from
// OpDesc.Attr is a switch on the index.
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

using Attribute =
    std::variant<int32_t, float, std::string, std::vector<int32_t>,
                 std::vector<float>, std::vector<std::string>, bool,
                 std::vector<bool>, BlockRef, int64_t, BlockRefs,
                 std::vector<int64_t>>;

// Fills `out` (name and type included) from `value`.
void AttributeToProto(const std::string& name, const Attribute& value,
                      paddle::framework::proto::OpDesc::Attr* out);
// Reads a proto attribute; InvalidArgument for an unknown type.
absl::StatusOr<Attribute> AttributeFromProto(
    const paddle::framework::proto::OpDesc::Attr& attr);
// Human-readable value: 1, 0.5, "relu", [1, 2], block[1].
std::string AttributeToString(const Attribute& value);
// Fluid's AttrType name: "INT", "FLOATS", ...
std::string AttrTypeName(size_t index);

// Converts between numeric kinds (INT, LONG, FLOAT, BOOLEAN) when `value`'s
// kind differs from `want_index`; returns false where no sensible conversion
// exists. Used to accept, say, an int64 where an int32 attribute is declared.
bool CoerceAttribute(size_t want_index, Attribute* value);

}  // namespace oar
