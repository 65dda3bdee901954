#include "cli/elastic_job.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <future>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cli/chunk_report.h"
#include "cli/command.h"
#include "cli/rpc_flags.h"
#include "cli/trainers_flag.h"
#include "common/base/flag_refusal.h"
#include "common/base/status.h"
#include "common/elastic/leave_agreement.h"
#include "common/metrics/metrics.h"
#include "gflags/gflags.h"

DEFINE_string(
    elastic_server, "",
    "etcd://HOST:PORT of the etcd that keeps an elastic job's members and data chunks (pserver mode) or rings "
    "(nccl2 mode): "
    "trainers may then join a running job and leave or die; each registers under a lease of "
    "--rpc_deadline (default: PADDLE_ELASTIC_SERVER)");
DEFINE_string(job_id, "oar",
              "with --elastic_server: the job's name, the prefix of its keys in etcd (/oar/<job_id>/) (default: "
              "PADDLE_ELASTIC_JOB_ID, else oar)");
DEFINE_int32(elastic_chunks, 0,
             "with --elastic_server: each epoch's data is cut into this many chunks, each trained once by whichever "
             "trainer takes it; 0: 4 per trainer slot (4 x PADDLE_TRAINERS_NUM)");
DEFINE_validator(elastic_chunks, [](const char*, int32_t v) {
  if (v >= 0) return true;
  return oar::RefuseFlagValue("give a positive number of chunks, or 0 for 4 per trainer slot");
});

DECLARE_string(trainers);  // cli/trainers_flag.cc

namespace oar::cli {

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

std::string ElasticServer() {
  return FLAGS_elastic_server.empty() ? Env("PADDLE_ELASTIC_SERVER") : FLAGS_elastic_server;
}

// Written by a pserver whose job ended well.
std::string DoneKey(const std::string& job) { return absl::StrCat("/oar/", job, "/done"); }

}  // namespace

std::string ElasticJobId() {
  const std::string env = Env("PADDLE_ELASTIC_JOB_ID");
  return FlagGiven("job_id") || env.empty() ? FLAGS_job_id : env;
}

namespace {

// MIN of --trainers MIN:MAX or PADDLE_ELASTIC_NP; its MAX must be the job's
// trainer slots.
absl::StatusOr<int> MinTrainers(int slots) {
  TrainerRange r = TrainersFromFlag();
  std::string said = absl::StrCat("--trainers ", FLAGS_trainers);
  if (!r.range && !Env("PADDLE_ELASTIC_NP").empty()) {
    OAR_ASSIGN_OR_RETURN(r, ParseTrainerRange(Env("PADDLE_ELASTIC_NP"), "PADDLE_ELASTIC_NP"));
    said = absl::StrCat("PADDLE_ELASTIC_NP=", Env("PADDLE_ELASTIC_NP"));
  } else if (!r.range) {
    return 1;
  }
  if (r.max != slots) {
    return absl::InvalidArgumentError(
        absl::StrCat(said, " but the job has ", slots, " trainer slots (PADDLE_TRAINERS_NUM): make MAX the same"));
  }
  return r.min;
}

}  // namespace

bool ElasticRequested() { return !ElasticServer().empty(); }

int64_t ElasticChunks(int slots, int64_t files) {
  if (FLAGS_elastic_chunks > 0) return FLAGS_elastic_chunks;
  const int64_t per_slot = 4 * static_cast<int64_t>(slots);
  return files > 0 ? std::min(files, per_slot) : per_slot;
}

TrainerMembers TrainersOf(const ElasticJob& job) {
  const elastic::Membership& m = *job.me;
  auto id_of = [](const std::string& name, int* id) {
    return name.rfind("trainer/", 0) == 0 && absl::SimpleAtoi(name.substr(8), id);
  };
  TrainerMembers out;
  // Read first: a change while the list is read wakes the next wait at once.
  out.await_change = [&m, seen = m.changes()](absl::Duration timeout) { m.AwaitChange(seen, timeout); };
  int id = 0;
  for (const auto& [name, value] : m.members()) {
    if (!id_of(name, &id)) continue;
    out.live.insert(id);
    out.values[id] = value;
  }
  for (const std::string& name : m.ever()) {
    if (id_of(name, &id)) out.ever.insert(id);
  }
  out.min = job.min_trainers;
  out.take_out = [etcd = job.etcd.get(), job_id = ElasticJobId()](int t, const std::string& value) {
    return elastic::Membership::RevokeIf(etcd, job_id, absl::StrCat("trainer/", t),
                                         [&value](const std::string& v) { return v == value; })
        .status();
  };
  return out;
}

absl::Status MarkElasticJobDone(const ElasticJob& job) {
  return job.etcd->Put(DoneKey(ElasticJobId()), job.member).status();
}

absl::StatusOr<bool> ElasticJobOver(const ElasticJob& job) {
  OAR_ASSIGN_OR_RETURN(const elastic::EtcdRange over, job.etcd->Get(DoneKey(ElasticJobId())));
  return !over.kvs.empty();
}

AgreeOnLeave LeaveAgreement(ElasticJob* job, const RoleEnv& env) {
  const int pservers = static_cast<int>(env.pservers.size());
  const int index = static_cast<int>(std::find(env.pservers.begin(), env.pservers.end(), env.current_endpoint) -
                                     env.pservers.begin());
  return [job, pservers, index](const LeaveRecord& mine) -> absl::StatusOr<int64_t> {
    std::string process = mine.member;  // "host pid N": one key segment
    std::replace(process.begin(), process.end(), '/', '_');
    std::replace(process.begin(), process.end(), ' ', '_');
    return elastic::AgreeOnLastStep(
        job->etcd.get(), ElasticJobId(), absl::StrCat("trainer", mine.trainer, "/", mine.entry, "/", process), index,
        pservers, {.step = mine.step, .contributed = mine.contributed, .contributed_before = mine.contributed_before},
        mine.entry - 1, absl::Milliseconds(FLAGS_rpc_deadline));
  };
}

bool EvaluatesTheJob(const ElasticJob* job, int trainer_id) {
  if (job == nullptr) return trainer_id == 0;
  const std::set<int> live = TrainersOf(*job).live;
  return live.empty() || *live.begin() >= trainer_id;
}

absl::StatusOr<std::unique_ptr<ElasticJob>> JoinElasticJob(const RoleEnv& env) {
  auto job = std::make_unique<ElasticJob>();
  OAR_ASSIGN_OR_RETURN(job->min_trainers, MinTrainers(env.trainers));
  const absl::Duration ttl = absl::Milliseconds(FLAGS_rpc_deadline);
  const std::string server = ElasticServer(), job_id = ElasticJobId();
  OAR_ASSIGN_OR_RETURN(job->etcd, elastic::EtcdClient::Connect(server, absl::Seconds(10)));
  const bool trainer = env.role == RoleEnv::Role::kTrainer;
  job->member = trainer ? absl::StrCat("trainer/", env.trainer_id)
                        : absl::StrCat("pserver/", env.current_endpoint.empty() ? "?" : env.current_endpoint);
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  const std::string value = absl::StrCat(host, " pid ", ::getpid());
  job->value = value;
  const absl::Time until = absl::Now() + ttl;
  bool said = false;
  while (true) {
    auto me =
        elastic::Membership::Join(job->etcd.get(), {.job = job_id, .name = job->member, .value = value, .ttl = ttl});
    if (me.ok()) {
      job->me = std::move(*me);
      break;
    }
    if (!absl::IsAlreadyExists(me.status()) || absl::Now() >= until) {
      return Annotate(me.status(), absl::StrCat("joining elastic job '", job_id, "' at ", server));
    }
    if (!said)
      std::fprintf(stderr, "%s; waiting for its lease to run out\n", std::string(me.status().message()).c_str());
    said = true;
    absl::SleepFor(absl::Milliseconds(500));
  }
  if (trainer) {
    OAR_ASSIGN_OR_RETURN(const elastic::EtcdRange over, job->etcd->Get(DoneKey(job_id)));
    if (!over.kvs.empty()) {
      job->done = true;
      std::fprintf(stderr,
                   "%s: elastic job '%s' is over (%s ended it); nothing to train (a new job needs a --job_id of its "
                   "own)\n",
                   job->member.c_str(), job_id.c_str(), over.kvs[0].value.c_str());
      return job;
    }
  }
  std::fprintf(stderr, "%s joined elastic job '%s' (etcd %s, lease %s, trainers %d:%d)\n", job->member.c_str(),
               job_id.c_str(), job->etcd->endpoint().c_str(), absl::FormatDuration(ttl).c_str(), job->min_trainers,
               env.trainers);
  if (trainer) {
    job->chunks = ElasticChunks(env.trainers);
    job->tasks = std::make_unique<elastic::TaskQueue>(job->etcd.get(), job_id, job->member, job->me->lease());
  }
  return job;
}

namespace {

// Until the job has its fewest trainers as members, up to --rpc_deadline —
// at its start only: a trainer that joins a job under way (its first epoch
// opened) goes straight to work, as the others may be done and gone (the
// pservers hold a running job to MIN).
absl::Status AwaitMinTrainers(const ElasticJob& job, int trainer_id) {
  const absl::StatusOr<elastic::EpochProgress> first = job.tasks->Progress(1);
  if (first.ok()) return absl::OkStatus();
  if (!absl::IsFailedPrecondition(first.status())) return first.status();  // not "not opened yet": etcd's error
  const absl::Time until = absl::Now() + absl::Milliseconds(FLAGS_rpc_deadline);
  bool said = false;
  while (true) {
    const size_t live = TrainersOf(job).live.size();
    if (static_cast<int>(live) >= job.min_trainers) break;
    if (absl::Now() >= until) {
      return absl::UnavailableError(absl::StrCat("trainer ", trainer_id, ": only ", live, " trainer(s) joined in ",
                                                 absl::FormatDuration(absl::Milliseconds(FLAGS_rpc_deadline)),
                                                 "; the job needs ", job.min_trainers,
                                                 " to start (--trainers MIN:MAX): start more, or lower MIN"));
    }
    if (!said) {
      std::fprintf(stderr, "trainer %d: %zu of the %d trainers the job needs have joined; waiting for the others\n",
                   trainer_id, live, job.min_trainers);
    }
    said = true;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<bool> TrainElasticEpochs(ElasticJob* job, int trainer_id, int epochs, const ChunkTrainer& train,
                                        const std::function<absl::Status()>& idle) {
  OAR_RETURN_IF_ERROR(AwaitMinTrainers(*job, trainer_id));
  elastic::TaskQueue& q = *job->tasks;
  const ChunkMetrics& metrics = GetChunkMetrics();
  ChunkReport report(trainer_id, metrics);
  // Trains one chunk of `epoch` that `take` hands out; false when none.
  auto one =
      [&](int epoch,
          const std::function<absl::StatusOr<std::optional<int64_t>>()>& take) -> absl::StatusOr<std::optional<bool>> {
    const int64_t lease = job->me->lease();
    q.set_lease(lease);  // a new one if it registered again
    const int64_t requeued = q.requeued();
    absl::StatusOr<std::optional<int64_t>> took = take();
    if (!took.ok() && absl::StrContains(took.status().message(), "lease not found")) {
      // Cut off from etcd past its lease: the membership registers again
      // under a new one, which its claims then take.
      const absl::Time until = absl::Now() + absl::Milliseconds(FLAGS_rpc_deadline);
      while (job->me->lease() == lease && absl::Now() < until) absl::SleepFor(absl::Milliseconds(50));
      q.set_lease(job->me->lease());
      took = take();
    }
    OAR_ASSIGN_OR_RETURN(std::optional<int64_t> chunk, std::move(took));
    metrics.requeued->Add(static_cast<double>(q.requeued() - requeued));
    if (!chunk.has_value()) return std::optional<bool>(false);
    OAR_ASSIGN_OR_RETURN(std::optional<int64_t> examples, train(epoch, *chunk, job->chunks));
    if (!examples.has_value()) return std::optional<bool>();  // stopped early
    report.Settle();                                          // the chunk before's
    report.Start(&q, epoch, *chunk, *examples);
    return std::optional<bool>(true);
  };
  // Every chunk free now, epoch by epoch, without waiting for the chunks
  // others train (async training has no epoch boundary to keep)...
  // The next chunk is claimed while this one trains (a claim is an etcd
  // transaction: milliseconds, which in a sync job every trainer would
  // wait out at the barrier). Should this trainer die, the chunk claimed
  // ahead goes back to the queue with its lease, as the one it trains does.
  using Claim = absl::StatusOr<std::optional<int64_t>>;
  std::future<Claim> ahead;
  auto take_ahead = [&](int epoch) -> Claim {
    Claim got = ahead.valid() ? ahead.get() : q.Take(epoch);
    if (got.ok() && got->has_value()) ahead = std::async(std::launch::async, [&q, epoch] { return q.Take(epoch); });
    return got;
  };
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    OAR_RETURN_IF_ERROR(q.Open(epoch, job->chunks));
    while (true) {
      OAR_ASSIGN_OR_RETURN(std::optional<bool> trained, one(epoch, [&] { return take_ahead(epoch); }));
      if (!trained.has_value()) return false;
      if (!*trained) break;
    }
  }
  // ...then until every epoch is done: a trainer that dies leaves its chunk
  // to whoever is still here.
  const absl::Duration wait = absl::Milliseconds(FLAGS_rpc_deadline);
  // A sync trainer steps with the others while it waits: a chunk free now,
  // else an idle step, until the epoch is done.
  auto next_or_idle = [&](int epoch) -> absl::StatusOr<std::optional<int64_t>> {
    while (true) {
      OAR_ASSIGN_OR_RETURN(std::optional<int64_t> chunk, q.Take(epoch));
      if (chunk.has_value()) return chunk;
      OAR_ASSIGN_OR_RETURN(const elastic::EpochProgress p, q.Progress(epoch));
      if (p.finished()) return std::optional<int64_t>();
      OAR_RETURN_IF_ERROR(idle());
    }
  };
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    while (true) {
      OAR_ASSIGN_OR_RETURN(std::optional<bool> trained,
                           one(epoch, [&] { return idle ? next_or_idle(epoch) : q.Next(epoch, wait); }));
      if (!trained.has_value()) return false;
      if (!*trained) break;
    }
  }
  return true;
}

}  // namespace oar::cli
