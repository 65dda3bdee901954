// The startup program of one pserver (Fluid's get_startup_program): the
// initializers of the variables this pserver holds, taken from the trainer's
// startup program, writing the parameter blocks and resized accumulators
// with their pserver shapes.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status.h"
#include "transpiler/program_edit.h"
#include "transpiler/transpile_state.h"

namespace oar {
namespace {

// Random and constant fillers carry the shape they fill.
bool HasShapeAttr(const std::string& type) {
  return type == "gaussian_random" || type == "fill_constant" || type == "uniform_random" ||
         type == "truncated_gaussian_random";
}

void SetShapeAttr(OpDesc* op, const std::vector<int64_t>& shape) {
  if (op->HasAttr("shape") && std::holds_alternative<std::vector<int64_t>>(op->attrs["shape"])) {
    op->SetAttr("shape", shape);
    return;
  }
  op->SetAttr("shape", std::vector<int32_t>(shape.begin(), shape.end()));
}

}  // namespace

absl::StatusOr<ProgramDesc> BuildPserverStartup(const TranspileState& s, const std::string& endpoint,
                                                const ProgramDesc& pserver_program) {
  if (std::find(s.pservers.begin(), s.pservers.end(), endpoint) == s.pservers.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("endpoint '", endpoint, "' is not one of the pservers (", absl::StrJoin(s.pservers, ","), ")"));
  }
  // The parameter blocks this pserver holds, by origin name.
  std::map<std::string, const VarDesc*> block_of;
  for (const auto& sp : s.split) {
    for (size_t b = 0; b < sp.param_blocks.size(); ++b) {
      if (sp.endpoints[b] == endpoint && sp.param_blocks.size() > 1) block_of[sp.param] = &sp.param_blocks[b];
    }
  }
  const BlockDesc& ps_vars = pserver_program.Block(0);
  ProgramDesc out;
  BlockDesc* block = out.MutableBlock(0);
  for (const auto& [name, v] : ps_vars.vars()) CloneVar(block, v);
  const BlockDesc& origin = s.origin_startup.Block(0);
  for (size_t i = 0; i < origin.OpSize(); ++i) {
    const OpDesc& op = origin.Op(i);
    if (op.type == "recv" || op.type == "fetch_barrier" || op.type == "concat") continue;  // as Fluid skips them
    // paddle.nn.LSTM/GRU's startup fuses the cells' weights into one buffer
    // for cuDNN; a pserver runs no rnn, and holds the weights themselves.
    if (op.type == "coalesce_tensor") continue;
    OpDesc::VarMap outputs;
    for (const auto& [slot, args] : op.outputs) {
      if (args.empty()) continue;
      auto it = block_of.find(args[0]);
      if (it != block_of.end()) {
        outputs[slot] = {it->second->name};
      } else if (ps_vars.HasVar(args[0])) {
        outputs[slot] = {args[0]};
      }
    }
    if (outputs.empty()) continue;  // initializes nothing held here
    for (const auto& n : op.InputArgNames()) {
      if (!ps_vars.HasVar(n)) {
        return absl::InvalidArgumentError(absl::StrCat("pserver ", endpoint, ": startup op '", op.type, "' reads '", n,
                                                       "', which this pserver does not hold"));
      }
    }
    OpDesc* added = block->AppendOp();
    *added = op;
    added->outputs = outputs;
    if (HasShapeAttr(op.type) && outputs.count("Out")) {
      SetShapeAttr(added, block->FindVar(outputs["Out"][0])->shape);
    }
  }
  return out;
}

}  // namespace oar
