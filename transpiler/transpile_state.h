// What DistributeTranspiler::transpile() learns and decides, shared by the
// pieces that build the trainer side (trainer_transpile.cc), the pserver
// programs (pserver_program.cc) and their startups (pserver_startup.cc).
//
// Thread-safety: a value owned by one transpiler.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/framework/program_desc.h"
#include "transpiler/transpiler_config.h"

namespace oar {

// One parameter and its gradient, cut into blocks.
struct SplitParam {
  std::string param, grad;             // origin names
  std::vector<VarDesc> param_blocks;   // "fc_w.block0", … (or "fc_w" itself)
  std::vector<VarDesc> grad_blocks;    // as the trainer names them: "fc_w@GRAD.block0.trainer_1", …
  std::vector<std::string> endpoints;  // where block i of both lives
  std::string send_out;                // the send op's control variable
  // A sparse table that lookups read from the pservers (remote_prefetch):
  // the trainer does not receive it each step (remote_prefetch.h).
  bool remote_prefetch = false;
};

// A lookup table distributed over the pservers (is_distributed).
struct DistributedTable {
  std::string name, grad;                          // "emb", "emb@GRAD"
  OpDesc optimizer;                                // its optimizer op in the origin program
  std::vector<OpDesc> extra_ops;                   // its other optimize ops (Adam's beta powers)
  std::vector<std::string> ids, outs;              // of the lookup_table ops the prefetch replaces
  std::vector<VarDesc> prefetch_in, prefetch_out;  // per pserver: prefetch_compress_{in,out}_tmp_<i>
  std::string send_out;                            // its send's control variable (sync)
};

struct TranspileState {
  DistributeTranspilerConfig config;
  int trainer_id = 0;
  int trainers = 1;
  bool sync = true;
  std::vector<std::string> pservers;
  std::vector<std::string> trainer_endpoints;  // nccl2 mode
  ProgramDesc origin;                          // the main program as given
  ProgramDesc* program = nullptr;              // edited in place: the trainer program
  ProgramDesc* startup = nullptr;              // edited in place: the trainer startup
  ProgramDesc origin_startup;            // the startup program as given (pservers take their initializers from it)
  std::vector<OpDesc> optimize_ops;      // copies, in program order
  std::vector<OpDesc> lr_ops;            // copies, in program order
  std::vector<const OpDesc*> to_delete;  // the same ops inside *program
  std::vector<SplitParam> split;
  int control_vars = 0;                   // control variables made so far
  std::optional<DistributedTable> table;  // at most one, as in Fluid

  const VarDesc* OriginVar(const std::string& name) const { return origin.Block(0).FindVar(name); }
  // Fluid's generate_control_dev_var_name made deterministic:
  // "__control_var@<n>", declared in `block`.
  std::string NewControlVar(BlockDesc* block);
};

// The trainer side of pserver mode: finds the (param, grad) pairs, slices
// and places them, inserts the RPC ops into *state->program and the
// parameter pull into *state->startup (when given).
absl::Status TranspileTrainer(TranspileState* state);
// Cuts every (param, grad) pair into blocks, places them on the pservers
// and declares the blocks in the trainer program (trainer_transpile.cc).
absl::Status SliceAndName(TranspileState* state, const std::vector<std::pair<std::string, std::string>>& params_grads);
// GEO-SGD (geo_sgd_transpile.cc): the trainer keeps its optimizer, declares
// `<param or block>.delta`, appends the send of its sparse ids, and its
// startup pulls the dense parameters and ends with send(param_init).
absl::Status TranspileGeoTrainer(TranspileState* state);
// A GEO pserver: each block it holds updated by sum(block, block.delta).
absl::StatusOr<ProgramDesc> BuildGeoPserverProgram(const TranspileState& state, const std::string& endpoint);
// Removes the optimize and LR ops (and variables only they read) from the
// trainer program and the initializers of those variables from its startup.
void StripOptimizer(TranspileState* state);
// The program and startup program of the pserver at `endpoint`.
absl::StatusOr<ProgramDesc> BuildPserverProgram(const TranspileState& state, const std::string& endpoint);
absl::StatusOr<ProgramDesc> BuildPserverStartup(const TranspileState& state, const std::string& endpoint,
                                                const ProgramDesc& pserver_program);
// nccl2 mode: NCCLID + gen_nccl_id appended to `startup`.
absl::Status TranspileNccl2(TranspileState* state, const std::string& current_endpoint, ProgramDesc* startup);

}  // namespace oar
