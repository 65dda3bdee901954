#include "transpiler/remote_prefetch.h"

#include "transpiler/program_edit.h"

namespace oar {

void MarkRemotePrefetchTables(TranspileState* s) {
  BlockDesc* main = s->program->MutableBlock(0);
  for (SplitParam& sp : s->split) {
    if (sp.grad_blocks.empty() || sp.grad_blocks[0].type != paddle::framework::proto::VarType::SELECTED_ROWS) continue;
    std::vector<OpDesc*> lookups;
    for (size_t i = 0; i < main->OpSize(); ++i) {
      OpDesc* op = main->MutableOp(i);
      if ((op->type != "lookup_table" && op->type != "lookup_table_v2") || op->Input("W").empty() ||
          op->Input("W")[0] != sp.param) {
        continue;
      }
      if (op->HasAttr("remote_prefetch") && op->GetAttr<bool>("remote_prefetch") &&
          !(op->HasAttr("is_distributed") && op->GetAttr<bool>("is_distributed"))) {
        lookups.push_back(op);
      }
    }
    if (lookups.empty()) continue;
    sp.remote_prefetch = true;
    std::vector<std::string> names;
    std::vector<int64_t> heights;
    for (const VarDesc& b : sp.param_blocks) {
      names.push_back(b.name);
      heights.push_back(b.shape.empty() ? 0 : b.shape[0]);
    }
    for (OpDesc* op : lookups) {
      op->SetAttr("epmap", sp.endpoints);
      op->SetAttr("table_names", names);
      op->SetAttr("height_sections", heights);
      op->SetAttr("trainer_id", int32_t{s->trainer_id});
    }
  }
}

}  // namespace oar
