// `oar transpile`: runs the DistributeTranspiler over a model from examples/
// (--model) or over program files (--program/--startup) and writes every
// program it makes into --out as binary ProgramDesc (.pb) and protobuf text
// (.pbtxt): trainer.main, trainer.startup and, in pserver mode,
// pserver_<i>.main / pserver_<i>.startup for the i-th endpoint. --json
// prints a summary: each program's blocks with their op types in order and
// their variables with their shapes.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/str_split.h"
#include "cli/command.h"
#include "cli/mode_flags.h"
#include "cli/model_build.h"
#include "cli/trainers_flag.h"
#include "cli/transpile_cmd.h"
#include "common/base/status.h"
#include "common/framework/program_check.h"
#include "gflags/gflags.h"
#include "google/protobuf/text_format.h"
#include "nlohmann/json.hpp"
#include "transpiler/distribute_transpiler.h"

DEFINE_string(program, "", "main program file (.pb) to transpile instead of --model");
DEFINE_string(startup, "", "its startup program file (.pb); required with --program");
DEFINE_string(pservers, "127.0.0.1:6174", "pserver endpoints ip:port,ip:port (pserver mode)");
DEFINE_string(trainer_endpoints, "", "trainer endpoints ip:port,ip:port (nccl2 mode)");
DEFINE_int32(trainer_id, 0, "this trainer's id, 0 <= id < trainers");
DEFINE_bool(sync, true, "synchronous training (barriers every step)");
DEFINE_bool(async, false, "asynchronous training (no barriers); the same as --nosync");
DEFINE_string(mode, "pserver", "pserver or nccl2");
DEFINE_string(current_endpoint, "", "this process's endpoint (nccl2 mode: one of --trainer_endpoints)");
DEFINE_int64(min_block_size, 8192, "smallest block, in elements, a variable is cut into (>= 8192)");
DEFINE_bool(no_slice, false, "keep every variable whole (one pserver per variable)");
DEFINE_string(split_method, "roundrobin", "how blocks are placed on pservers: roundrobin or hashname");
DEFINE_bool(runtime_split_send_recv, false,
            "send whole variables and let send/recv cut them (no split_byref); with --async, trainers send through "
            "Fluid's communicator (merged gradients from a background thread; the --communicator_* flags)");
DEFINE_bool(half_async, false,
            "Fluid 1.7+'s half-async: async pservers, but each step a trainer's threads meet at a "
            "send_barrier(half_async) where its communicator sends their averaged gradients and pulls the parameters "
            "(needs --async)");
DEFINE_bool(geo_sgd_mode, false,
            "Fluid 1.6+'s GEO-SGD: trainers train with their own optimizers and every --geo_sgd_need_push_nums steps "
            "send each parameter's change (a sparse table's touched rows) divided by the trainer count, which the "
            "pservers add (needs --async)");
DEFINE_int32(geo_sgd_need_push_nums, 100, "GEO-SGD: steps between a trainer's exchanges with the pservers");
DEFINE_bool(json, false, "print a JSON summary of the programs on stdout");
DECLARE_string(out);

namespace oar::cli {

absl::StatusOr<ProgramDesc> ReadProgram(const std::string& path, const char* flag) {
  auto bytes = ReadFileBytes(path);
  if (!bytes.ok()) return absl::NotFoundError(absl::StrCat(flag, ": ", bytes.status().message()));
  auto p = ProgramDesc::Parse(*bytes);
  if (!p.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", p.status().message()));
  OAR_RETURN_IF_ERROR(RefusalsError(FindRefusals(**p, OpRegistry::Global()), path));  // all at once
  return **p;
}

namespace {

absl::Status WriteProgram(const std::string& dir, const std::string& name, const ProgramDesc& p) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(p.ToProto(), &text);
  OAR_RETURN_IF_ERROR(WriteFileBytes(dir + "/" + name + ".pb", p.Serialize()));
  return WriteFileBytes(dir + "/" + name + ".pbtxt", text);
}

nlohmann::ordered_json ProgramJson(const ProgramDesc& p) {
  nlohmann::ordered_json blocks = nlohmann::ordered_json::array();
  for (size_t b = 0; b < p.NumBlocks(); ++b) {
    const BlockDesc& block = p.Block(b);
    nlohmann::ordered_json ops = nlohmann::ordered_json::array();
    for (size_t i = 0; i < block.OpSize(); ++i) ops.push_back(block.Op(i).type);
    nlohmann::ordered_json vars = nlohmann::ordered_json::object();
    for (const auto& [name, v] : block.vars()) vars[name] = v.shape;
    blocks.push_back({{"idx", block.idx()}, {"parent", block.parent_idx()}, {"ops", ops}, {"vars", vars}});
  }
  return {{"blocks", blocks}};
}

}  // namespace

absl::Status ProgramsFromFlags(ProgramDesc* main, ProgramDesc* startup, std::unique_ptr<ModelPrograms>* model) {
  if (!FLAGS_program.empty()) {
    if (FLAGS_startup.empty()) return absl::InvalidArgumentError("--program needs --startup");
    OAR_ASSIGN_OR_RETURN(*main, ReadProgram(FLAGS_program, "--program"));
    OAR_ASSIGN_OR_RETURN(*startup, ReadProgram(FLAGS_startup, "--startup"));
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(*model, BuildModelFromFlags());
  *main = (*model)->main.desc();
  *startup = (*model)->startup.desc();
  return absl::OkStatus();
}

absl::StatusOr<DistributeTranspilerConfig> TranspilerConfigFromFlags() {
  DistributeTranspilerConfig c;
  c.mode = FLAGS_mode;
  c.min_block_size = FLAGS_min_block_size;
  c.slice_var_up = !FLAGS_no_slice;
  c.runtime_split_send_recv = FLAGS_runtime_split_send_recv;
  c.half_async = FLAGS_half_async;
  c.geo_sgd_mode = FLAGS_geo_sgd_mode;
  c.geo_sgd_need_push_nums = FLAGS_geo_sgd_need_push_nums;
  c.wait_port = false;  // nothing runs here: there is no one to wait for
  OAR_ASSIGN_OR_RETURN(c.split_method, ParseSplitMethod(FLAGS_split_method));
  if (FLAGS_async && FlagGiven("sync") && FLAGS_sync)
    return absl::InvalidArgumentError("--sync and --async contradict");
  c.sync_mode = FLAGS_sync && !FLAGS_async;
  if (c.half_async && c.sync_mode)
    return absl::InvalidArgumentError("--half_async is a mode of async training: add --async");
  OAR_RETURN_IF_ERROR(c.Validate());
  return c;
}

namespace {

absl::Status Transpile() {
  if (FLAGS_out.empty() && !FLAGS_json) return absl::InvalidArgumentError("give --out DIR, --json or both");
  OAR_ASSIGN_OR_RETURN(DistributeTranspilerConfig config, TranspilerConfigFromFlags());
  ProgramDesc main, startup;
  std::unique_ptr<ModelPrograms> model;
  OAR_RETURN_IF_ERROR(ProgramsFromFlags(&main, &startup, &model));
  DistributeTranspiler t(config);
  const bool nccl2 = config.mode == "nccl2";
  if (nccl2 && FLAGS_trainer_endpoints.empty())
    return absl::InvalidArgumentError("nccl2 mode needs --trainer_endpoints");
  OAR_RETURN_IF_ERROR(
      RefuseFlagsTheModeIgnores({.nccl2 = nccl2, .data_feed = true, .async_executor = true, .gpu = true}));
  OAR_RETURN_IF_ERROR(RefuseTrainerRange("oar transpile"));
  std::variant<int, std::string> trainers = TrainersFromFlag().max;
  if (nccl2) trainers = FLAGS_trainer_endpoints;
  OAR_RETURN_IF_ERROR(t.transpile(FLAGS_trainer_id, &main, FLAGS_pservers, trainers, config.sync_mode, &startup,
                                  FLAGS_current_endpoint));
  std::vector<std::pair<std::string, ProgramDesc>> out;
  OAR_ASSIGN_OR_RETURN(ProgramDesc trainer, t.get_trainer_program(/*wait_port=*/false));
  OAR_ASSIGN_OR_RETURN(ProgramDesc trainer_startup, t.get_trainer_startup_program());
  out.emplace_back("trainer.main", std::move(trainer));
  out.emplace_back("trainer.startup", std::move(trainer_startup));
  nlohmann::ordered_json summary = {
      {"mode", config.mode},
      {"sync", config.sync_mode},
      {"trainer_id", FLAGS_trainer_id},
      {"trainer", {{"main", ProgramJson(out[0].second)}, {"startup", ProgramJson(out[1].second)}}}};
  // What Fluid's transpiler sets on the trainer's Program (Python attributes
  // a ProgramDesc does not carry): _is_distributed, _is_chief, _endpoints,
  // _distributed_lookup_table.
  const std::string table = t.distributed_lookup_table();
  summary["trainer"]["is_distributed"] = true;
  summary["trainer"]["is_chief"] = FLAGS_trainer_id == 0;
  summary["trainer"]["endpoints"] = nccl2 ? t.trainer_endpoints() : t.pserver_endpoints();
  summary["trainer"]["distributed_lookup_table"] =
      table.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(table);
  if (!nccl2) {
    summary["pservers"] = nlohmann::ordered_json::array();
    for (size_t i = 0; i < t.pserver_endpoints().size(); ++i) {
      const std::string& ep = t.pserver_endpoints()[i];
      OAR_ASSIGN_OR_RETURN(auto pair, t.get_pserver_programs(ep));
      summary["pservers"].push_back(
          {{"endpoint", ep}, {"main", ProgramJson(pair.first)}, {"startup", ProgramJson(pair.second)}});
      out.emplace_back(absl::StrCat("pserver_", i, ".main"), std::move(pair.first));
      out.emplace_back(absl::StrCat("pserver_", i, ".startup"), std::move(pair.second));
    }
  }
  if (!FLAGS_out.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(FLAGS_out, ec);
    if (ec) return absl::PermissionDeniedError(FLAGS_out + ": " + ec.message());
    for (const auto& [name, p] : out) OAR_RETURN_IF_ERROR(WriteProgram(FLAGS_out, name, p));
  }
  if (FLAGS_json) {
    std::cout << summary.dump(2) << "\n";
  } else {
    std::cout << "wrote " << out.size() << " programs (.pb and .pbtxt) to " << FLAGS_out << "\n";
  }
  return absl::OkStatus();
}

}  // namespace

int RunTranspile(const std::vector<std::string>& args) { return RunWithoutArgs("transpile", args, Transpile); }

}  // namespace oar::cli
