#include "common/framework/attribute.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace oar {

namespace proto = paddle::framework::proto;

namespace {

void ScalarToProto(const ScalarValue& v, proto::Scalar* out) {
  out->set_type(static_cast<proto::Scalar::Type>(v.type));
  switch (v.type) {
    case proto::Scalar::BOOLEAN:
      out->set_b(v.value != 0);
      break;
    case proto::Scalar::LONG:
      out->set_i(static_cast<int64_t>(v.value));
      break;
    case proto::Scalar::COMPLEX128:
      out->mutable_c()->set_r(v.value);
      out->mutable_c()->set_i(0);
      break;
    default:
      out->set_r(v.value);
      break;
  }
}

ScalarValue ScalarFromProto(const proto::Scalar& s) {
  switch (s.type()) {
    case proto::Scalar::BOOLEAN:
      return {s.type(), s.b() ? 1.0 : 0.0, false};
    case proto::Scalar::LONG:
      return {s.type(), static_cast<double>(s.i()), false};
    case proto::Scalar::COMPLEX128:
      return {s.type(), s.c().r(), true};
    default:
      return {s.type(), s.r(), false};
  }
}

}  // namespace

void AttributeToProto(const std::string& name, const Attribute& value, proto::OpDesc::Attr* out) {
  out->Clear();
  out->set_name(name);
  out->set_type(static_cast<proto::AttrType>(value.index()));
  switch (value.index()) {
    case proto::INT:
      out->set_i(std::get<int32_t>(value));
      break;
    case proto::FLOAT:
      out->set_f(std::get<float>(value));
      break;
    case proto::STRING:
      out->set_s(std::get<std::string>(value));
      break;
    case proto::INTS:
      for (int32_t v : std::get<std::vector<int32_t>>(value)) out->add_ints(v);
      break;
    case proto::FLOATS:
      for (float v : std::get<std::vector<float>>(value)) out->add_floats(v);
      break;
    case proto::STRINGS:
      for (const auto& v : std::get<std::vector<std::string>>(value)) out->add_strings(v);
      break;
    case proto::BOOLEAN:
      out->set_b(std::get<bool>(value));
      break;
    case proto::BOOLEANS:
      for (bool v : std::get<std::vector<bool>>(value)) out->add_bools(v);
      break;
    case proto::BLOCK:
      out->set_block_idx(std::get<BlockRef>(value).idx);
      break;
    case proto::LONG:
      out->set_l(std::get<int64_t>(value));
      break;
    case proto::BLOCKS:
      for (int32_t v : std::get<BlockRefs>(value).idx) out->add_blocks_idx(v);
      break;
    case proto::LONGS:
      for (int64_t v : std::get<std::vector<int64_t>>(value)) out->add_longs(v);
      break;
    case proto::FLOAT64S:
      for (double v : std::get<std::vector<double>>(value)) out->add_float64s(v);
      break;
    case proto::VAR:
      out->set_var_name(std::get<VarRef>(value).name);
      break;
    case proto::VARS:
      for (const auto& v : std::get<VarRefs>(value).names) out->add_vars_name(v);
      break;
    case proto::FLOAT64:
      out->set_float64(std::get<double>(value));
      break;
    case proto::SCALAR:
      ScalarToProto(std::get<ScalarValue>(value), out->mutable_scalar());
      break;
    case proto::SCALARS:
      for (const ScalarValue& v : std::get<ScalarValues>(value).values) ScalarToProto(v, out->add_scalars());
      break;
  }
}

absl::StatusOr<Attribute> AttributeFromProto(const proto::OpDesc::Attr& a) {
  switch (a.type()) {
    case proto::INT:
      return Attribute(a.i());
    case proto::FLOAT:
      return Attribute(a.f());
    case proto::STRING:
      return Attribute(a.s());
    case proto::INTS:
      return Attribute(std::vector<int32_t>(a.ints().begin(), a.ints().end()));
    case proto::FLOATS:
      return Attribute(std::vector<float>(a.floats().begin(), a.floats().end()));
    case proto::STRINGS:
      return Attribute(std::vector<std::string>(a.strings().begin(), a.strings().end()));
    case proto::BOOLEAN:
      return Attribute(a.b());
    case proto::BOOLEANS:
      return Attribute(std::vector<bool>(a.bools().begin(), a.bools().end()));
    case proto::BLOCK:
      return Attribute(BlockRef{a.block_idx()});
    case proto::LONG:
      return Attribute(a.l());
    case proto::BLOCKS:
      return Attribute(BlockRefs{{a.blocks_idx().begin(), a.blocks_idx().end()}});
    case proto::LONGS:
      return Attribute(std::vector<int64_t>(a.longs().begin(), a.longs().end()));
    case proto::FLOAT64S:
      return Attribute(std::vector<double>(a.float64s().begin(), a.float64s().end()));
    case proto::VAR:
      return Attribute(VarRef{a.var_name()});
    case proto::VARS:
      return Attribute(VarRefs{{a.vars_name().begin(), a.vars_name().end()}});
    case proto::FLOAT64:
      return Attribute(a.float64());
    case proto::SCALAR:
      return Attribute(ScalarFromProto(a.scalar()));
    case proto::SCALARS: {
      ScalarValues v;
      for (const proto::Scalar& s : a.scalars()) v.values.push_back(ScalarFromProto(s));
      return Attribute(v);
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("attribute '", a.name(), "' has unknown type ", a.type()));
}

std::string AttrTypeName(size_t index) {
  static const char* kNames[] = {"INT",      "FLOAT",    "STRING", "INTS",    "FLOATS", "STRINGS",
                                 "BOOLEAN",  "BOOLEANS", "BLOCK",  "LONG",    "BLOCKS", "LONGS",
                                 "FLOAT64S", "VAR",      "VARS",   "FLOAT64", "SCALAR", "SCALARS"};
  return index < 18 ? kNames[index] : "UNKNOWN";
}

namespace {
struct Printer {
  std::string operator()(int32_t v) const { return absl::StrCat(v); }
  std::string operator()(float v) const { return absl::StrCat(v); }
  std::string operator()(const std::string& v) const { return absl::StrCat("\"", v, "\""); }
  std::string operator()(bool v) const { return v ? "true" : "false"; }
  std::string operator()(int64_t v) const { return absl::StrCat(v); }
  std::string operator()(const BlockRef& v) const { return absl::StrCat("block[", v.idx, "]"); }
  std::string operator()(const BlockRefs& v) const { return absl::StrCat("blocks[", absl::StrJoin(v.idx, ", "), "]"); }
  std::string operator()(const std::vector<std::string>& v) const {
    if (v.empty()) return "[]";
    return absl::StrCat("[\"", absl::StrJoin(v, "\", \""), "\"]");
  }
  std::string operator()(const std::vector<bool>& v) const {
    std::vector<std::string> s;
    for (bool b : v) s.push_back(b ? "true" : "false");
    return absl::StrCat("[", absl::StrJoin(s, ", "), "]");
  }
  std::string operator()(double v) const { return absl::StrCat(v); }
  std::string operator()(const VarRef& v) const { return absl::StrCat("var '", v.name, "'"); }
  std::string operator()(const VarRefs& v) const {
    return absl::StrCat("vars ['", absl::StrJoin(v.names, "', '"), "']");
  }
  std::string operator()(const ScalarValue& v) const { return absl::StrCat(v.value, v.is_complex ? "+?j" : ""); }
  std::string operator()(const ScalarValues& v) const {
    std::vector<std::string> s;
    for (const ScalarValue& e : v.values) s.push_back((*this)(e));
    return absl::StrCat("[", absl::StrJoin(s, ", "), "]");
  }
  template <typename T>
  std::string operator()(const std::vector<T>& v) const {
    return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
  }
};

// The value of a numeric attribute as double; false for non-numeric kinds.
bool NumericValue(const Attribute& a, double* out) {
  switch (a.index()) {
    case proto::INT:
      *out = std::get<int32_t>(a);
      return true;
    case proto::FLOAT:
      *out = std::get<float>(a);
      return true;
    case proto::LONG:
      *out = static_cast<double>(std::get<int64_t>(a));
      return true;
    case proto::BOOLEAN:
      *out = std::get<bool>(a);
      return true;
    case proto::FLOAT64:
      *out = std::get<double>(a);
      return true;
    case proto::SCALAR:
      if (std::get<ScalarValue>(a).is_complex) return false;
      *out = std::get<ScalarValue>(a).value;
      return true;
  }
  return false;
}
}  // namespace

std::string AttributeToString(const Attribute& value) { return std::visit(Printer{}, value); }

bool CoerceAttribute(size_t want, Attribute* value) {
  if (value->index() == want) return true;
  double v;
  if (NumericValue(*value, &v)) {
    switch (want) {
      case proto::INT:
        *value = static_cast<int32_t>(v);
        return true;
      case proto::FLOAT:
        *value = static_cast<float>(v);
        return true;
      case proto::LONG:
        *value = static_cast<int64_t>(v);
        return true;
      case proto::BOOLEAN:
        *value = v != 0;
        return true;
      case proto::FLOAT64:
        *value = v;
        return true;
    }
    return false;
  }
  if (want == proto::LONGS && value->index() == proto::INTS) {
    const auto& in = std::get<std::vector<int32_t>>(*value);
    *value = std::vector<int64_t>(in.begin(), in.end());
    return true;
  }
  if (want == proto::FLOATS && value->index() == proto::FLOAT64S) {
    const auto& in = std::get<std::vector<double>>(*value);
    *value = std::vector<float>(in.begin(), in.end());
    return true;
  }
  if (want == proto::INTS && value->index() == proto::LONGS) {
    const auto& in = std::get<std::vector<int64_t>>(*value);
    *value = std::vector<int32_t>(in.begin(), in.end());
    return true;
  }
  return false;
}

}  // namespace oar
