// DepartureWatch: an elastic job's sync pserver's eye on its trainers'
// leases. On each change of the job's member list (etcd's watch wakes it
// through the view's await_change) and at least every 100 ms, it reads the
// list (`members`), tells the StepBarrier who is a member, and takes out of
// the steps each joined trainer whose entry is gone (its lease ran out or
// was revoked: it died, was told to stop, or was cut off from etcd):
// StepBarrier::Depart freezes what this pserver saw of it, `agree` (the
// pservers' records in etcd) turns every pserver's view into one last
// step, and StepBarrier::Resolve applies it, so every pserver applies the
// same steps with the trainer's gradients and none without. A trainer
// registers before it joins, so its entry is usually seen before its JOIN;
// one whose entry was never seen here is given 1 s (the watch's lag)
// before its absence counts. An agreement that fails ends the barrier with
// the reason.
//
// A trainer lost without a word (its machine gone, the network cut) keeps
// its lease until it runs out, and etcd notices that only on its next
// expiry check (every 0.5 s). So the watch also takes out (the view's
// take_out: revokes its lease) a trainer the step has waited on, silent,
// for the lease's TTL since the others arrived (StepBarrier::Silent): the
// job goes on within the TTL and one step of the loss, and a stuck
// trainer is treated as lost rather than stopping the job.
//
//   DepartureWatch watch(barrier, members, agree, "pserver 10.0.0.2:6174");
//   watch.Start();
//   ... the sync loop runs ...
//   watch.Stop();
//
// Thread-safety: Start and Stop from the pserver's thread; the watch runs
// on its own thread.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/framework/run_env.h"
#include "pserver/step_barrier.h"

namespace oar {

class DepartureWatch {
 public:
  // Each must outlive the watch.
  DepartureWatch(StepBarrier* barrier, std::function<TrainerMembers()> members, AgreeOnLeave agree, std::string name)
      : barrier_(barrier), members_(std::move(members)), agree_(std::move(agree)), name_(std::move(name)) {}
  ~DepartureWatch() { Stop(); }

  void Start();
  void Stop();
  // One look (what the thread does on each change of the member list, and
  // every 100 ms); for tests. Returns the view's await_change.
  std::function<void(absl::Duration)> Look();

 private:
  void Leave(int trainer, const StepBarrier::Joined& joined);
  void TakeOutSilent(const TrainerMembers& m, absl::Time now);

  StepBarrier* const barrier_;
  const std::function<TrainerMembers()> members_;
  const AgreeOnLeave agree_;
  const std::string name_;
  std::set<std::pair<int, std::string>> seen_;       // (trainer, member value) seen in the list; the thread's
  std::set<std::pair<int, std::string>> taken_out_;  // (trainer, member value) asked to leave; the thread's
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace oar
