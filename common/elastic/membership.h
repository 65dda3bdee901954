// Membership: one process's entry in an elastic job's member list, kept in
// etcd under /oar/<job>/members/<name> with a lease of `ttl`, and the list
// as this process sees it. A tending thread renews the lease every ttl/3;
// a process that dies (or is cut off from etcd for longer than ttl) loses
// its lease and etcd deletes its key, so every other member's view drops
// it. If etcd lost the lease (restarted without its data, or this process
// was cut off), the thread registers again under a new lease, saying so.
// The view is a list (Range) followed by a watch from the list's revision;
// a broken watch (etcd restarting) is replaced by a fresh list and watch.
//
//   OAR_ASSIGN_OR_RETURN(auto me, Membership::Join(etcd.get(), {.job = "ctr", .name = "trainer/1",
//                                                              .value = "10.0.0.3:7164", .ttl = absl::Seconds(10)}));
//   me->WaitFor([](const Members& m) { return m.size() >= 3; }, absl::Minutes(1));
//
// Thread-safety: every method may be called from any thread; the destructor
// (which leaves: revokes the lease) joins the tending thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/elastic/etcd_client.h"

namespace oar::elastic {

using Members = std::map<std::string, std::string>;  // name -> value

struct MembershipOptions {
  std::string job;    // the job id: keys under /oar/<job>/members/
  std::string name;   // this member's, e.g. "trainer/1"; unique in the job
  std::string value;  // what others read of it, e.g. its endpoint
  absl::Duration ttl = absl::Seconds(10);
};

class Membership {
 public:
  // Registers (refusing a name a live member holds: AlreadyExists) and
  // reads the list; the tending thread then runs until Leave.
  static absl::StatusOr<std::unique_ptr<Membership>> Join(EtcdClient* etcd, MembershipOptions options);
  ~Membership();

  static std::string Prefix(const std::string& job) { return "/oar/" + job + "/members/"; }

  Members members() const;
  // Every name that was a member while this one watched (one that joined
  // and left between two looks at members() included).
  std::set<std::string> ever() const;
  // Changes of the list seen (joins and leaves, this one's included).
  int64_t changes() const;
  // The lease this member's key holds now (a new one after it registered again).
  int64_t lease() const;
  // Times this member registered again after losing its lease.
  int64_t reregistrations() const;
  // Blocks until changes() differs from `seen` or `timeout`; whether it did.
  bool AwaitChange(int64_t seen, absl::Duration timeout) const;
  // Blocks until `holds(members())` or `timeout`; whether it held.
  bool WaitFor(const std::function<bool(const Members&)>& holds, absl::Duration timeout) const;
  // Stops tending and revokes the lease: the others see this member leave.
  absl::Status Leave();
  // Ends another member's entry `name` of `job` (revokes its lease, so
  // every view drops it and its leased keys go) if it exists and its value
  // passes `is_it` (the process that was meant, not a successor on the same
  // name): true when it did. A lease already gone counts as done.
  static absl::StatusOr<bool> RevokeIf(EtcdClient* etcd, const std::string& job, const std::string& name,
                                       const std::function<bool(const std::string& value)>& is_it);
  // Testing: stops renewing the lease (as a process cut off from etcd),
  // leaving the view tended.
  void StopRenewing();

 private:
  Membership(EtcdClient* etcd, MembershipOptions options);
  absl::Status Register();  // a lease and the key
  absl::Status Relist();    // the list and a watch from it
  void Tend();
  void Apply(const std::vector<EtcdEvent>& events);

  EtcdClient* etcd_;
  const MembershipOptions options_;
  const std::string key_;
  mutable absl::Mutex mu_;
  Members members_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> ever_ ABSL_GUARDED_BY(mu_);
  int64_t changes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t reregistrations_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t lease_ ABSL_GUARDED_BY(mu_) = 0;
  bool watch_broken_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool renewing_ ABSL_GUARDED_BY(mu_) = true;
  std::unique_ptr<EtcdWatch> watch_;  // the tending thread's (and Join's, before it starts)
  std::thread tend_;
};

}  // namespace oar::elastic
