#include "common/elastic/ring_rendezvous.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/base/status.h"
#include "common/elastic/membership.h"

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
    waiting = missing.empty()
                  ? absl::StrCat("the job's fewest trainers (--trainers MIN:MAX): ", g.ids.size(), " of ",
                                 o.min_trainers, " live")
                  : absl::StrCat("trainer(s) ", absl::StrJoin(missing, ", "), " of generation ", g.number,
                                 " to say ready (they train on to their next commit, or their lease runs out)");
    absl::SleepFor(o.poll);
  }
}

}  // namespace oar::elastic
