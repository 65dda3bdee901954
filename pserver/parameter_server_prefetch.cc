// ParameterServer's PrefetchVariable: the rows of a distributed lookup
// table's shard for a trainer's ids, or of a parameter block named as the
// request's table (a remote_prefetch table; see parameter_server.h).
#include <cstring>
#include <optional>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "pserver/parameter_server.h"

namespace oar {

absl::Status ParameterServer::HandlePrefetch(const rpc::IncomingMessage& request, int id, rpc::Reply* reply) {
  const rpc::MessageHeader& h = request.header();
  auto it = config_.prefetch_var_to_block_id.find(h.name());
  if (it == config_.prefetch_var_to_block_id.end() && !h.meta.table_name().empty()) {
    return PrefetchBlockRows(request, id, reply);
  }
  if (it == config_.prefetch_var_to_block_id.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        Who(id), ": no prefetch block for '", h.name(), "'",
        config_.prefetch_var_to_block_id.empty() ? " (this pserver holds no distributed lookup table)" : ""));
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

absl::Status ParameterServer::PrefetchBlockRows(const rpc::IncomingMessage& request, int id, rpc::Reply* reply) {
  const rpc::MessageHeader& h = request.header();
  const std::string& table = h.meta.table_name();
  OAR_ASSIGN_OR_RETURN(const Variable* v, ServedVar(table, id));
  if (!v->IsType<Tensor>() || v->Get<Tensor>().dims().size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(Who(id), ": prefetch of table '", table, "': it is not a 2-D parameter block here"));
  }
  constexpr int64_t kMaxIds = int64_t{1} << 26;
  if (h.kind != rpc::PayloadKind::kTensor || h.dtype != DataType::kInt64 || h.dims.size() < 1 ||
      h.dims.numel() != h.dims[0] || h.dims[0] > kMaxIds) {
    return absl::InvalidArgumentError(absl::StrCat(Who(id), ": prefetch of table '", table,
                                                   "' must carry int64 ids [n, 1] (n <= ", kMaxIds, "), got ",
                                                   h.Describe()));
  }
  Variable ids_var;
  request.DecodeInto(&ids_var);
  const Tensor& ids = ids_var.Get<Tensor>();
  Tensor rows;
  auto owner = param_block_.find(table);
  std::optional<absl::ReaderMutexLock> l;
  if (owner != param_block_.end()) l.emplace(block_mu_.at(owner->second).get());  // no update meanwhile
  const Tensor& block = v->Get<Tensor>();
  const int64_t height = block.dims()[0], width = block.dims()[1];
  const size_t row_bytes = static_cast<size_t>(width) * SizeOf(block.dtype());
  rows.Resize(DDim{ids.numel(), width});
  char* out = static_cast<char*>(rows.mutable_data(block.dtype(), CPUPlace()));
  const char* src = static_cast<const char*>(block.raw_data());
  for (int64_t i = 0; i < ids.numel(); ++i) {
    const int64_t r = ids.data<int64_t>()[i];
    if (r < 0 || r >= height) {
      return absl::InvalidArgumentError(
          absl::StrCat(Who(id), ": prefetch of table '", table, "': row ", r, " is outside its ", height, " rows"));
    }
    std::memcpy(out + static_cast<size_t>(i) * row_bytes, src + static_cast<size_t>(r) * row_bytes, row_bytes);
  }
  reply->name = h.meta.out_varname();
  reply->var.GetMutable<Tensor>()->ShareDataWith(rows);
  return absl::OkStatus();
}

}  // namespace oar
