#include "transpiler/program_edit.h"

#include <algorithm>

namespace oar {

void RenameVarInBlock(BlockDesc* block, const std::string& from, const std::string& to) {
  if (const VarDesc* v = block->FindVar(from)) {
    VarDesc copy = *v;
    copy.name = to;
    block->RemoveVar(from);
    *block->Var(to) = copy;
  }
  for (size_t i = 0; i < block->OpSize(); ++i) {
    OpDesc* op = block->MutableOp(i);
    op->RenameInput(from, to);
    op->RenameOutput(from, to);
    if (op->HasAttr(kOpRoleVarAttr)) {
      auto role_var = op->GetAttr<std::vector<std::string>>(kOpRoleVarAttr);
      std::replace(role_var.begin(), role_var.end(), from, to);
      op->SetAttr(kOpRoleVarAttr, role_var);
    }
  }
}

int64_t FindLastWriter(const BlockDesc& block, const std::string& name) {
  for (size_t i = block.OpSize(); i-- > 0;) {
    const auto outs = block.Op(i).OutputArgNames();
    if (std::find(outs.begin(), outs.end(), name) != outs.end()) return static_cast<int64_t>(i);
  }
  return -1;
}

OpDesc MakeOp(std::string type, OpDesc::VarMap inputs, OpDesc::VarMap outputs, std::map<std::string, Attribute> attrs,
              OpRole role) {
  OpDesc op;
  op.type = std::move(type);
  op.inputs = std::move(inputs);
  op.outputs = std::move(outputs);
  op.attrs = std::move(attrs);
  op.attrs[kOpRoleAttr] = static_cast<int32_t>(role);
  return op;
}

VarDesc* CloneVar(BlockDesc* block, const VarDesc& var) {
  if (VarDesc* v = block->FindMutableVar(var.name)) return v;
  VarDesc* v = block->Var(var.name);
  *v = var;
  return v;
}

std::vector<int64_t> BlockShape(const std::vector<int64_t>& shape, int64_t size) {
  int64_t width = 1;
  for (size_t i = 1; i < shape.size(); ++i) width *= shape[i];
  std::vector<int64_t> out = shape;
  if (out.empty()) out.push_back(size);
  out[0] = width > 0 ? size / width : 0;
  return out;
}

}  // namespace oar
