#include "cli/trainer_role.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/data_flags.h"
#include "cli/elastic_exchanges.h"
#include "cli/elastic_job.h"
#include "cli/elastic_ring.h"
#include "cli/elastic_sync.h"
#include "cli/loss_check.h"
#include "cli/process_settings.h"
#include "cli/progress_bar.h"
#include "cli/pserver_join.h"
#include "cli/shuffle_ring.h"
#include "cli/trainer_failure.h"
#include "cli/trainer_options.h"
#include "cli/trainer_report.h"
#include "common/api/io.h"
#include "common/base/status.h"
#include "common/data/feed_check.h"
#include "common/metrics/training_metrics.h"
#include "gflags/gflags.h"
#include "trainer/trainer_runtime.h"

DECLARE_bool(report);
DECLARE_string(loss_name);
DECLARE_string(feed_names);
DECLARE_string(fetch);
DECLARE_string(checkpoint_dir);
DECLARE_string(collective_transport);
DECLARE_int32(checkpoint_every);
DECLARE_int32(epochs);
DECLARE_string(step_log);
DECLARE_int64(max_steps);
DECLARE_string(program);
DECLARE_string(model);

namespace oar::cli {

absl::StatusOr<TrainerIo> IoFor(const ModelPrograms* model, const ProgramDesc& main) {
  TrainerIo io;
  if (model != nullptr) {
    io.loss = model->vars.loss.name();
    io.feeds = {model->vars.feeds[0].name(), model->vars.feeds[1].name()};
    io.model = model;
    return io;
  }
  io.feeds = absl::StrSplit(FLAGS_feed_names, ',', absl::SkipEmpty());
  io.fetch = absl::StrSplit(FLAGS_fetch, ',', absl::SkipEmpty());
  if (FLAGS_loss_name.empty() || io.feeds.empty()) {
    return absl::InvalidArgumentError(
        "a TRAINER given --program needs --loss_name and --feed_names VAR,... (the "
        "variables to fetch and feed)");
  }
  io.loss = FLAGS_loss_name;
  std::vector<std::string> named = io.feeds;
  named.push_back(io.loss);
  named.insert(named.end(), io.fetch.begin(), io.fetch.end());
  for (const auto& n : named) {
    if (main.Block(0).FindVar(n) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("--program has no variable '", n, "'"));
    }
  }
  return io;
}

absl::Status RunTrainer(const RoleEnv& env, const TrainerIo& io, DistributeTranspiler& t, bool nccl2,
                        const ProgramDesc& origin, Profiler* profiler, ElasticJob* elastic) {
  // The device first: a host without the GPU asked for hears so at once.
  OAR_ASSIGN_OR_RETURN(const Place place, TrainPlaceFromFlags());
  OAR_ASSIGN_OR_RETURN(ProgramDesc main, t.get_trainer_program(/*wait_port=*/true));
  OAR_ASSIGN_OR_RETURN(ProgramDesc startup, t.get_trainer_startup_program());
  OAR_ASSIGN_OR_RETURN(TrainerSetup setup, TrainerSetupFor(env, io, t, nccl2, origin, profiler, place));
  TrainerRuntime::Options options = std::move(setup.options);
  const int64_t batch = setup.batch;
  if (elastic != nullptr) options.geo.trainers_now = GeoTrainersNow(*elastic);
  if (FLAGS_program.empty()) OAR_RETURN_IF_ERROR(RequireFashionMnistModel(FLAGS_model));
  OAR_ASSIGN_OR_RETURN(DataConfig data, DataConfigFromFlags());
  data.batch_size = batch;
  data.min_batch = static_cast<int64_t>(std::max<size_t>(1, options.places.size()));  // a batch is split across them
  std::vector<const VarDesc*> vars;
  for (const std::string& feed : io.feeds) {
    OAR_ASSIGN_OR_RETURN(const VarDesc* v, FeedVar(origin, "the program", feed));
    vars.push_back(v);
  }
  // An elastic job's trainer reads chunk c of C (MakeTrainSource's shard c
  // of C) as the job's queue hands them out, from data read before it
  // joins (a sync job's steps wait for it from then on).
  ShardSources chunks(data, vars);
  if (elastic != nullptr) OAR_RETURN_IF_ERROR(chunks.Load());
  const bool elastic_sync = elastic != nullptr && !nccl2 && options.sync_mode;
  // An elastic nccl2 job's trainers form their rings through etcd, not
  // through trainer 0's gen_nccl_id (cli/elastic_ring.h).
  const bool elastic_ring = elastic != nullptr && nccl2;
  std::unique_ptr<SeekableSource> whole;
  if (elastic_ring) {
    OAR_RETURN_IF_ERROR(CheckElasticRingDevice(place.is_gpu()));
    OAR_ASSIGN_OR_RETURN(whole, chunks.Whole());
    options.elastic_ring = true;
    BlockDesc* block = startup.MutableBlock(0);
    for (size_t i = block->OpSize(); i-- > 0;) {
      if (block->Op(i).type == "gen_nccl_id") block->RemoveOps(i, i + 1);
    }
  }
  int64_t job_step = 0;    // elastic sync: the pservers' step this trainer takes next
  bool job_ended = false;  // an elastic pserver job that ended before this trainer joined it
  if (elastic != nullptr && !nccl2) {
    options.wait_for_pservers = [&](rpc::RpcClient* client) {
      return WaitForElasticPservers(*elastic, client, env.pservers, &job_ended);
    };
  }
  if (elastic_sync) {
    // A barrier any pserver holds must mean every pserver holds the step's
    // gradients (a trainer may die between its sends): with one pserver,
    // the barrier behind the sends on the connection already means it.
    options.barrier_after_sends = env.pservers.size() > 1;
    // A survivor's pull may wait for a dead trainer's lease and the
    // pservers' agreement (StepBarrier: up to 3 x --rpc_deadline).
    options.rpc.deadline_ms *= 4;
    options.before_pull = [&](rpc::RpcClient* client) -> absl::Status {
      absl::StatusOr<int64_t> entry = JoinPserverSteps(client, env.pservers, env.trainer_id, elastic->value);
      if (entry.ok()) job_step = *entry;
      return JobEndedOr(*elastic, entry.status(), &job_ended);
    };
  }
  TrainerProcess(std::max<size_t>(1, options.places.size()));
  absl::StatusOr<std::unique_ptr<TrainerRuntime>> created = TrainerRuntime::Create(std::move(main), startup, options);
  if (!created.ok() && elastic != nullptr && !nccl2) {  // the pservers gone since they answered?
    (void)JobEndedOr(*elastic, created.status(), &job_ended);
  }
  if (job_ended) return absl::OkStatus();  // said so: nothing to train
  OAR_ASSIGN_OR_RETURN(auto rt, std::move(created));
  ShuffleGroup group{.rank = env.trainer_id, .size = env.trainers};
  if (rt->collective() != nullptr && !place.is_gpu()) {  // --shuffle global of MultiSlot files: over the ring
    group.all_gather = [&rt](const Tensor& in, std::vector<Tensor>* out) {
      return rt->collective()->AllGather(in, out, "global_shuffle");
    };
    data.shuffle_group = &group;
  }
  if (elastic != nullptr && !data.data_feed.empty() && data.shuffle == "global") {
    return absl::UnimplementedError(
        "--shuffle global exchanges MultiSlot lines among a fixed set of trainers; an elastic job's trainers "
        "shuffle within their chunks: give --shuffle local");
  }
  std::unique_ptr<Collective> shuffle_ring;  // a pserver job's trainers: joined for the global shuffle only
  if (!nccl2 && !data.data_feed.empty() && data.shuffle == "global" && data.in_memory && env.trainers > 1) {
    OAR_ASSIGN_OR_RETURN(shuffle_ring, JoinTrainersForShuffle(env, rt->executor()));
    group.all_gather = [&shuffle_ring](const Tensor& in, std::vector<Tensor>* out) {
      return shuffle_ring->AllGather(in, out, "global_shuffle");
    };
    data.shuffle_group = &group;
  }
  // The fixed job's trainers read their 1/trainers.
  std::unique_ptr<FeedSource> source;
  if (elastic == nullptr) {
    OAR_ASSIGN_OR_RETURN(source, MakeTrainSource(data, vars, env.trainer_id, env.trainers));
  }
  shuffle_ring.reset();  // the lines are exchanged
  const int64_t per_epoch = elastic != nullptr ? -1 : source->batches_per_epoch();
  if (elastic_ring) {
    std::fprintf(stderr, "trainer %d (elastic nccl2): %s, batch %lld each, rings formed through etcd\n", env.trainer_id,
                 whole->Describe().c_str(), static_cast<long long>(batch));
    OAR_ASSIGN_OR_RETURN(StepLog ring_log, StepLog::Open(FLAGS_step_log));
    OAR_ASSIGN_OR_RETURN(const RingTrainerResult r, TrainOnElasticRing(rt.get(), whole.get(),
                                                                       {.job = elastic,
                                                                        .trainer_id = env.trainer_id,
                                                                        .trainer_endpoints = env.trainer_endpoints,
                                                                        .batch = batch,
                                                                        .epochs = FLAGS_epochs,
                                                                        .max_steps = FLAGS_max_steps,
                                                                        .transport = FLAGS_collective_transport,
                                                                        .checkpoint_dir = FLAGS_checkpoint_dir,
                                                                        .report = FLAGS_report,
                                                                        .step_log = &ring_log}));
    OAR_RETURN_IF_ERROR(rt->Close());
    NoteTrainerCompleted();
    return ReportTrainer(
        rt.get(), io, origin, data, vars, env.trainer_id,
        {.examples = r.examples, .seconds = r.seconds, .loss = r.loss, .unused = r.unused, .collective = r.backend},
        r.rank == 0 && r.steps > 0);
  }
  if (nccl2 && per_epoch < 0) {
    return absl::InvalidArgumentError(
        "nccl2 trainers agree on their steps before each epoch, and a queue dataset's "
        "are not known until it is read: give --dataset in_memory");
  }
  std::fprintf(stderr, "trainer %d/%d: %s, batch %lld, on %zu place(s), %s %s\n", env.trainer_id, env.trainers,
               elastic != nullptr ? absl::StrCat("chunks of ", elastic->chunks, " from etcd").c_str()
                                  : source->Describe().c_str(),
               static_cast<long long>(batch), rt->num_places(), nccl2 ? "nccl2 with trainers" : "pservers",
               absl::StrJoin(nccl2 ? env.trainer_endpoints : env.pservers, ",").c_str());
  OAR_ASSIGN_OR_RETURN(StepLog step_log, StepLog::Open(FLAGS_step_log));
  ProgramDesc notify;  // checkpoint_notify to every pserver, run by trainer 0
  if (env.trainer_id == 0 && !FLAGS_checkpoint_dir.empty() && FLAGS_checkpoint_every > 0) {
    OpDesc* op = notify.MutableBlock(0)->AppendOp();
    op->type = "checkpoint_notify";
    op->SetAttr("epmap", env.pservers);
    op->SetAttr("dir", FLAGS_checkpoint_dir);
    op->SetAttr("trainer_id", int32_t{0});
  }
  const auto start = std::chrono::steady_clock::now();
  int64_t steps = 0, examples = 0, unused = 0;
  metrics::StepRecorder recorder;
  double loss = 0;
  FeedBatch fed;
  auto out_of_steps = [&] { return FLAGS_max_steps > 0 && steps >= FLAGS_max_steps; };
  int64_t epoch_steps = per_epoch;  // a queue dataset's: known after the first epoch
  // Up to `limit` steps of `epoch` from `src`; the examples they took.
  auto train_from = [&](FeedSource* src, int epoch, int64_t limit, int64_t* step_in_epoch,
                        ProgressBar* bar) -> absl::StatusOr<int64_t> {
    int64_t taken = 0;
    while (!out_of_steps() && *step_in_epoch < limit) {
      OAR_ASSIGN_OR_RETURN(const bool more, src->Next(&fed));
      if (!more) break;
      recorder.Start();
      OAR_ASSIGN_OR_RETURN(float l, rt->Step(fed.feeds));
      OAR_RETURN_IF_ERROR(CheckLossFinite(l, steps + 1, epoch, absl::StrCat("trainer ", env.trainer_id, ": ")));
      recorder.Done(fed.examples);
      loss = l;
      ++steps;
      ++job_step;
      ++*step_in_epoch;
      examples += fed.examples;
      taken += fed.examples;
      step_log.Add(loss);
      if (notify.Block(0).OpSize() > 0 && steps % FLAGS_checkpoint_every == 0) {
        OAR_RETURN_IF_ERROR(
            Annotate(rt->executor().Run(notify, rt->scope()).status(), absl::StrCat("checkpoint after step ", steps)));
      }
      if (FLAGS_report) {
        std::printf("@oar progress trainer=%d epoch=%d epochs=%d step=%lld steps=%lld examples=%lld loss=%.6f\n",
                    env.trainer_id, epoch, FLAGS_epochs, static_cast<long long>(*step_in_epoch),
                    static_cast<long long>(std::max<int64_t>(epoch_steps, 0)),  // 0: not known yet
                    static_cast<long long>(examples), loss);
        std::fflush(stdout);
      } else {
        bar->Step(fed.examples, loss);
      }
    }
    return taken;
  };
  if (elastic != nullptr) {  // the chunks the job's queue hands out, the data read once
    ProgressBar bar(stderr, absl::StrFormat("trainer %d (elastic)", env.trainer_id), -1);
    int64_t step_in_epoch = 0;
    int last_epoch = 0;
    auto chunk = [&](int epoch, int64_t c, int64_t n) -> absl::StatusOr<std::optional<int64_t>> {
      if (epoch != last_epoch) step_in_epoch = 0;
      last_epoch = epoch;
      OAR_ASSIGN_OR_RETURN(std::unique_ptr<FeedSource> part, chunks.Make(c, n));
      OAR_RETURN_IF_ERROR(part->StartEpoch(epoch - 1));
      if (elastic_sync) {  // its batches go in at consecutive steps from here (what a replay of the job reads)
        std::printf("@oar chunk-begin trainer=%d epoch=%d chunk=%lld step=%lld\n", env.trainer_id, epoch,
                    static_cast<long long>(c), static_cast<long long>(job_step));
        std::fflush(stdout);
      }
      OAR_ASSIGN_OR_RETURN(int64_t taken,
                           train_from(part.get(), epoch, std::numeric_limits<int64_t>::max(), &step_in_epoch, &bar));
      if (out_of_steps()) return std::optional<int64_t>();
      OAR_RETURN_IF_ERROR(FlushChunk(rt->communicator(), rt->geo(), c));
      return std::optional<int64_t>(taken);
    };
    std::function<absl::Status()> idle;
    ProgramDesc idle_step;
    if (elastic_sync) {
      OAR_ASSIGN_OR_RETURN(idle_step, IdleStepProgram(rt->program()));
      idle = [&]() -> absl::Status {
        OAR_RETURN_IF_ERROR(Annotate(rt->executor().Run(idle_step, rt->scope()).status(), "a step without data"));
        OAR_RETURN_IF_ERROR(rt->SpreadScopeToPlaces());  // the parameters it pulled, to every place
        ++job_step;
        absl::SleepFor(absl::Milliseconds(5));  // every trainer may be waiting: no spin
        return absl::OkStatus();
      };
    }
    OAR_RETURN_IF_ERROR(TrainElasticEpochs(elastic, env.trainer_id, FLAGS_epochs, chunk, idle).status());
    if (!FLAGS_report) bar.Finish();
  } else {  // the fixed job's share, epoch by epoch
    for (int epoch = 1; epoch <= FLAGS_epochs && !out_of_steps(); ++epoch) {
      ProgressBar bar(stderr, absl::StrFormat("trainer %d epoch %d/%d", env.trainer_id, epoch, FLAGS_epochs),
                      epoch_steps);
      int64_t step_in_epoch = 0;
      OAR_RETURN_IF_ERROR(source->StartEpoch(epoch - 1));
      // nccl2: every trainer takes the fewest steps any has this epoch.
      std::vector<int64_t> counts;
      int64_t agreed = std::numeric_limits<int64_t>::max();
      if (per_epoch >= 0) {
        OAR_ASSIGN_OR_RETURN(agreed, rt->AgreeOnSteps(per_epoch, &counts));
        if (agreed < per_epoch) {
          const int64_t left = std::max<int64_t>(0, source->examples_per_epoch() - agreed * batch);
          std::fprintf(stderr,
                       "trainer %d: epoch %d stops at step %lld with the other trainers; %lld example(s) unused\n",
                       env.trainer_id, epoch, static_cast<long long>(agreed), static_cast<long long>(left));
          unused += left;
        }
      }
      OAR_RETURN_IF_ERROR(train_from(source.get(), epoch, agreed, &step_in_epoch, &bar).status());
      if (!FLAGS_report) bar.Finish();
      if (epoch_steps < 0 && !out_of_steps()) epoch_steps = step_in_epoch;
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Done with the pservers: they stop waiting for this trainer.
  OAR_RETURN_IF_ERROR(Annotate(rt->Close(), "saying COMPLETE to the pservers"));
  NoteTrainerCompleted();  // a failure from here on (the evaluation) is this trainer's alone
  if (steps == 0 && elastic == nullptr) {  // else its report would read as a result: "loss 0"
    return absl::InvalidArgumentError(absl::StrCat(
        "trainer ", env.trainer_id, " made no training step: its share of ", source->Describe(), " (1/", env.trainers,
        ") holds no batch", nccl2 ? ", and nccl2 trainers all take the fewest steps any of them can" : "",
        "; train on more examples (--limit) or with fewer trainers"));
  }
  return ReportTrainer(rt.get(), io, origin, data, vars, env.trainer_id,
                       {.examples = examples,
                        .seconds = seconds,
                        .loss = loss,
                        .unused = unused,
                        .collective = nccl2 ? rt->collective_backend() : std::string()},
                       EvaluatesTheJob(elastic, env.trainer_id));
}

}  // namespace oar::cli
