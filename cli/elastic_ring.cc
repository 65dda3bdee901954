#include "cli/elastic_ring.h"

#include <cstdio>
#include <filesystem>
#include <future>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/data_flags.h"
#include "cli/loss_check.h"
#include "cli/ring_checkpoint.h"
#include "common/base/flag_refusal.h"
#include "common/base/status.h"
#include "common/elastic/ring_rendezvous.h"
#include "common/metrics/metrics.h"
#include "common/metrics/training_metrics.h"
#include "gflags/gflags.h"
#include "trainer/collective/join_trainers.h"
#include "trainer/collective/watched_collective.h"
#include "trainer/committed_state.h"

DEFINE_int32(elastic_commit_every, 20,
             "elastic nccl2: steps between commits — the state a broken ring rolls back to, and where the member "
             "list is checked (a trainer joins at a commit)");
DEFINE_validator(elastic_commit_every, [](const char*, int32_t v) {
  if (v > 0) return true;
  return oar::RefuseFlagValue("give a positive number of steps");
});
DECLARE_int32(rpc_deadline);
DECLARE_string(device);
DECLARE_string(data_feed);
DECLARE_string(dataset);

namespace oar::cli {

namespace {

// The 128-byte id ring `gen` of `job` joins with (its token: every ring
// handshake checks it, so a trainer of another ring is refused).
Tensor RingId(const std::string& job, int64_t gen) {
  const std::string name = absl::StrCat("oar elastic ring ", job, " ", gen);
  uint64_t seed = 1469598103934665603ULL;
  for (unsigned char c : name) seed = (seed ^ c) * 1099511628211ULL;
  std::mt19937_64 bits(seed);
  Tensor id;
  int64_t* v = id.mutable_data<int64_t>({16});
  for (int i = 0; i < 16; ++i) v[i] = static_cast<int64_t>(bits());
  return id;
}

// Reads the next step's batch on a thread of its own while the step
// before trains (the fixed job's sources read ahead too). One read at a
// time: the source is not shared otherwise.
class BatchAhead {
 public:
  explicit BatchAhead(SeekableSource* data) : data_(data) {}
  ~BatchAhead() { Drop(); }
  BatchAhead(const BatchAhead&) = delete;
  BatchAhead& operator=(const BatchAhead&) = delete;

  // The batch at example `at` of `epoch` (started): the one read ahead if
  // it is that one, else read now.
  absl::StatusOr<FeedBatch> Take(int64_t epoch, int64_t at) {
    if (pending_.valid()) {
      absl::StatusOr<FeedBatch> got = pending_.get();
      if (key_ == std::make_pair(epoch, at)) return got;
    }
    return Read(at);
  }
  void Start(int64_t epoch, int64_t at) {
    Drop();
    key_ = {epoch, at};
    pending_ = std::async(std::launch::async, [this, at] { return Read(at); });
  }
  // Before the source changes epoch.
  void Drop() {
    if (pending_.valid()) pending_.wait();
    pending_ = {};
  }

 private:
  absl::StatusOr<FeedBatch> Read(int64_t at) {
    OAR_RETURN_IF_ERROR(data_->Seek(at));
    FeedBatch f;
    OAR_ASSIGN_OR_RETURN(const bool got, data_->Next(&f));
    if (!got) return absl::OutOfRangeError(absl::StrCat("no batch at example ", at));
    return f;
  }

  SeekableSource* data_;
  std::pair<int64_t, int64_t> key_;
  std::future<absl::StatusOr<FeedBatch>> pending_;
};

struct RingMetrics {
  metrics::Counter *rings, *rollbacks, *undone;
};

const RingMetrics& GetRingMetrics() {
  static const RingMetrics m = [] {
    metrics::Registry& r = metrics::Default();
    return RingMetrics{
        r.AddCounter("oar_trainer_elastic_rings_total",
                     "Rings this elastic nccl2 trainer entered (a new one at each change of the job's trainers)")
            ->With({}),
        r.AddCounter("oar_trainer_elastic_rollbacks_total",
                     "Times this trainer's ring broke and it went back to its last commit")
            ->With({}),
        r.AddCounter("oar_trainer_elastic_steps_rolled_back_total",
                     "Steps this trainer took that a rollback undid (they are trained again)")
            ->With({})};
  }();
  return m;
}

}  // namespace

absl::Status CheckElasticRingDevice(bool gpu) {
  if (!gpu) return absl::OkStatus();
  return absl::UnimplementedError(
      "elastic nccl2 jobs run on CPUs (the TCP ring, shared memory); on GPUs each new ring needs a new NCCL "
      "communicator, which Oar does not make yet: drop --device gpu or --elastic");
}

absl::Status CheckElasticRingFlags() {
  OAR_RETURN_IF_ERROR(CheckElasticRingDevice(FLAGS_device == "gpu"));
  if (!FLAGS_data_feed.empty() && FLAGS_dataset != "in_memory") {
    return absl::InvalidArgumentError(kQueueDatasetNotSeekable);
  }
  return absl::OkStatus();
}

absl::StatusOr<RingTrainerResult> TrainOnElasticRing(TrainerRuntime* rt, SeekableSource* data,
                                                     const RingTrainerOptions& o) {
  ElasticJob& job = *o.job;
  Scope* scope = rt->scope();
  const std::vector<std::string> names = PersistableTensors(rt->program(), *scope);
  CommittedState state;
  if (!o.checkpoint_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.checkpoint_dir, ec);
    OAR_ASSIGN_OR_RETURN(const std::optional<TrainingPosition> from,
                         LoadNewestRingCommit(rt->executor(), scope, rt->program(), o.checkpoint_dir));
    if (from.has_value()) {
      OAR_RETURN_IF_ERROR(state.Commit(*scope, names, *from));
      std::fprintf(stderr, "trainer %d: restarting from %s/step-%lld (epoch %lld, example %lld)\n", o.trainer_id,
                   o.checkpoint_dir.c_str(), static_cast<long long>(from->step), static_cast<long long>(from->epoch),
                   static_cast<long long>(from->offset));
    }
  }
  const absl::Duration timeout = absl::Milliseconds(FLAGS_rpc_deadline);
  const int64_t b = o.batch;
  const RingMetrics& metrics = GetRingMetrics();
  RingTrainerResult out;
  std::map<int64_t, int64_t> unused;  // by epoch, as last trained
  ProgressBar bar(stderr, absl::StrFormat("trainer %d (elastic nccl2)", o.trainer_id), -1);
  int64_t after = 0;  // the ring it last trained in
  using Left = elastic::RendezvousOptions::Left;
  std::optional<Left> left;  // the ring it last left (broken, or the members changed)
  int waits = 0;
  int64_t loaded_epoch = -1;
  BatchAhead ahead(data);
  metrics::StepRecorder recorder;        // the steps kept or not: each ran
  std::optional<absl::Time> first_ring;  // the clock starts there, as a fixed job's after its ring forms
  while (true) {
    elastic::RendezvousOptions ro;  // the member list etcd holds: the live trainers
    ro.job = ElasticJobId();
    ro.trainer = o.trainer_id;
    ro.value = job.value;
    ro.lease = [&job] { return job.me->lease(); };  // a new one when it registered again
    ro.min_trainers = job.min_trainers;
    ro.left = left;  // its trainers come within a step, or are lost or stuck
    ro.silence = timeout;
    absl::StatusOr<elastic::RingGeneration> g = elastic::NextRingGeneration(job.etcd.get(), ro, after, timeout);
    if (!g.ok()) {
      if (!absl::IsDeadlineExceeded(g.status())) return g.status();
      OAR_ASSIGN_OR_RETURN(const bool over, ElasticJobOver(job));
      if (over) {
        std::fprintf(stderr, "trainer %d: the job ended before this trainer entered a ring\n", o.trainer_id);
        return out;
      }
      // A joiner waits for the trainers' next commit; a survivor for a
      // dead trainer's lease: once more, then the job stops with the reason.
      if (++waits > (state.has() ? 1 : 10)) return g.status();
      std::fprintf(stderr, "%s; waiting on\n", std::string(g.status().message()).c_str());
      continue;
    }
    waits = 0;
    after = g->number;
    // What it leaves when it leaves ring g: its trainers, and those whose
    // silence its broken collective timed out on.
    auto leaving = [&g](const Collective* ring) {
      Left l{g->number, g->trainers, absl::Now(), {}};
      for (int r : ring != nullptr ? ring->Unanswered() : std::vector<int>{}) {
        if (r >= 0 && r < static_cast<int>(g->trainers.size())) l.silent.push_back(g->trainers[static_cast<size_t>(r)]);
      }
      return l;
    };
    const int rank = g->RankOf(o.trainer_id), n = static_cast<int>(g->trainers.size());
    std::vector<std::string> eps;
    for (int id : g->trainers) {
      if (id < 0 || id >= static_cast<int>(o.trainer_endpoints.size())) {
        return absl::InvalidArgumentError(absl::StrCat("ring ", g->number, " holds trainer ", id, " but only ",
                                                       o.trainer_endpoints.size(),
                                                       " trainer endpoints are known (PADDLE_TRAINER_ENDPOINTS)"));
      }
      eps.push_back(o.trainer_endpoints[static_cast<size_t>(id)]);
    }
    rt->DropRing();
    const Tensor id = RingId(ElasticJobId(), g->number);
    absl::StatusOr<std::unique_ptr<Collective>> joined =
        JoinTrainers({.id = &id, .rank = rank, .endpoints = eps, .transport = o.transport, .timeout = timeout});
    if (!joined.ok()) {
      std::fprintf(stderr, "trainer %d: ring %lld did not form (%s); forming the next\n", o.trainer_id,
                   static_cast<long long>(g->number), std::string(joined.status().message()).c_str());
      left = leaving(nullptr);
      continue;
    }
    auto owned = std::make_unique<WatchedCollective>(*std::move(joined));
    WatchedCollective* ring = owned.get();
    const absl::StatusOr<int> root = state.Agree(ring, scope, names);
    if (!root.ok()) {
      std::fprintf(stderr, "trainer %d: ring %lld broke while its trainers took the newest commit (%s)\n", o.trainer_id,
                   static_cast<long long>(g->number), std::string(root.status().message()).c_str());
      left = leaving(ring);
      continue;
    }
    TrainingPosition pos = state.position();
    if (const absl::Status s = rt->Regroup(std::move(owned)); !s.ok()) {
      if (!ring->failed()) return s;  // not the ring's fault: another trainer's settings differ
      std::fprintf(stderr, "trainer %d: ring %lld broke while its trainers compared their settings (%s)\n",
                   o.trainer_id, static_cast<long long>(g->number), std::string(s.message()).c_str());
      left = leaving(ring);
      continue;
    }
    out.rank = rank;
    metrics.rings->Add();
    if (!first_ring.has_value()) first_ring = absl::Now();
    out.backend = rt->collective_backend();
    std::printf("@oar ring trainer=%d ring=%lld rank=%d size=%d trainers=%s step=%lld epoch=%lld offset=%lld\n",
                o.trainer_id, static_cast<long long>(g->number), rank, n, absl::StrJoin(g->trainers, ",").c_str(),
                static_cast<long long>(pos.step), static_cast<long long>(pos.epoch),
                static_cast<long long>(pos.offset));
    std::fflush(stdout);
    if (left.has_value()) {
      std::fprintf(stderr,
                   "trainer %d: ring %lld (trainers %s) formed %.2f s after it left ring %lld; from step %lld\n",
                   o.trainer_id, static_cast<long long>(g->number), absl::StrJoin(g->trainers, ",").c_str(),
                   absl::ToDoubleSeconds(absl::Now() - left->at), static_cast<long long>(left->number),
                   static_cast<long long>(pos.step));
    }
    if (rank == 0 && !o.checkpoint_dir.empty() && pos.step > 0) MarkRingCommitResumed(o.checkpoint_dir, pos.step);
    const std::set<int> members(g->trainers.begin(), g->trainers.end());
    // Commits `pos`; whether the ring must change (a member came or went).
    auto commit = [&]() -> absl::StatusOr<bool> {
      OAR_RETURN_IF_ERROR(state.Commit(*scope, names, pos));
      if (rank == 0 && !o.checkpoint_dir.empty()) {
        OAR_RETURN_IF_ERROR(WriteRingCommit(rt->executor(), scope, rt->program(), o.checkpoint_dir, pos));
      }
      Tensor changed;
      changed.mutable_data<int32_t>({1})[0] = TrainersOf(job).live != members ? 1 : 0;
      OAR_RETURN_IF_ERROR(ring->AllReduce(&changed, "the member list changed"));
      return changed.data<int32_t>()[0] > 0;
    };
    bool finished = false;
    while (true) {
      if (pos.epoch > o.epochs || (o.max_steps > 0 && pos.step >= o.max_steps)) {
        finished = true;
        break;
      }
      if (loaded_epoch != pos.epoch) {
        ahead.Drop();
        OAR_RETURN_IF_ERROR(data->StartEpoch(static_cast<int>(pos.epoch - 1)));
        loaded_epoch = pos.epoch;
      }
      const int64_t total = data->examples_per_epoch();
      absl::StatusOr<bool> change = false;
      if (pos.offset + n * b > total) {  // the epoch's end: what is left is fewer than n batches
        unused[pos.epoch] = total - pos.offset;
        ++pos.epoch;
        pos.offset = 0;
        change = commit();
      } else {
        absl::StatusOr<FeedBatch> batch = ahead.Take(pos.epoch, pos.offset + rank * b);
        if (!batch.ok() || batch->examples != b) {
          return absl::InternalError(absl::StrCat("trainer ", o.trainer_id, ": no batch of ", b, " at example ",
                                                  pos.offset + rank * b, " of ", total));
        }
        const FeedBatch fed = *std::move(batch);
        if (pos.offset + 2 * n * b <= total) ahead.Start(pos.epoch, pos.offset + n * b + rank * b);
        recorder.Start();
        const absl::StatusOr<float> loss = rt->Step(fed.feeds);
        if (!loss.ok()) {
          if (!ring->failed()) return loss.status();  // the step's own error, not the ring's
          std::fprintf(stderr, "trainer %d: ring %lld broke at step %lld (%s); back to the commit of step %lld\n",
                       o.trainer_id, static_cast<long long>(g->number), static_cast<long long>(pos.step + 1),
                       std::string(loss.status().message()).c_str(), static_cast<long long>(state.position().step));
          OAR_RETURN_IF_ERROR(state.Restore(scope));
          metrics.rollbacks->Add();
          metrics.undone->Add(static_cast<double>(pos.step - state.position().step));
          break;
        }
        OAR_RETURN_IF_ERROR(CheckLossFinite(*loss, pos.step + 1, static_cast<int>(pos.epoch),
                                            absl::StrCat("trainer ", o.trainer_id, ": ")));
        recorder.Done(fed.examples);
        ++pos.step;
        pos.offset += n * b;
        ++out.steps;
        out.examples += fed.examples;
        out.loss = *loss;
        if (o.step_log != nullptr) o.step_log->Add(*loss);
        std::printf("@oar ring-step trainer=%d ring=%lld rank=%d size=%d step=%lld epoch=%lld offset=%lld loss=%.9g\n",
                    o.trainer_id, static_cast<long long>(g->number), rank, n, static_cast<long long>(pos.step),
                    static_cast<long long>(pos.epoch), static_cast<long long>(pos.offset), *loss);
        if (o.report) {
          std::printf("@oar progress trainer=%d epoch=%lld epochs=%d step=%lld steps=%lld examples=%lld loss=%.6f\n",
                      o.trainer_id, static_cast<long long>(pos.epoch), o.epochs,
                      static_cast<long long>(pos.offset / (n * b)), static_cast<long long>(total / (n * b)),
                      static_cast<long long>(out.examples), *loss);
        } else {
          bar.Step(fed.examples, *loss);
        }
        std::fflush(stdout);
        if (pos.step % FLAGS_elastic_commit_every == 0) change = commit();
      }
      if (!change.ok()) {
        if (!ring->failed()) return change.status();
        std::fprintf(stderr, "trainer %d: ring %lld broke at the commit of step %lld (%s)\n", o.trainer_id,
                     static_cast<long long>(g->number), static_cast<long long>(pos.step),
                     std::string(change.status().message()).c_str());
        break;
      }
      if (*change) {
        std::fprintf(stderr, "trainer %d: the job's trainers changed; a new ring from step %lld\n", o.trainer_id,
                     static_cast<long long>(pos.step));
        break;
      }
    }
    if (finished) break;
    left = leaving(ring);
  }
  if (!o.report) bar.Finish();
  ahead.Drop();
  if (first_ring.has_value()) out.seconds = absl::ToDoubleSeconds(absl::Now() - *first_ring);
  for (const auto& [epoch, left] : unused) out.unused += left;
  if (out.rank == 0) OAR_RETURN_IF_ERROR(MarkElasticJobDone(job));
  rt->DropRing();
  return out;
}

}  // namespace oar::cli
