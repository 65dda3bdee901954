#include "pserver/sparse_tables.h"

#include "absl/strings/str_cat.h"
#include "common/base/status.h"

namespace oar {

namespace proto = paddle::framework::proto;

std::set<std::string> DistributedTables(const ProgramDesc& program) {
  std::set<std::string> tables;
  for (size_t b = 0; b < program.NumBlocks(); ++b) {
    const BlockDesc& block = program.Block(b);
    for (size_t i = 0; i < block.OpSize(); ++i) {
      if (block.Op(i).type == "lookup_sparse_table") {
        for (const auto& w : block.Op(i).Input("W")) tables.insert(w);
      }
    }
  }
  return tables;
}

absl::StatusOr<std::set<std::string>> PrepareSparseTables(const ProgramDesc& program, Scope* scope) {
  const std::set<std::string> tables = DistributedTables(program);
  std::set<std::string> made;
  const BlockDesc& global = program.Block(0);
  auto make = [&](const std::string& name) -> absl::StatusOr<SparseTable*> {
    const VarDesc* v = global.FindVar(name);
    if (v == nullptr || v->shape.size() != 2 || v->shape[1] <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("distributed table '", name, "' must be declared in block 0 as [rows, width]"));
    }
    Variable* var = scope->Var(name);
    if (var->IsInitialized() && !var->IsType<SparseTable>()) {
      return absl::InvalidArgumentError(absl::StrCat("distributed table '", name, "' already holds a dense value"));
    }
    SparseTable* t = var->GetMutable<SparseTable>();
    OAR_RETURN_IF_ERROR(Annotate(t->Configure(v->shape[1]), name));
    t->set_declared_height(v->shape[0]);
    made.insert(name);
    return t;
  };
  for (const auto& name : tables) OAR_RETURN_IF_ERROR(make(name).status());
  // Accumulators of the tables' optimizer ops follow the table's rows.
  for (size_t b = 1; b < program.NumBlocks(); ++b) {
    const BlockDesc& block = program.Block(b);
    for (size_t i = 0; i < block.OpSize(); ++i) {
      const OpDesc& op = block.Op(i);
      if (!op.inputs.count("Param") || op.Input("Param").size() != 1 || !tables.count(op.Input("Param")[0])) continue;
      SparseTable* param = scope->Var(op.Input("Param")[0])->GetMutable<SparseTable>();
      for (const auto& [slot, args] : op.inputs) {
        if (slot == "Param" || slot == "Grad" || slot == "LearningRate" || args.size() != 1) continue;
        const VarDesc* v = global.FindVar(args[0]);
        if (v == nullptr || v->type != proto::VarType::SELECTED_ROWS) continue;  // a dense scalar (Beta1Pow)
        OAR_ASSIGN_OR_RETURN(SparseTable * acc, make(args[0]));
        OAR_RETURN_IF_ERROR(Annotate(acc->Follow(*param), args[0]));
      }
    }
  }
  return made;
}

}  // namespace oar
