#include "transpiler/distribute_transpiler.h"

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/status.h"
#include "transpiler/distributed_table.h"
#include "transpiler/optimize_pass.h"
#include "transpiler/optimizer_shapes.h"

namespace oar {
namespace {

// "a:1,b:2" → {"a:1", "b:2"}; every entry must be host:port, none twice.
absl::StatusOr<std::vector<std::string>> ParseEndpoints(const std::string& list, const char* what) {
  std::vector<std::string> eps;
  std::set<std::string> seen;
  for (absl::string_view e : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    std::string ep(absl::StripAsciiWhitespace(e));
    const size_t colon = ep.rfind(':');
    int port = 0;
    if (colon == std::string::npos || colon == 0 || !absl::SimpleAtoi(ep.substr(colon + 1), &port) || port <= 0 ||
        port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": '", ep, "' is not host:port"));
    }
    if (!seen.insert(ep).second) return absl::InvalidArgumentError(absl::StrCat(what, ": '", ep, "' is listed twice"));
    eps.push_back(ep);
  }
  if (eps.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " is empty"));
  return eps;
}

}  // namespace

absl::Status DistributeTranspiler::transpile(int trainer_id, ProgramDesc* program, const std::string& pservers,
                                             std::variant<int, std::string> trainers, bool sync_mode,
                                             ProgramDesc* startup, const std::string& current_endpoint) {
  if (transpiled_) return absl::FailedPreconditionError("transpile() was already called on this transpiler");
  OAR_RETURN_IF_ERROR(state_.config.Validate());
  if (program == nullptr) return absl::InvalidArgumentError("transpile: no program");
  TranspileState& s = state_;
  if (sync_mode && state_.config.half_async) {
    return absl::InvalidArgumentError(
        "transpile: half_async is async training; call transpile with sync_mode=false (as Fluid's fleet does)");
  }
  s.trainer_id = trainer_id;
  s.sync = sync_mode;
  s.origin = *program;
  s.program = program;
  s.startup = startup;
  if (startup != nullptr) s.origin_startup = *startup;
  if (s.config.mode == "nccl2") {
    const std::string* list = std::get_if<std::string>(&trainers);
    if (list == nullptr) {
      return absl::InvalidArgumentError("nccl2 mode: trainers must be the trainer endpoints \"ip:port,ip:port\"");
    }
    OAR_ASSIGN_OR_RETURN(s.trainer_endpoints, ParseEndpoints(*list, "trainer endpoints"));
    s.trainers = static_cast<int>(s.trainer_endpoints.size());
    OAR_RETURN_IF_ERROR(TranspileNccl2(&s, current_endpoint, startup));
    transpiled_ = true;
    return absl::OkStatus();
  }
  const int* count = std::get_if<int>(&trainers);
  if (count == nullptr) return absl::InvalidArgumentError("pserver mode: trainers must be the number of trainers");
  if (*count < 1) return absl::InvalidArgumentError(absl::StrCat("trainers must be >= 1, got ", *count));
  if (trainer_id < 0 || trainer_id >= *count) {
    return absl::InvalidArgumentError(absl::StrCat("trainer_id ", trainer_id, " is not in [0, ", *count, ")"));
  }
  s.trainers = *count;
  OAR_ASSIGN_OR_RETURN(s.pservers, ParseEndpoints(pservers, "pserver endpoints"));
  if (s.config.enable_dc_asgd) {
    return absl::UnimplementedError(
        "enable_dc_asgd: DC-ASGD needs per-trainer parameter backups on the pservers (ref_by_trainer_id), which "
        "Oar does not have yet; train without it");
  }
  if (s.config.geo_sgd_mode) {  // the trainers keep their optimizers; the pservers add deltas
    OAR_RETURN_IF_ERROR(TranspileGeoTrainer(&s));
    transpiled_ = true;
    return absl::OkStatus();
  }
  for (size_t i : FindOptimizePass(s.origin.Block(0)).optimize_ops) {
    const OpDesc& op = s.origin.Block(0).Op(i);
    if (!op.inputs.count("Param") || !op.inputs.count("LearningRate")) continue;
    absl::Status st = CheckPserverOptimizer(op.type);
    if (!st.ok())
      return absl::InvalidArgumentError(absl::StrCat(st.message(), " (parameter '", op.Input("Param")[0], "')"));
  }
  OAR_RETURN_IF_ERROR(TranspileTrainer(&s));
  transpiled_ = true;
  return absl::OkStatus();
}

absl::Status DistributeTranspiler::CheckTranspiled(const char* what) const {
  if (!transpiled_) return absl::FailedPreconditionError(absl::StrCat(what, ": call transpile() first"));
  return absl::OkStatus();
}

absl::StatusOr<ProgramDesc> DistributeTranspiler::get_trainer_program(bool /*wait_port*/) {
  OAR_RETURN_IF_ERROR(CheckTranspiled("get_trainer_program"));
  if (state_.config.mode == "nccl2") return *state_.program;
  if (!trainer_program_made_ && !state_.config.geo_sgd_mode) {
    StripOptimizer(&state_);
    trainer_program_made_ = true;
  }
  return *state_.program;
}

absl::Status DistributeTranspiler::PrefetchDistributedTable(ProgramDesc* program) const {
  OAR_RETURN_IF_ERROR(CheckTranspiled("PrefetchDistributedTable"));
  if (!state_.table) return absl::OkStatus();
  DistributedTable record;
  return ReplaceLookupsWithPrefetch(program->MutableBlock(0), state_.table->name, state_.pservers, state_.trainer_id,
                                    &record);
}

absl::StatusOr<ProgramDesc> DistributeTranspiler::get_trainer_startup_program() const {
  OAR_RETURN_IF_ERROR(CheckTranspiled("get_trainer_startup_program"));
  if (state_.startup == nullptr) return absl::FailedPreconditionError("transpile() was given no startup program");
  return *state_.startup;
}

absl::StatusOr<ProgramDesc> DistributeTranspiler::get_pserver_program(const std::string& endpoint) const {
  OAR_RETURN_IF_ERROR(CheckTranspiled("get_pserver_program"));
  if (state_.config.mode != "pserver") return absl::FailedPreconditionError("nccl2 mode has no pserver programs");
  if (state_.config.geo_sgd_mode) return BuildGeoPserverProgram(state_, endpoint);
  return BuildPserverProgram(state_, endpoint);
}

absl::StatusOr<std::pair<ProgramDesc, ProgramDesc>> DistributeTranspiler::get_pserver_programs(
    const std::string& endpoint) const {
  OAR_ASSIGN_OR_RETURN(ProgramDesc main, get_pserver_program(endpoint));
  OAR_ASSIGN_OR_RETURN(ProgramDesc startup, get_startup_program(endpoint, main));
  return std::make_pair(std::move(main), std::move(startup));
}

absl::StatusOr<ProgramDesc> DistributeTranspiler::get_startup_program(const std::string& endpoint,
                                                                      const ProgramDesc& pserver_program) const {
  OAR_RETURN_IF_ERROR(CheckTranspiled("get_startup_program"));
  if (state_.config.mode != "pserver") return absl::FailedPreconditionError("nccl2 mode has no pserver programs");
  if (state_.startup == nullptr) return absl::FailedPreconditionError("transpile() was given no startup program");
  return BuildPserverStartup(state_, endpoint, pserver_program);
}

}  // namespace oar
