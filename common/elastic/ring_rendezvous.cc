#include "common/elastic/ring_rendezvous.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/base/status.h"
#include "common/elastic/membership.h"
#include "glog/logging.h"

namespace oar::elastic {

int RingGeneration::RankOf(int trainer) const {
  auto it = std::find(trainers.begin(), trainers.end(), trainer);
  return it == trainers.end() ? -1 : static_cast<int>(it - trainers.begin());
}

absl::StatusOr<std::set<int>> LiveTrainers(EtcdClient* etcd, const std::string& job) {
  const std::string prefix = Membership::Prefix(job) + "trainer/";
  OAR_ASSIGN_OR_RETURN(const EtcdRange r, etcd->GetPrefix(prefix));
  std::set<int> ids;
  for (const EtcdKv& kv : r.kvs) {
    int id = 0;
    if (absl::SimpleAtoi(kv.key.substr(prefix.size()), &id)) ids.insert(id);
  }
  return ids;
}

namespace {

struct GenKey {
  int64_t number = 0;
  bool sealed = true;  // no key yet: as if generation 0 were sealed, empty
  std::vector<int> ids;
  int64_t mod_revision = 0;  // 0: absent
};

std::string Encode(int64_t number, bool sealed, const std::vector<int>& ids) {
  return absl::StrCat(number, sealed ? " sealed " : " forming ", absl::StrJoin(ids, ","));
}

absl::StatusOr<GenKey> ReadGen(EtcdClient* etcd, const std::string& key) {
  OAR_ASSIGN_OR_RETURN(const EtcdRange r, etcd->Get(key));
  GenKey g;
  if (r.kvs.empty()) return g;
  g.mod_revision = r.kvs[0].mod_revision;
  const std::vector<std::string> parts = absl::StrSplit(r.kvs[0].value, ' ');
  bool ok =
      parts.size() == 3 && absl::SimpleAtoi(parts[0], &g.number) && (parts[1] == "sealed" || parts[1] == "forming");
  if (ok) {
    g.sealed = parts[1] == "sealed";
    for (absl::string_view s : absl::StrSplit(parts[2], ',', absl::SkipEmpty())) {
      int id = 0;
      ok = ok && absl::SimpleAtoi(s, &id);
      g.ids.push_back(id);
    }
  }
  if (!ok) return absl::DataLossError(absl::StrCat(key, " holds '", r.kvs[0].value, "', not a ring generation"));
  return g;
}

bool Holds(const std::vector<int>& ids, int id) { return std::find(ids.begin(), ids.end(), id) != ids.end(); }

// Takes out the trainers a generation waits on (`missing`) that were in
// the ring this one left and are still silent `o.silence` after it left
// (the header's rule); `taken`: those this call took out, asked once each.
absl::Status TakeOutSilent(EtcdClient* etcd, const RendezvousOptions& o, const std::string& ready_base,
                           const std::vector<int>& missing, std::set<int>* taken) {
  if (!o.left.has_value()) return absl::OkStatus();  // a joiner's wait on trainers training on
  const absl::Duration silent = absl::Now() - o.left->at;
  for (int id : missing) {
    const bool timed_out = Holds(o.left->silent, id);  // by the ring's own wait
    if (!Holds(o.left->trainers, id) || (!timed_out && silent < o.silence) || !taken->insert(id).second) continue;
    // The process that was in that ring: its ready key's value (gone with
    // its lease, if that went).
    OAR_ASSIGN_OR_RETURN(const EtcdRange was, etcd->Get(absl::StrCat(ready_base, o.left->number, "/", id)));
    if (was.kvs.empty()) continue;
    const std::string process = was.kvs[0].value;
    // Said ready to a later generation: it went on, in a ring without this
    // trainer (the straggler here is this one, back from a stop).
    OAR_ASSIGN_OR_RETURN(const EtcdRange readies, etcd->GetPrefix(ready_base));
    bool went_on = false;
    for (const EtcdKv& kv : readies.kvs) {
      const std::vector<std::string> at = absl::StrSplit(kv.key.substr(ready_base.size()), '/');
      int64_t n = 0;
      went_on |= at.size() == 2 && at[1] == absl::StrCat(id) && absl::SimpleAtoi(at[0], &n) && n > o.left->number &&
                 kv.value == process;
    }
    if (went_on) continue;
    OAR_ASSIGN_OR_RETURN(const bool revoked, Membership::RevokeIf(etcd, o.job, absl::StrCat("trainer/", id),
                                                                  [&](const std::string& v) { return v == process; }));
    if (!revoked) continue;
    const std::string why = timed_out ? "did not come to that ring's collective within its timeout (the lease's TTL)"
                                      : absl::StrCat("has not said ready for the next ring in ",
                                                     absl::FormatDuration(absl::Trunc(silent, absl::Milliseconds(1))),
                                                     " (the lease's TTL) since this trainer left that ring");
    LOG(WARNING) << "trainer " << o.trainer << ": trainer " << id << " (" << process << ") of ring " << o.left->number
                 << " " << why << ": it is lost or stuck; taking it out of the job (revoked its lease in etcd)";
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RingGeneration> NextRingGeneration(EtcdClient* etcd, const RendezvousOptions& o, int64_t after,
                                                  absl::Duration timeout) {
  const std::string base = absl::StrCat("/oar/", o.job, "/ring/");
  const std::string gen_key = base + "gen";
  auto ready_prefix = [&](int64_t n) { return absl::StrCat(base, "ready/", n, "/"); };
  auto live = [&]() -> absl::StatusOr<std::set<int>> { return o.live ? o.live() : LiveTrainers(etcd, o.job); };
  const absl::Time deadline = absl::Now() + timeout;
  std::string waiting = "a generation to be proposed";  // what the last look waited for
  int64_t said_ready = -1;
  std::set<int> taken;  // trainers of the ring it left that this call took out
  while (true) {
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("trainer ", o.trainer, ": no ring formed within ",
                                                      absl::FormatDuration(timeout), ": waited for ", waiting));
    }
    OAR_ASSIGN_OR_RETURN(const GenKey g, ReadGen(etcd, gen_key));
    OAR_ASSIGN_OR_RETURN(const std::set<int> alive, live());
    const std::vector<int> live_ids(alive.begin(), alive.end());
    auto propose = [&]() -> absl::Status {
      if (!alive.contains(o.trainer)) {  // its own entry is being registered again: wait for it
        waiting = "this trainer's own entry in the member list";
        absl::SleepFor(o.poll);
        return absl::OkStatus();
      }
      const std::string v = Encode(g.number + 1, false, live_ids);
      if (g.mod_revision == 0) return etcd->Create(gen_key, v).status();
      return etcd->CompareAndPut(gen_key, g.mod_revision, v).status();
    };
    if (g.sealed) {
      if (g.number > after && Holds(g.ids, o.trainer)) {
        // Sealed with this process's ready key (not an earlier process's on its id).
        OAR_ASSIGN_OR_RETURN(const EtcdRange mine, etcd->Get(absl::StrCat(ready_prefix(g.number), o.trainer)));
        if (!mine.kvs.empty() && mine.kvs[0].value == o.value) return RingGeneration{g.number, g.ids};
      }
      OAR_RETURN_IF_ERROR(propose());
      continue;
    }
    bool gone = false;
    for (int id : g.ids) gone |= !alive.contains(id);
    if (gone || !Holds(g.ids, o.trainer)) {
      OAR_RETURN_IF_ERROR(propose());
      continue;
    }
    if (said_ready != g.number) {
      const absl::Status put =
          etcd->Put(absl::StrCat(ready_prefix(g.number), o.trainer), o.value, o.lease ? o.lease() : 0).status();
      if (absl::IsNotFound(put) || absl::StrContains(put.message(), "lease not found")) {
        waiting = "this trainer's new lease (its old one ran out)";
        absl::SleepFor(o.poll);
        continue;
      }
      OAR_RETURN_IF_ERROR(put);
      said_ready = g.number;
    }
    OAR_ASSIGN_OR_RETURN(const EtcdRange ready, etcd->GetPrefix(ready_prefix(g.number)));
    std::set<int> have;
    for (const EtcdKv& kv : ready.kvs) {
      int id = 0;
      if (absl::SimpleAtoi(kv.key.substr(ready_prefix(g.number).size()), &id)) have.insert(id);
    }
    std::vector<int> missing;
    for (int id : g.ids) {
      if (!have.contains(id)) missing.push_back(id);
    }
    if (missing.empty() && static_cast<int>(g.ids.size()) >= o.min_trainers) {
      OAR_RETURN_IF_ERROR(etcd->CompareAndPut(gen_key, g.mod_revision, Encode(g.number, true, g.ids)).status());
      continue;
    }
    OAR_RETURN_IF_ERROR(TakeOutSilent(etcd, o, absl::StrCat(base, "ready/"), missing, &taken));
    waiting = missing.empty()
                  ? absl::StrCat("the job's fewest trainers (--trainers MIN:MAX): ", g.ids.size(), " of ",
                                 o.min_trainers, " live")
                  : absl::StrCat("trainer(s) ", absl::StrJoin(missing, ", "), " of generation ", g.number,
                                 " to say ready (they train on to their next commit, or are lost or stuck: out "
                                 "once their lease runs out, or the lease's TTL after they left a ring with this "
                                 "trainer)");
    absl::SleepFor(o.poll);
  }
}

}  // namespace oar::elastic
