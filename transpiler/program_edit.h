// Small edits of a block that the transpiler makes, as Fluid's Python Block
// methods make them (_rename_var, _insert_op, _clone_variable).
//
// Thread-safety: externally synchronized (edits the block).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/framework/program_desc.h"

namespace oar {

// Renames variable `from` to `to` in `block`: its VarDesc and every op's
// inputs, outputs and op_role_var entries (Fluid's OpDesc::Rename* touch
// op_role_var too, so ParallelExecutor still finds the gradient).
void RenameVarInBlock(BlockDesc* block, const std::string& from, const std::string& to);

// Index of the last op of `block` that writes `name`; -1 if none.
int64_t FindLastWriter(const BlockDesc& block, const std::string& name);

// An op with its slots, attributes and op_role (Fluid gives every op one).
OpDesc MakeOp(std::string type, OpDesc::VarMap inputs, OpDesc::VarMap outputs,
              std::map<std::string, Attribute> attrs = {}, OpRole role = OpRole::kForward);

// Copies `var` into `block` under its own name unless the block has it.
VarDesc* CloneVar(BlockDesc* block, const VarDesc& var);

// Rows of a block of `size` elements cut from a variable of `shape`, as a
// shape: [size / width, shape[1:]...].
std::vector<int64_t> BlockShape(const std::vector<int64_t>& shape, int64_t size);

}  // namespace oar
