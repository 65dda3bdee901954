// ParameterServer's PrefetchVariable: the rows of a distributed lookup
// table's shard for a trainer's ids (see parameter_server.h).
#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "pserver/parameter_server.h"

namespace oar {

absl::Status ParameterServer::HandlePrefetch(const rpc::IncomingMessage& request, int id, rpc::Reply* reply) {
  const rpc::MessageHeader& h = request.header();
  auto it = config_.prefetch_var_to_block_id.find(h.name());
  if (it == config_.prefetch_var_to_block_id.end()) {
    return absl::InvalidArgumentError(absl::StrCat(Who(id), ": no prefetch block for '", h.name(), "'",
                                                   config_.prefetch_var_to_block_id.empty()
                                                       ? " (this pserver holds no distributed lookup table)"
                                                       : ""));
  }
  constexpr int64_t kMaxIds = int64_t{1} << 26;
  if (h.kind != rpc::PayloadKind::kTensor || h.dtype != DataType::kInt64 || h.dims.size() < 1 ||
      h.dims.numel() != h.dims[0] || h.dims[0] > kMaxIds) {
    return absl::InvalidArgumentError(absl::StrCat(Who(id), ": prefetch '", h.name(), "' must carry int64 ids [n, 1] ",
                                                   "(n <= ", kMaxIds, "), got ", h.Describe()));
  }
  const int block = it->second;
  const std::string& out = h.meta.out_varname();
  bool computed = false;
  for (size_t i = 0; i < program_.Block(block).OpSize() && !computed; ++i) {
    for (const auto& o : program_.Block(block).Op(i).OutputArgNames()) computed = computed || o == out;
  }
  if (!computed) {
    return absl::InvalidArgumentError(absl::StrCat(Who(id), ": prefetch block ", block, " for '", h.name(),
                                                   "' does not compute '", out, "' (out_varname)"));
  }
  Scope* child = &scope_->NewScope();
  absl::Cleanup drop = [&] { scope_->DeleteScope(child); };
  request.DecodeInto(child->Var(h.name()));
  child->Var(out);  // the rows land here, not in a variable other prefetches share
  OAR_RETURN_IF_ERROR(Annotate(RunBlockLocked(block, child), Who(id)));
  const Variable* rows = child->FindVar(out);
  if (rows == nullptr || !rows->IsType<Tensor>()) {
    return absl::InternalError(absl::StrCat(Who(id), ": prefetch block ", block, " left no rows in '", out, "'"));
  }
  reply->name = out;
  reply->var = *rows;  // shares the buffer; the scope goes, the rows stay with the reply
  return absl::OkStatus();
}

}  // namespace oar
