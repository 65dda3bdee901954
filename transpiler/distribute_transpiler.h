// DistributeTranspiler: turns a single-process program into the programs of
// a distributed job, laid out block for block as Fluid's transpiler lays them
// out (../shared/reference: DistributeTranspiler).
//
// pserver mode: every (param, grad) pair found through op_role_var is cut
// into blocks of whole rows (slice_variable), and block i of a parameter and
// block i of its gradient go to the same pserver.
//  - transpile() edits `program` in place: after each gradient's last writer
//    comes split_byref + send; then send_barrier (sync), one recv per
//    parameter, fetch_barrier (sync) and a concat per sliced parameter. It
//    appends to `startup` the pull of every parameter from the pservers
//    (recv…, fetch_barrier, concat), so all trainers start from the same
//    values.
//  - get_trainer_program() then removes the optimize and LR-schedule ops.
//  - get_pserver_program(ep): block 0 holds only listen_and_serv; next the
//    LR-decay block (and copies of its sub-blocks), then one block per
//    parameter block owned by ep: sum + scale over the trainers' gradients
//    (sync, trainers > 1), the clip/regularization ops, the optimizer with
//    its accumulators resized to the block; one empty block if ep owns
//    nothing.
//  - get_startup_program(ep, pserver_program): the initializers of ep's
//    variables, with the block shapes.
// nccl2 mode: `trainers` is the comma-separated list of trainer endpoints;
// the startup program gets a persistable RAW var NCCLID and a gen_nccl_id op;
// the main program is unchanged.
//
//   DistributeTranspiler t;
//   OAR_RETURN_IF_ERROR(t.transpile(0, &main.desc(), "10.0.0.1:6174,10.0.0.2:6174",
//                                   /*trainers=*/2, /*sync_mode=*/true, &startup.desc()));
//   OAR_ASSIGN_OR_RETURN(ProgramDesc trainer, t.get_trainer_program(/*wait_port=*/false));
//   OAR_ASSIGN_OR_RETURN(auto ps, t.get_pserver_programs("10.0.0.1:6174"));
//
// Transpiling is deterministic: the same inputs give byte-identical programs
// in every process. Where Oar differs from Fluid (HashName placement, control
// variable names, trainer_id on every RPC op, the optimizer reading a clipped
// gradient) the reason is written next to the code.
//
// Thread-safety: a transpiler is used by one thread; the programs passed to
// transpile() must outlive it and not be edited by others meanwhile.
#pragma once

#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "common/api/program.h"
#include "common/framework/program_desc.h"
#include "transpiler/transpile_state.h"
#include "transpiler/transpiler_config.h"

namespace oar {

class DistributeTranspiler {
 public:
  explicit DistributeTranspiler(DistributeTranspilerConfig config = {}) { state_.config = std::move(config); }

  // `trainers`: the number of trainers (pserver mode) or the trainer
  // endpoints "ip:port,ip:port" (nccl2 mode). `startup` may be null only in
  // pserver mode when no trainer startup is wanted. InvalidArgument naming
  // the variable, op or endpoint when the program cannot be distributed.
  absl::Status transpile(int trainer_id, ProgramDesc* program, const std::string& pservers = "127.0.0.1:6174",
                         std::variant<int, std::string> trainers = 1, bool sync_mode = true,
                         ProgramDesc* startup = nullptr, const std::string& current_endpoint = "127.0.0.1:6174");

  // The same for programs built with the layers API (DESIGN's sketch):
  //   t.transpile(0, &main, "10.0.0.1:6174,10.0.0.2:6174", 2, true, &startup);
  absl::Status transpile(int trainer_id, Program* program, const std::string& pservers = "127.0.0.1:6174",
                         std::variant<int, std::string> trainers = 1, bool sync_mode = true, Program* startup = nullptr,
                         const std::string& current_endpoint = "127.0.0.1:6174") {
    return transpile(trainer_id, program == nullptr ? nullptr : &program->desc(), pservers, std::move(trainers),
                     sync_mode, startup == nullptr ? nullptr : &startup->desc(), current_endpoint);
  }

  // The trainer program (the edited `program`, without optimize and LR ops).
  // `wait_port` is Fluid's; Oar's transpiler does no network I/O, so it is
  // accepted and ignored: the trainer runtime waits for the pservers
  // (bounded by FLAGS_rpc_deadline) before it pulls the parameters.
  absl::StatusOr<ProgramDesc> get_trainer_program(bool wait_port = true);
  // The trainer's startup program (the edited `startup`).
  absl::StatusOr<ProgramDesc> get_trainer_startup_program() const;

  absl::StatusOr<ProgramDesc> get_pserver_program(const std::string& endpoint) const;
  absl::StatusOr<std::pair<ProgramDesc, ProgramDesc>> get_pserver_programs(const std::string& endpoint) const;
  absl::StatusOr<ProgramDesc> get_startup_program(const std::string& endpoint,
                                                  const ProgramDesc& pserver_program) const;

  const DistributeTranspilerConfig& config() const { return state_.config; }
  const std::vector<std::string>& pserver_endpoints() const { return state_.pservers; }
  const std::vector<std::string>& trainer_endpoints() const { return state_.trainer_endpoints; }
  const std::vector<SplitParam>& split_params() const { return state_.split; }
  // The distributed lookup table's name (Fluid's _distributed_lookup_table); "" if none.
  std::string distributed_lookup_table() const { return state_.table ? state_.table->name : ""; }

  // Oar's: rewrites another program of the same model (a test program
  // cloned before minimize) to prefetch the distributed lookup table's rows
  // from the pservers, as the trainer program does. A no-op when no table is
  // distributed.
  absl::Status PrefetchDistributedTable(ProgramDesc* program) const;

 private:
  absl::Status CheckTranspiled(const char* what) const;

  TranspileState state_;
  bool transpiled_ = false;
  bool trainer_program_made_ = false;
};

}  // namespace oar
