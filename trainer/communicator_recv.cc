// Communicator's receiving half: pulling every parameter (on the recv
// thread, or after each round of sends), and installing the newest pull
// into a scope (the recv ops, Stop's caller, half-async rounds). See
// communicator.h.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/rpc/rpc_client.h"
#include "trainer/communicator.h"
#include "trainer/stack_rows.h"

namespace oar {
namespace {

// `from` into `*to`: the values into its buffer when it has room of the same
// shape and dtype (Hogwild threads may hold it), else a fresh one.
void Install(Variable& from, Variable* to) {
  if (from.IsType<Tensor>() && to->IsType<Tensor>()) {
    const Tensor& src = from.Get<Tensor>();
    Tensor* dst = to->GetMutable<Tensor>();
    if (dst->initialized() && dst->dtype() == src.dtype() && dst->dims() == src.dims() && dst->Writable()) {
      std::memcpy(dst->raw_data(), src.raw_data(), src.nbytes());
      return;
    }
  }
  *to = std::move(from);
}

}  // namespace

absl::Status Communicator::PullAll() {
  // Every block of every variable at once, then each variable stacked.
  std::map<std::string, std::vector<Variable>> got;
  std::vector<std::shared_ptr<rpc::RpcCall>> calls;
  for (const auto& [name, c] : contexts_.recv) {
    auto& parts = got[name];
    parts.resize(c.blocks.size());
    for (size_t i = 0; i < c.blocks.size(); ++i) {
      calls.push_back(client_->AsyncGetVar(c.epmap[i], c.blocks[i], &parts[i], c.trainer_id, /*no_barrier=*/true));
    }
  }
  OAR_RETURN_IF_ERROR(Annotate(rpc::WaitAll(calls), "communicator: pulling the parameters"));
  std::map<std::string, std::unique_ptr<Variable>> stacked;
  for (auto& [name, parts] : got) {
    auto value = std::make_unique<Variable>();
    if (parts.size() == 1) {
      *value = std::move(parts[0]);
    } else {
      const VarContext& c = contexts_.recv.at(name);
      OAR_RETURN_IF_ERROR(StackRows(parts, c.blocks, c.epmap, value->GetMutable<Tensor>()));
    }
    stacked[name] = std::move(value);
  }
  absl::MutexLock lock(&mu_);
  for (auto& [name, v] : stacked) received_[name] = std::move(v);
  ++counts_.pulls;
  return absl::OkStatus();
}

void Communicator::RecvLoop() {
  auto due = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || !error_.ok() || sent_since_pull_ > options_.min_send_grad_num_before_recv;
  };
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&due));
      if (stopping_ || !error_.ok()) return;
      sent_since_pull_ = 0;
    }
    const absl::Status s = PullAll();
    if (!s.ok()) Fail(s);
  }
}

absl::Status Communicator::TakeReceived(const std::string& name, Variable* out) {
  if (!HasRecvVar(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("communicator: '", name, "' is not a variable a recv op of its program receives"));
  }
  std::unique_ptr<Variable> v;
  {
    absl::MutexLock lock(&mu_);
    OAR_RETURN_IF_ERROR(error_);
    auto it = received_.find(name);
    if (it == received_.end()) return absl::OkStatus();
    v = std::move(it->second);
    received_.erase(it);
  }
  Install(*v, out);
  return absl::OkStatus();
}

absl::Status Communicator::InstallReceived(Scope* scope) {
  for (const auto& [name, c] : contexts_.recv) {
    OAR_RETURN_IF_ERROR(TakeReceived(name, scope->Var(name)));
  }
  return absl::OkStatus();
}

}  // namespace oar
