#include "common/framework/place_transfer.h"

#include <set>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/base/status.h"
#include "common/framework/selected_rows.h"
#include "glog/logging.h"

namespace oar {
namespace {

bool Readable(const Tensor& t, const Place& kernel_place) {
  if (!t.initialized()) return true;  // nothing to move; the kernel reports a missing input
  if (kernel_place.is_host()) return t.place().is_host();
  return t.place() == kernel_place;
}

absl::Status Move(const OpDesc& op, const std::string& name, const Place& place, Tensor* t) {
  Tensor moved;
  absl::Status s = t->CopyTo(place, &moved);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat(op.type, ": moving input '", name, "' from ", t->place().ToString(),
                                               " to ", place.ToString(), ": ", s.message()));
  }
  *t = std::move(moved);
  return absl::OkStatus();
}

}  // namespace

absl::Status MoveInputsTo(const OpDesc& op, const OpBinding& binding, const Place& place) {
  for (const BoundSlot& slot : binding.inputs) {
    // Its kernels read it where it lies; a CPU kernel (a host-side op's)
    // still gets host memory.
    if (slot.read_anywhere && !place.is_host()) continue;
    const std::vector<std::string>& names = op.inputs.at(*slot.name);
    for (size_t i = 0; i < slot.vars.size(); ++i) {
      Variable* v = slot.vars[i];
      if (v == nullptr) continue;
      if (v->IsType<Tensor>()) {
        Tensor* t = v->GetMutable<Tensor>();
        if (!Readable(*t, place)) OAR_RETURN_IF_ERROR(Move(op, names[i], place, t));
      } else if (v->IsType<SelectedRows>()) {
        Tensor* t = &v->GetMutable<SelectedRows>()->value;
        if (!Readable(*t, place)) OAR_RETURN_IF_ERROR(Move(op, names[i], place, t));
      }
    }
  }
  return absl::OkStatus();
}

namespace {
constexpr absl::string_view kRunOnHostUrl = "oar/run-on-host-instead";
}  // namespace

absl::Status RunOnHostInstead(const OpDesc& op, absl::string_view why) {
  absl::Status s = absl::UnimplementedError(absl::StrCat(op.type, ": no GPU kernel for this call (", why, ")"));
  s.SetPayload(kRunOnHostUrl, absl::Cord("1"));
  return s;
}

bool IsRunOnHostInstead(const absl::Status& s) { return s.GetPayload(kRunOnHostUrl).has_value(); }

void SayRunsOnHostOnce(const std::string& key, absl::string_view message) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* said = new std::set<std::string>();
  absl::MutexLock lock(&mu);
  if (said->insert(key).second) LOG(WARNING) << message << "; it runs its CPU kernel on the host";
}

}  // namespace oar
