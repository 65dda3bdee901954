#include "pserver/param_lending.h"

#include <optional>

#include "common/framework/tensor.h"
#include "glog/logging.h"

namespace oar {

std::shared_ptr<const rpc::stream::SharedRegion> ParamLending::Lend(const std::set<std::string>& names) {
  std::vector<Tensor*> params;
  std::vector<std::string> moved;
  for (const auto& name : names) {
    Variable* v = scope_->FindVar(name);
    if (v == nullptr || !v->IsType<Tensor>()) continue;
    Tensor* t = v->GetMutable<Tensor>();
    if (t->initialized() && t->place().is_cpu() && t->nbytes() > 0) {
      params.push_back(t);
      moved.push_back(name);
    }
  }
  if (params.empty()) return nullptr;
  absl::StatusOr<std::shared_ptr<rpc::stream::SharedRegion>> region = rpc::stream::SharedRegion::MoveInto(params);
  if (!region.ok()) {
    LOG(WARNING) << who_() << ": parameters stay in private memory (Gets over shm are copied): " << region.status();
    return nullptr;
  }
  VLOG(1) << who_() << ": " << params.size() << " parameters (" << (*region)->size()
          << " bytes) in shared memory, lent to trainers on this host";
  {
    absl::MutexLock l(&mu_);
    lent_ = std::move(moved);
  }
  return *std::move(region);
}

void ParamLending::UnlendIfDue() {
  if (!due_.load()) return;
  absl::MutexLock u(&mu_);  // a second caller waits here until every parameter has moved
  if (!due_.load()) return;
  std::vector<std::string> names;
  names.swap(lent_);
  for (const std::string& name : names) {
    Variable* v = scope_->FindVar(name);
    if (v == nullptr || !v->IsType<Tensor>()) continue;
    std::optional<absl::MutexLock> l;
    if (absl::Mutex* block = lock_of_(name); block != nullptr) l.emplace(block);  // no block writes it meanwhile
    Tensor* t = v->GetMutable<Tensor>();
    if (!t->OverForeignMemory()) continue;  // it already left the region (an update gave it a buffer of its own)
    Tensor own;
    own.CopyFrom(*t);
    *t = std::move(own);
  }
  due_.store(false);
  if (!names.empty()) VLOG(1) << who_() << ": parameters back in private memory; Gets over shm now copy";
}

std::vector<std::string> ParamLending::lent() const {
  absl::MutexLock l(&mu_);
  return lent_;
}

}  // namespace oar
