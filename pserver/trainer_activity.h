// TrainerActivity: what a pserver knows of its trainers' liveness — when
// it last heard from each and which have completed — and the async
// pserver's loop, which is waiting on it: an async step has no phases to
// drive (each gradient is applied by the handler it arrives on), so Run
// waits until every trainer has completed, and fails naming the trainers
// that went silent for the idle bound without completing (dead or hung).
//
//   TrainerActivity activity(fanin);
//   activity.Heard(trainer);                       // every message
//   if (activity.Complete(trainer)) LOG(INFO) << "trainer completed";
//   absl::Status s = activity.AwaitAllCompleted(idle, [&] { return stopped(); });
//
// An elastic job's trainers come and go: with `set_members` (the ids whose
// leases are alive in etcd and every one that ever was, asked on every
// poll) the loop ends once some
// trainer completed and every trainer that was ever a member has completed
// or left; the idle bound applies to members only, and each join and each
// leave without COMPLETE is logged once. Fewer trainers than the job's
// `min` (members and completed ones: at the start, or after deaths) for
// the idle bound stops it with the reason. A member whose entry's value
// changed between two looks (it died and a new process took its id) is
// counted as a leave and a join.
//
// Thread-safety: all methods may be called concurrently; its lock is a
// leaf, and `stop` is called without it.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/framework/run_env.h"

namespace oar {

class TrainerActivity {
 public:
  // Trainers 0..fanin-1, each heard from now.
  explicit TrainerActivity(int fanin);

  // A message from `trainer` (in range: the caller checked it).
  void Heard(int trainer);
  // Its COMPLETE; true the first time.
  bool Complete(int trainer);
  bool completed(int trainer) const;
  std::set<int> completed() const;
  // `stop` of a waiting AwaitAllCompleted may have turned true: look now
  // rather than at the next poll.
  void Wake();

  // Returns OK once every trainer has completed or `stop()` is true
  // (looked at on every Wake and at least every 100 ms);
  // DeadlineExceeded "trainer(s) 1, 3 sent nothing for 3s and never
  // completed ..." once some went silent for `idle` without completing.
  absl::Status AwaitAllCompleted(absl::Duration idle, const std::function<bool()>& stop);

  // Before AwaitAllCompleted: the trainers are those `members` names (ids
  // below fanin), not 0..fanin-1.
  void set_members(std::function<TrainerMembers()> members) { members_fn_ = std::move(members); }

 private:
  const int fanin_;
  mutable absl::Mutex mu_;
  std::vector<absl::Time> last_ ABSL_GUARDED_BY(mu_);  // per trainer
  std::set<int> completed_ ABSL_GUARDED_BY(mu_);
  uint64_t wakes_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<TrainerMembers()> members_fn_;  // set before the loop runs
  std::set<int> ever_ ABSL_GUARDED_BY(mu_);     // every id that was a member
  std::set<int> left_ ABSL_GUARDED_BY(mu_);
  // Each live member's entry value ("host pid N") as last seen: another
  // value on the same id is a new process that replaced a dead one.
  std::map<int, std::string> value_ ABSL_GUARDED_BY(mu_);
  // Since when fewer than `min` trainers are members or completed.
  absl::Time below_min_since_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool had_min_ ABSL_GUARDED_BY(mu_) = false;  // it had `min` trainers once

  // Elastic: asks members_fn_, logs joins and leaves; whether the job is
  // done; an error once it had too few trainers for `idle`.
  absl::StatusOr<bool> UpdateMembers(absl::Time now, absl::Duration idle, std::vector<int>* silent);
};

}  // namespace oar
