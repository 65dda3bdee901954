#include "common/elastic/membership.h"

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "glog/logging.h"

namespace oar::elastic {

Membership::Membership(EtcdClient* etcd, MembershipOptions options)
    : etcd_(etcd), options_(std::move(options)), key_(Prefix(options_.job) + options_.name) {}

absl::StatusOr<std::unique_ptr<Membership>> Membership::Join(EtcdClient* etcd, MembershipOptions options) {
  if (options.job.empty() || options.name.empty() || options.job.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("an elastic job's member needs a job id without '/' (got '",
                                                   options.job, "') and a name (got '", options.name, "')"));
  }
  std::unique_ptr<Membership> m(new Membership(etcd, std::move(options)));
  OAR_RETURN_IF_ERROR(m->Register());
  OAR_RETURN_IF_ERROR(m->Relist());
  m->tend_ = std::thread([p = m.get()] { p->Tend(); });
  return m;
}

Membership::~Membership() {
  const absl::Status s = Leave();
  if (!s.ok()) LOG(WARNING) << "leaving the job: " << s;
}

absl::Status Membership::Register() {
  OAR_ASSIGN_OR_RETURN(int64_t lease, etcd_->GrantLease(options_.ttl));
  OAR_ASSIGN_OR_RETURN(bool created, etcd_->Create(key_, options_.value, lease));
  if (!created) {
    (void)etcd_->RevokeLease(lease);
    auto held = etcd_->Get(key_);
    return absl::AlreadyExistsError(
        absl::StrCat("job '", options_.job, "': member '", options_.name, "' is already registered in etcd at ",
                     etcd_->endpoint(), held.ok() && !held->kvs.empty() ? " by " + held->kvs[0].value : "",
                     " (another process with this name is alive, or died less than its lease ago)"));
  }
  absl::MutexLock l(&mu_);
  lease_ = lease;
  return absl::OkStatus();
}

absl::Status Membership::Relist() {
  watch_.reset();  // its thread joined: no event of it lands after the list
  OAR_ASSIGN_OR_RETURN(EtcdRange range, etcd_->GetPrefix(Prefix(options_.job)));
  Members now;
  for (const EtcdKv& kv : range.kvs) now[kv.key.substr(Prefix(options_.job).size())] = kv.value;
  {
    absl::MutexLock l(&mu_);
    for (const auto& [name, value] : now) changes_ += members_.count(name) == 0 ? 1 : 0;
    for (const auto& [name, value] : members_) changes_ += now.count(name) == 0 ? 1 : 0;
    for (const auto& [name, value] : now) ever_.insert(name);
    members_ = std::move(now);
    watch_broken_ = false;
  }
  OAR_ASSIGN_OR_RETURN(watch_, etcd_->WatchPrefix(
                                   Prefix(options_.job), range.revision + 1,
                                   [this](const std::vector<EtcdEvent>& events, int64_t) { Apply(events); },
                                   [this](const absl::Status& why) {
                                     LOG(WARNING) << "job '" << options_.job << "': the watch of its members ended ("
                                                  << why.message() << "); listing them again";
                                     absl::MutexLock l(&mu_);
                                     watch_broken_ = true;
                                   }));
  return absl::OkStatus();
}

void Membership::Apply(const std::vector<EtcdEvent>& events) {
  absl::MutexLock l(&mu_);
  const size_t skip = Prefix(options_.job).size();
  for (const EtcdEvent& e : events) {
    const std::string name = e.kv.key.substr(skip);
    if (e.deleted) {
      changes_ += members_.erase(name);
    } else {
      changes_ += members_.count(name) == 0 ? 1 : 0;
      members_[name] = e.kv.value;
      ever_.insert(name);
    }
  }
}

void Membership::Tend() {
  const absl::Duration period = options_.ttl / 3;
  absl::Time renew_at = absl::Now() + period;
  bool said_unreachable = false;
  while (true) {
    bool relist = false, renew = false;
    int64_t lease = 0;
    {
      absl::MutexLock l(&mu_);
      auto due = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || watch_broken_; };
      mu_.AwaitWithDeadline(absl::Condition(&due), renew_at);
      if (stopping_) return;
      relist = watch_broken_;
      renew = renewing_ && absl::Now() >= renew_at;
      lease = lease_;
    }
    absl::Status s;
    if (renew) {
      s = etcd_->KeepAlive(lease);
      if (absl::IsNotFound(s)) {
        LOG(WARNING) << "job '" << options_.job << "': the lease of member '" << options_.name
                     << "' expired in etcd (cut off from it, or etcd restarted without its data); registering again";
        s = Register();
        if (s.ok()) {
          absl::MutexLock l(&mu_);
          ++reregistrations_;
        }
      }
    }
    if (s.ok() && relist) s = Relist();
    if (!s.ok()) {
      if (!said_unreachable) {
        LOG(WARNING) << "job '" << options_.job << "': member '" << options_.name << "' cannot tend its entry: " << s
                     << "; trying again (a lease unrenewed for " << absl::FormatDuration(options_.ttl)
                     << " removes this member)";
      }
      said_unreachable = true;
      renew_at = absl::Now() + std::min(period, absl::Milliseconds(500));
      if (relist) {
        absl::MutexLock l(&mu_);
        watch_broken_ = true;
      }
      continue;
    }
    if (said_unreachable) LOG(WARNING) << "job '" << options_.job << "': etcd answers again";
    said_unreachable = false;
    if (renew) renew_at = absl::Now() + period;
  }
}

Members Membership::members() const {
  absl::MutexLock l(&mu_);
  return members_;
}

std::set<std::string> Membership::ever() const {
  absl::MutexLock l(&mu_);
  return ever_;
}

int64_t Membership::changes() const {
  absl::MutexLock l(&mu_);
  return changes_;
}

int64_t Membership::lease() const {
  absl::MutexLock l(&mu_);
  return lease_;
}

int64_t Membership::reregistrations() const {
  absl::MutexLock l(&mu_);
  return reregistrations_;
}

bool Membership::AwaitChange(int64_t seen, absl::Duration timeout) const {
  absl::MutexLock l(&mu_);
  auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return changes_ != seen; };
  return mu_.AwaitWithTimeout(absl::Condition(&changed), timeout);
}

bool Membership::WaitFor(const std::function<bool(const Members&)>& holds, absl::Duration timeout) const {
  absl::MutexLock l(&mu_);
  auto held = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return holds(members_); };
  return mu_.AwaitWithTimeout(absl::Condition(&held), timeout);
}

void Membership::StopRenewing() {
  absl::MutexLock l(&mu_);
  renewing_ = false;
}

absl::Status Membership::Leave() {
  int64_t lease;
  {
    absl::MutexLock l(&mu_);
    if (stopping_) return absl::OkStatus();
    stopping_ = true;
    lease = lease_;
  }
  if (tend_.joinable()) tend_.join();
  watch_.reset();
  if (lease == 0) return absl::OkStatus();  // never registered
  const absl::Status s = etcd_->RevokeLease(lease);
  return absl::IsNotFound(s) ? absl::OkStatus() : s;  // expired already: gone all the same
}

absl::StatusOr<bool> Membership::RevokeIf(EtcdClient* etcd, const std::string& job, const std::string& name,
                                          const std::function<bool(const std::string& value)>& is_it) {
  const std::string key = Prefix(job) + name;
  OAR_ASSIGN_OR_RETURN(EtcdRange got, etcd->Get(key));
  if (got.kvs.empty() || !is_it(got.kvs[0].value)) return false;
  if (got.kvs[0].lease == 0) {
    return absl::FailedPreconditionError(absl::StrCat(key, " holds no lease (it was not put by a member)"));
  }
  const absl::Status s = etcd->RevokeLease(got.kvs[0].lease);
  if (!s.ok() && !absl::IsNotFound(s)) return Annotate(s, key);
  return true;
}

}  // namespace oar::elastic
