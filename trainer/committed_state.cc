#include "trainer/committed_state.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"

namespace oar {

namespace {

// `src` into `dst`'s own buffer where they agree (what the executors hold
// stays valid), else a deep copy.
void CopyInto(const Tensor& src, Tensor* dst) {
  if (dst->initialized() && dst->dtype() == src.dtype() && dst->numel() == src.numel() && !dst->BufferShared()) {
    std::memcpy(dst->raw_data(), src.raw_data(), src.nbytes());
    return;
  }
  dst->CopyFrom(src);
}

}  // namespace

std::vector<std::string> PersistableTensors(const ProgramDesc& program, const Scope& scope) {
  std::vector<std::string> names;
  for (const auto& [name, v] : program.Block(0).vars()) {
    const Variable* var = scope.FindVar(name);
    if (v.persistable && var != nullptr && var->IsType<Tensor>() && var->Get<Tensor>().initialized()) {
      names.push_back(name);
    }
  }
  return names;
}

absl::Status CommittedState::Commit(const Scope& scope, const std::vector<std::string>& names,
                                    const TrainingPosition& pos) {
  for (const std::string& name : names) {
    const Variable* var = scope.FindVar(name);
    if (var == nullptr || !var->IsType<Tensor>() || !var->Get<Tensor>().initialized()) {
      return absl::FailedPreconditionError(absl::StrCat("commit: '", name, "' holds no tensor"));
    }
    CopyInto(var->Get<Tensor>(), &tensors_[name]);
  }
  pos_ = pos;
  has_ = true;
  return absl::OkStatus();
}

absl::Status CommittedState::Restore(Scope* scope) const {
  for (const auto& [name, t] : tensors_) CopyInto(t, scope->Var(name)->GetMutable<Tensor>());
  return absl::OkStatus();
}

absl::StatusOr<int> CommittedState::Agree(Collective* ring, Scope* scope, const std::vector<std::string>& names) {
  if (has_) OAR_RETURN_IF_ERROR(Restore(scope));
  Tensor mine;
  int64_t* v = mine.mutable_data<int64_t>({3});
  v[0] = has_ ? pos_.step : -1;
  v[1] = pos_.epoch;
  v[2] = pos_.offset;
  std::vector<Tensor> all;
  OAR_RETURN_IF_ERROR(Annotate(ring->AllGather(mine, &all, "the committed steps"), "finding the newest commit"));
  int root = 0;
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    if (all[r].numel() != 3) return absl::DataLossError(absl::StrCat("rank ", r, " sent no committed step"));
    if (all[r].data<int64_t>()[0] > all[root].data<int64_t>()[0]) root = r;
  }
  const int64_t* theirs = all[root].data<int64_t>();
  for (const std::string& name : names) {
    Variable* var = scope->FindVar(name);
    if (var == nullptr || !var->IsType<Tensor>() || !var->Get<Tensor>().initialized()) {
      return absl::FailedPreconditionError(
          absl::StrCat("'", name, "' is not initialized here: run the startup program before joining the ring"));
    }
    OAR_RETURN_IF_ERROR(ring->Broadcast(var->GetMutable<Tensor>(), root, name));
  }
  OAR_RETURN_IF_ERROR(
      Commit(*scope, names, {.step = std::max<int64_t>(0, theirs[0]), .epoch = theirs[1], .offset = theirs[2]}));
  return root;
}

}  // namespace oar
