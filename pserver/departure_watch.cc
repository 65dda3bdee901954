#include "pserver/departure_watch.h"

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "glog/logging.h"
#include "pserver/pserver_metrics.h"

namespace oar {

void DepartureWatch::Start() {
  thread_ = std::thread([this] {
    std::function<void(absl::Duration)> await_change;
    for (;;) {
      // Woken by a change of the member list (the etcd watch), else looks
      // every 100 ms (a joiner's grace, or a view that cannot wait).
      if (await_change) await_change(absl::Milliseconds(100));
      if (await_change ? stop_.HasBeenNotified() : stop_.WaitForNotificationWithTimeout(absl::Milliseconds(100))) {
        return;
      }
      await_change = Look();
    }
  });
}

void DepartureWatch::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

std::function<void(absl::Duration)> DepartureWatch::Look() {
  const TrainerMembers m = members_();
  barrier_->SetMembers(m.live);
  const absl::Time now = absl::Now();
  for (const auto& [t, value] : m.values) seen_.emplace(t, value);  // registered, joined or not yet
  for (const auto& [t, joined] : barrier_->joined()) {
    auto value = m.values.find(t);
    const std::pair<int, std::string> key(t, joined.member);
    if (value != m.values.end() && value->second == joined.member) {
      seen_.insert(key);
      continue;
    }
    if (!seen_.count(key) && now - joined.at < absl::Seconds(1)) continue;  // the list may lag its join
    Leave(t, joined);
  }
  TakeOutSilent(m, now);
  return m.await_change;
}

void DepartureWatch::TakeOutSilent(const TrainerMembers& m, absl::Time now) {
  if (!m.take_out) return;
  const std::map<int, StepBarrier::Joined> joined = barrier_->joined();
  for (const auto& [t, silent] : barrier_->Silent(now)) {
    auto j = joined.find(t);
    auto value = m.values.find(t);
    // Gone from the list already (the departure above takes it out), or
    // its entry is another process's (its successor's JOIN is coming).
    if (j == joined.end() || value == m.values.end() || value->second != j->second.member) continue;
    if (!taken_out_.insert({t, value->second}).second) continue;  // asked once per process
    LOG(WARNING) << name_ << ": trainer " << t << " (" << value->second << ") sent nothing for "
                 << absl::FormatDuration(absl::Trunc(silent, absl::Milliseconds(1))) << " (its lease's TTL) while step "
                 << barrier_->step()
                 << " waited on it after the other trainers arrived: it is lost or stuck; taking it out of the job "
                    "(revoking its lease in etcd)";
    if (absl::Status s = m.take_out(t, value->second); !s.ok()) {
      LOG(WARNING) << name_ << ": could not take trainer " << t << " out (" << s.message()
                   << "); its lease will run out";
    } else {
      GetPserverMetrics().trainers_taken_out->Add();
    }
  }
}

void DepartureWatch::Leave(int trainer, const StepBarrier::Joined& joined) {
  const std::optional<StepBarrier::Departure> d = barrier_->Depart(trainer);
  if (!d.has_value()) return;
  const LeaveRecord mine{.trainer = trainer,
                         .entry = d->entry,
                         .member = joined.member,
                         .step = d->step,
                         .contributed = d->contributed,
                         .contributed_before = d->contributed_before};
  const absl::Time asked = absl::Now();
  const absl::StatusOr<int64_t> last = agree_(mine);
  const std::string took = absl::FormatDuration(absl::Trunc(absl::Now() - asked, absl::Milliseconds(1)));
  if (!last.ok()) {
    barrier_->End(Annotate(last.status(), absl::StrCat(name_,
                                                       ": agreeing with the other pservers on the steps of "
                                                       "trainer ",
                                                       trainer, ", which left the job")));
    return;
  }
  barrier_->Resolve(trainer, static_cast<int>(*last));
  GetPserverMetrics().trainer_leaves->Add();
  if (*last < d->entry) {
    LOG(INFO) << name_ << ": trainer " << trainer << " left the job before contributing to a step (it joined at step "
              << d->entry << "; the pservers agreed in " << took << ")";
  } else {
    LOG(INFO) << name_ << ": trainer " << trainer << " left the job; its gradients count through step " << *last
              << " (it joined at step " << d->entry << "; the pservers agreed in " << took << ")";
  }
}

}  // namespace oar
