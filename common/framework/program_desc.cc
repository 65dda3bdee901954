#include "common/framework/program_desc.h"

#include <algorithm>
#include <atomic>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status.h"

namespace oar {

namespace proto = paddle::framework::proto;

namespace {

std::atomic<uint64_t> next_program_id{1};

const std::vector<std::string>& EmptyArgs() {
  static const auto* empty = new std::vector<std::string>();
  return *empty;
}

std::vector<std::string> ArgNames(const OpDesc::VarMap& m) {
  std::vector<std::string> out;
  for (const auto& [slot, args] : m) out.insert(out.end(), args.begin(), args.end());
  return out;
}

void Rename(OpDesc::VarMap* m, const std::string& from, const std::string& to) {
  for (auto& [slot, args] : *m) std::replace(args.begin(), args.end(), from, to);
}

std::string VarMapToString(const OpDesc::VarMap& m) {
  std::vector<std::string> parts;
  for (const auto& [slot, args] : m) {
    parts.push_back(absl::StrCat(slot, "=[", absl::StrJoin(args, ", "), "]"));
  }
  return absl::StrJoin(parts, ", ");
}

void VarMapToProto(const OpDesc::VarMap& m, google::protobuf::RepeatedPtrField<proto::OpDesc::Var>* out) {
  for (const auto& [slot, args] : m) {
    proto::OpDesc::Var* v = out->Add();
    v->set_parameter(slot);
    for (const auto& a : args) v->add_arguments(a);
  }
}

void VarToProto(const VarDesc& v, proto::VarDesc* out) {
  out->set_name(v.name);
  out->set_persistable(v.persistable);
  if (v.need_check_feed) out->set_need_check_feed(true);
  proto::VarType* t = out->mutable_type();
  t->set_type(v.type);
  proto::VarType::TensorDesc* td = nullptr;
  switch (v.type) {
    case proto::VarType::LOD_TENSOR:
      td = t->mutable_lod_tensor()->mutable_tensor();
      t->mutable_lod_tensor()->set_lod_level(v.lod_level);
      break;
    case proto::VarType::SELECTED_ROWS:
      td = t->mutable_selected_rows();
      break;
    case proto::VarType::LOD_TENSOR_ARRAY:
      td = t->mutable_tensor_array()->mutable_tensor();
      t->mutable_tensor_array()->set_lod_level(v.lod_level);
      break;
    default:
      break;
  }
  if (td != nullptr) {
    td->set_data_type(static_cast<proto::VarType::Type>(v.dtype));
    for (int64_t d : v.shape) td->add_dims(d);
  }
}

absl::StatusOr<VarDesc> VarFromProto(const proto::VarDesc& in) {
  VarDesc v;
  v.name = in.name();
  v.type = in.type().type();
  v.persistable = in.persistable();
  v.need_check_feed = in.need_check_feed();
  const proto::VarType::TensorDesc* td = nullptr;
  if (v.type == proto::VarType::LOD_TENSOR && in.type().has_lod_tensor()) {
    td = &in.type().lod_tensor().tensor();
    v.lod_level = in.type().lod_tensor().lod_level();
  } else if (v.type == proto::VarType::SELECTED_ROWS && in.type().has_selected_rows()) {
    td = &in.type().selected_rows();
  } else if (v.type == proto::VarType::LOD_TENSOR_ARRAY && in.type().has_tensor_array()) {
    td = &in.type().tensor_array().tensor();
    v.lod_level = in.type().tensor_array().lod_level();
  }
  if (td != nullptr) {
    if (!IsElementType(td->data_type())) {  // bfloat16, complex64/128: Paddle 2.x types Oar has no tensors of
      const std::string type = proto::VarType::Type_IsValid(td->data_type())
                                   ? proto::VarType::Type_Name(td->data_type())
                                   : absl::StrCat(td->data_type());
      return absl::UnimplementedError(
          absl::StrCat("variable '", v.name, "' has data type ", type,
                       ", which Oar does not implement (Oar's tensors are bool, int8/16/32/64, "
                       "uint8, float16/32/64)"));
    }
    v.dtype = static_cast<DataType>(td->data_type());
    v.shape.assign(td->dims().begin(), td->dims().end());
  }
  return v;
}

}  // namespace

// ---- OpDesc ----

const std::vector<std::string>& OpDesc::Input(const std::string& slot) const {
  auto it = inputs.find(slot);
  return it == inputs.end() ? EmptyArgs() : it->second;
}
const std::vector<std::string>& OpDesc::Output(const std::string& slot) const {
  auto it = outputs.find(slot);
  return it == outputs.end() ? EmptyArgs() : it->second;
}
std::vector<std::string> OpDesc::InputArgNames() const { return ArgNames(inputs); }
std::vector<std::string> OpDesc::OutputArgNames() const { return ArgNames(outputs); }
void OpDesc::RenameInput(const std::string& f, const std::string& t) { Rename(&inputs, f, t); }
void OpDesc::RenameOutput(const std::string& f, const std::string& t) { Rename(&outputs, f, t); }

std::string OpDesc::ToString() const {
  std::vector<std::string> a;
  for (const auto& [name, value] : attrs) {
    // Paddle's op_callstack (the Python stack that built the op) would fill
    // screens; its size says it is there.
    const auto* frames = std::get_if<std::vector<std::string>>(&value);
    if (name == "op_callstack" && frames != nullptr) {
      a.push_back(absl::StrCat(name, "=[", frames->size(), " lines]"));
      continue;
    }
    a.push_back(absl::StrCat(name, "=", AttributeToString(value)));
  }
  return absl::StrCat(type, "(", VarMapToString(inputs), ") -> (", VarMapToString(outputs), ") {",
                      absl::StrJoin(a, ", "), "}");
}

void OpDesc::ToProto(proto::OpDesc* out) const {
  out->Clear();
  out->set_type(type);
  VarMapToProto(inputs, out->mutable_inputs());
  VarMapToProto(outputs, out->mutable_outputs());
  for (const auto& [name, value] : attrs) AttributeToProto(name, value, out->add_attrs());
}

absl::StatusOr<OpDesc> OpDesc::FromProto(const proto::OpDesc& in) {
  OpDesc op;
  op.type = in.type();
  for (const auto& v : in.inputs()) {
    op.inputs[v.parameter()].assign(v.arguments().begin(), v.arguments().end());
  }
  for (const auto& v : in.outputs()) {
    op.outputs[v.parameter()].assign(v.arguments().begin(), v.arguments().end());
  }
  for (const auto& a : in.attrs()) {
    auto value = AttributeFromProto(a);
    if (!value.ok()) return Annotate(value.status(), absl::StrCat("op ", op.type));
    op.attrs[a.name()] = *std::move(value);
  }
  return op;
}

// ---- BlockDesc ----

void BlockDesc::set_forward_block_idx(int32_t i) {
  program_->BumpVersion();
  forward_block_idx_ = i;
}

VarDesc* BlockDesc::Var(const std::string& name) {
  program_->BumpVersion();
  auto [it, inserted] = vars_.try_emplace(name);
  if (inserted) it->second.name = name;
  return &it->second;
}

const VarDesc* BlockDesc::FindVar(const std::string& name) const {
  auto it = vars_.find(name);
  return it == vars_.end() ? nullptr : &it->second;
}

VarDesc* BlockDesc::FindMutableVar(const std::string& name) {
  auto it = vars_.find(name);
  if (it == vars_.end()) return nullptr;
  program_->BumpVersion();
  return &it->second;
}

const VarDesc* BlockDesc::FindVarRecursive(const std::string& name) const {
  for (const BlockDesc* b = this; b != nullptr; b = b->parent_idx_ < 0 ? nullptr : &program_->Block(b->parent_idx_)) {
    if (const VarDesc* v = b->FindVar(name)) return v;
  }
  return nullptr;
}

VarDesc* BlockDesc::FindMutableVarRecursive(const std::string& name) {
  const VarDesc* v = FindVarRecursive(name);
  if (v == nullptr) return nullptr;
  program_->BumpVersion();
  return const_cast<VarDesc*>(v);  // every block of the program is ours to edit
}

void BlockDesc::RemoveVar(const std::string& name) {
  program_->BumpVersion();
  vars_.erase(name);
}

OpDesc* BlockDesc::MutableOp(size_t i) {
  program_->BumpVersion();
  return ops_[i].get();
}
OpDesc* BlockDesc::AppendOp() { return InsertOp(ops_.size()); }
OpDesc* BlockDesc::PrependOp() { return InsertOp(0); }
OpDesc* BlockDesc::InsertOp(size_t index) {
  program_->BumpVersion();
  auto it = ops_.insert(ops_.begin() + static_cast<std::ptrdiff_t>(index), std::make_unique<OpDesc>());
  return it->get();
}
void BlockDesc::RemoveOps(size_t begin, size_t end) {
  program_->BumpVersion();
  ops_.erase(ops_.begin() + static_cast<std::ptrdiff_t>(begin), ops_.begin() + static_cast<std::ptrdiff_t>(end));
}

// ---- ProgramDesc ----

ProgramDesc::ProgramDesc() : id_(next_program_id++) {
  blocks_.push_back(std::unique_ptr<BlockDesc>(new BlockDesc(this, 0, -1)));
}

ProgramDesc::ProgramDesc(const ProgramDesc& other) : id_(next_program_id++) { CopyFrom(other); }

ProgramDesc& ProgramDesc::operator=(const ProgramDesc& other) {
  if (this != &other) {
    CopyFrom(other);
    BumpVersion();
  }
  return *this;
}

void ProgramDesc::CopyFrom(const ProgramDesc& other) {
  format_version_ = other.format_version_;
  blocks_.clear();
  for (const auto& b : other.blocks_) {
    auto copy = std::unique_ptr<BlockDesc>(new BlockDesc(this, b->idx_, b->parent_idx_));
    copy->forward_block_idx_ = b->forward_block_idx_;
    copy->vars_ = b->vars_;
    for (const auto& op : b->ops_) copy->ops_.push_back(std::make_unique<OpDesc>(*op));
    blocks_.push_back(std::move(copy));
  }
}

BlockDesc* ProgramDesc::MutableBlock(size_t i) {
  BumpVersion();
  return blocks_[i].get();
}

BlockDesc* ProgramDesc::AppendBlock(int32_t parent_idx) {
  BumpVersion();
  blocks_.push_back(std::unique_ptr<BlockDesc>(new BlockDesc(this, static_cast<int32_t>(blocks_.size()), parent_idx)));
  return blocks_.back().get();
}

proto::ProgramDesc ProgramDesc::ToProto() const {
  proto::ProgramDesc out;
  out.mutable_version()->set_version(format_version_);
  for (const auto& b : blocks_) {
    proto::BlockDesc* pb = out.add_blocks();
    pb->set_idx(b->idx_);
    pb->set_parent_idx(b->parent_idx_);
    pb->set_forward_block_idx(b->forward_block_idx_);
    for (const auto& [name, v] : b->vars_) VarToProto(v, pb->add_vars());
    for (const auto& op : b->ops_) op->ToProto(pb->add_ops());
  }
  return out;
}

std::string ProgramDesc::Serialize() const { return ToProto().SerializeAsString(); }

absl::StatusOr<std::unique_ptr<ProgramDesc>> ProgramDesc::Parse(absl::string_view bytes) {
  proto::ProgramDesc p;
  if (!p.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError(absl::StrCat("not a serialized ProgramDesc (", bytes.size(),
                                                   " bytes failed to parse as paddle.framework.proto.ProgramDesc)"));
  }
  return FromProto(p);
}

absl::StatusOr<std::unique_ptr<ProgramDesc>> ProgramDesc::FromProto(const proto::ProgramDesc& in) {
  if (in.blocks_size() == 0) return absl::InvalidArgumentError("program has no blocks");
  auto prog = std::make_unique<ProgramDesc>();
  prog->blocks_.clear();
  prog->format_version_ = in.version().version();
  for (int i = 0; i < in.blocks_size(); ++i) {
    const proto::BlockDesc& pb = in.blocks(i);
    std::string where = absl::StrCat("block ", i);
    if (pb.idx() != i) {
      return absl::InvalidArgumentError(absl::StrCat(where, " says its index is ", pb.idx()));
    }
    if (pb.parent_idx() >= in.blocks_size() || pb.parent_idx() < -1 || (i > 0 && pb.parent_idx() < 0)) {
      return absl::InvalidArgumentError(absl::StrCat(where, " has invalid parent index ", pb.parent_idx()));
    }
    auto b = std::unique_ptr<BlockDesc>(new BlockDesc(prog.get(), i, pb.parent_idx()));
    b->forward_block_idx_ = pb.forward_block_idx();
    for (const auto& pv : pb.vars()) {
      auto v = VarFromProto(pv);
      if (!v.ok()) return Annotate(v.status(), where);
      b->vars_[v->name] = *std::move(v);
    }
    for (int j = 0; j < pb.ops_size(); ++j) {
      auto op = OpDesc::FromProto(pb.ops(j));
      if (!op.ok()) return Annotate(op.status(), absl::StrCat(where, ", op #", j));
      b->ops_.push_back(std::make_unique<OpDesc>(*std::move(op)));
    }
    prog->blocks_.push_back(std::move(b));
  }
  return prog;
}

std::string VarKindName(VarKind kind) { return proto::VarType::Type_Name(kind); }

std::string ProgramDesc::ToString() const {
  std::string s;
  for (const auto& b : blocks_) {
    absl::StrAppend(&s, "block ", b->idx_, " (parent ", b->parent_idx_, "): ", b->vars_.size(), " vars, ",
                    b->ops_.size(), " ops\n  vars:\n");
    for (const auto& [name, v] : b->vars_) {
      absl::StrAppend(&s, "    ", name, " : ", VarKindName(v.type));
      if (v.type == proto::VarType::LOD_TENSOR || v.type == proto::VarType::SELECTED_ROWS) {
        absl::StrAppend(&s, " ", DataTypeName(v.dtype), "[", absl::StrJoin(v.shape, ", "), "]");
      }
      if (v.lod_level) absl::StrAppend(&s, " lod_level=", v.lod_level);
      if (v.persistable) absl::StrAppend(&s, " persistable");
      absl::StrAppend(&s, "\n");
    }
    absl::StrAppend(&s, "  ops:\n");
    for (size_t i = 0; i < b->ops_.size(); ++i) {
      absl::StrAppend(&s, "    #", i, " ", b->ops_[i]->ToString(), "\n");
    }
  }
  return s;
}

}  // namespace oar
