// nccl2 mode (Fluid's _transpile_nccl2): the trainers share one NCCL id,
// made by trainer 0 and sent to the others over gRPC by the gen_nccl_id op
// that this appends to the startup program. The main program is unchanged:
// the ParallelExecutor all-reduces across trainers itself.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status.h"
#include "transpiler/program_edit.h"
#include "transpiler/transpile_state.h"

namespace oar {

absl::Status TranspileNccl2(TranspileState* s, const std::string& current_endpoint, ProgramDesc* startup) {
  if (startup == nullptr) return absl::InvalidArgumentError("nccl2 mode needs the startup program");
  const auto& eps = s->trainer_endpoints;
  auto self = std::find(eps.begin(), eps.end(), current_endpoint);
  if (self == eps.end()) {
    return absl::InvalidArgumentError(absl::StrCat("current_endpoint '", current_endpoint,
                                                   "' is not one of the trainer endpoints (", absl::StrJoin(eps, ","),
                                                   ")"));
  }
  if (s->trainer_id != self - eps.begin()) {
    return absl::InvalidArgumentError(absl::StrCat("trainer_id ", s->trainer_id, " does not match current_endpoint '",
                                                   current_endpoint, "', which is trainer ", self - eps.begin(),
                                                   " in the trainer endpoints"));
  }
  std::vector<std::string> others;
  for (const auto& ep : eps) {
    if (ep != current_endpoint) others.push_back(ep);
  }
  BlockDesc* block = startup->MutableBlock(0);
  VarDesc* id = block->Var("NCCLID");
  id->type = paddle::framework::proto::VarType::RAW;
  id->persistable = true;
  *block->AppendOp() =
      MakeOp("gen_nccl_id", {}, {{"NCCLID", {"NCCLID"}}},
             {{"endpoint", current_endpoint}, {"endpoint_list", others}, {"trainer_id", int32_t{s->trainer_id}}});
  return absl::OkStatus();
}

}  // namespace oar
