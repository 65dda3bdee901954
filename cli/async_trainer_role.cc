#include "cli/async_trainer_role.h"
#include "cli/process_settings.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "cli/async_train_util.h"
#include "cli/communicator_flags.h"
#include "cli/elastic_exchanges.h"
#include "cli/program_eval.h"
#include "cli/progress_bar.h"
#include "cli/pserver_join.h"
#include "cli/rpc_flags.h"
#include "cli/trainer_failure.h"
#include "common/api/io.h"
#include "common/base/fingerprint.h"
#include "common/base/job_settings.h"
#include "common/base/status.h"
#include "common/rpc/rpc_client.h"
#include "common/rpc/rpc_common.h"
#include "common/rpc/transport_select.h"
#include "gflags/gflags.h"
#include "trainer/async_executor.h"

DECLARE_string(data_feed);
DECLARE_string(files);
DECLARE_int32(threads);
DECLARE_string(fetch);
DECLARE_bool(debug);
DECLARE_bool(skip_bad_lines);
DECLARE_string(test_files);
DECLARE_string(loss_name);
DECLARE_string(step_log);
DECLARE_string(checkpoint_dir);

namespace oar::cli {
namespace {

// What the trainers of a --data_feed job must share: they split the file
// listing by index, and their gradients are means over the feed's batch.
// The listing is compared by its files' names (not their folders, which
// may differ from machine to machine); a fingerprint's low 32 bits keep
// the error line short.
JobSettings DataFeedJobSettings(const DataFeedDesc& feed, const std::vector<std::string>& files) {
  std::string names;
  for (const auto& f : files) absl::StrAppend(&names, std::filesystem::path(f).filename().string(), "\n");
  auto low32 = [](uint64_t h) { return static_cast<int64_t>(h & 0xffffffffu); };
  return {{"data_feed.batch_size", feed.batch_size()},
          {"data_feed.text", low32(Fingerprint(feed.desc()))},
          {"files.count", static_cast<int64_t>(files.size())},
          {"files.names", low32(Fingerprint(names))}};
}

}  // namespace

absl::Status RunAsyncTrainerRole(const RoleEnv& env, DistributeTranspiler& t, const ModelPrograms* model, bool report,
                                 ElasticJob* elastic) {
  if (t.config().sync_mode && FLAGS_threads > 1) {
    return absl::InvalidArgumentError(
        "AsyncExecutor threads of one trainer cannot share its sync barriers: train with --async (as Fluid's CTR "
        "jobs do) or --threads 1");
  }
  OAR_ASSIGN_OR_RETURN(ProgramDesc main, t.get_trainer_program(/*wait_port=*/true));
  OAR_ASSIGN_OR_RETURN(ProgramDesc startup, t.get_trainer_startup_program());
  OAR_ASSIGN_OR_RETURN(DataFeedDesc feed, DataFeedDesc::Load(FLAGS_data_feed));
  OAR_ASSIGN_OR_RETURN(std::vector<std::string> files, ExpandFiles(FLAGS_files));
  std::vector<std::string> mine;
  for (size_t i = 0; i < files.size(); ++i) {
    if (static_cast<int>(i % static_cast<size_t>(env.trainers)) == env.trainer_id) mine.push_back(files[i]);
  }
  if (elastic != nullptr) elastic->chunks = ElasticChunks(env.trainers, static_cast<int64_t>(files.size()));
  if (mine.empty() && elastic == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("trainer ", env.trainer_id, " has no file: --files gives ",
                                                   files.size(), " for ", env.trainers,
                                                   " trainers (write more, e.g. oar gen-ctr-data --files N)"));
  }
  // The loss first among the fetched (the result's loss=, the step log).
  std::vector<std::string> fetch = absl::StrSplit(FLAGS_fetch, ',', absl::SkipEmpty());
  const std::string loss_name = model != nullptr ? model->vars.loss.name() : FLAGS_loss_name;
  if (!loss_name.empty()) {
    fetch.erase(std::remove(fetch.begin(), fetch.end(), loss_name), fetch.end());
    fetch.insert(fetch.begin(), loss_name);
  } else if (!FLAGS_step_log.empty()) {
    return absl::InvalidArgumentError("--step_log with --program needs --loss_name (the loss to log)");
  }
  OAR_ASSIGN_OR_RETURN(std::unique_ptr<rpc::Transport> transport, rpc::MakeTransport(RpcOptionsFromFlags()));
  rpc::RpcClient client(transport.get(), {.trainers = env.trainers,
                                          .sync_mode = t.config().sync_mode ? 1 : 2,
                                          .job_settings = EncodeJobSettings(DataFeedJobSettings(feed, files)),
                                          .incarnation = ThisTrainersIncarnation(),
                                          .await_restarts = !FLAGS_checkpoint_dir.empty()});
  RunEnv renv = rpc::ClientEnv(&client);
  bool job_ended = false;  // an elastic job that ended before this trainer joined it: nothing to train
  const absl::Status ready = elastic != nullptr ? WaitForElasticPservers(*elastic, &client, env.pservers, &job_ended)
                                                : client.WaitServerReady(env.pservers, client.deadline_ms());
  if (job_ended) return absl::OkStatus();
  OAR_RETURN_IF_ERROR(Annotate(ready, "waiting for the pservers"));
  Scope root;
  Executor exe(CPUPlace(), ExecutorOptions{.env = &renv});
  const absl::Status started = exe.Run(startup, &root).status();  // pulls the parameters
  if (!started.ok() && elastic != nullptr) {                      // the pservers gone since they answered?
    (void)JobEndedOr(*elastic, started, &job_ended);
    if (job_ended) return absl::OkStatus();  // said so: nothing to train
  }
  OAR_RETURN_IF_ERROR(Annotate(started, "the trainer startup program"));
  std::unique_ptr<Communicator> communicator;
  if (auto copts = CommunicatorOptionsFromFlags(t.config()); copts.has_value()) {
    OAR_ASSIGN_OR_RETURN(communicator, Communicator::Create(main, &client, *copts));
    renv.communicator = communicator.get();
    communicator->Start(&root);
  }
  std::unique_ptr<GeoCommunicator> geo;
  if (auto params = GeoParamsOf(t, env.trainer_id); !params.empty()) {
    GeoOptions geo_options = GeoOptionsOf(t.config(), env.trainers);
    if (elastic != nullptr) geo_options.trainers_now = GeoTrainersNow(*elastic);
    geo = std::make_unique<GeoCommunicator>(std::move(params), &client, std::move(geo_options));
    renv.geo = geo.get();
    OAR_RETURN_IF_ERROR(geo->Start(&root));
  }
  std::fprintf(stderr, "trainer %d/%d: %s of %zu file(s), %d AsyncExecutor thread(s)%s\n", env.trainer_id, env.trainers,
               elastic != nullptr ? absl::StrCat("chunks from etcd (", elastic->chunks, ")").c_str()
                                  : std::to_string(mine.size()).c_str(),
               files.size(), FLAGS_threads,
               communicator == nullptr ? ""
               : t.config().half_async ? ", half-async communicator"
                                       : ", communicator");
  ComputeThreads(static_cast<size_t>(FLAGS_threads));
  AsyncExecutor async(&root, CPUPlace(), &renv);
  OAR_ASSIGN_OR_RETURN(StepLog step_log, StepLog::Open(FLAGS_step_log));
  AsyncRunOptions options{.debug = FLAGS_debug, .skip_bad_lines = FLAGS_skip_bad_lines};
  int64_t batches = 0, examples = 0;
  if (!loss_name.empty()) {  // every batch's loss, from whichever thread ran it
    options.on_batch = [&](int64_t n, const std::vector<Tensor>& fetched) {
      const Tensor& l = fetched[0];
      const double v = l.numel() == 1 && l.dtype() == DataType::kFloat32 ? l.data<float>()[0] : 0.0;
      step_log.Add(v);
      ++batches;
      examples += n;
      if (report) {  // steps=0: streamed files, the count is not known
        std::printf("@oar progress trainer=%d epoch=1 epochs=1 step=%lld steps=0 examples=%lld loss=%.6f\n",
                    env.trainer_id, static_cast<long long>(batches), static_cast<long long>(examples), v);
        std::fflush(stdout);
      }
    };
  }
  if (communicator != nullptr) {
    options.on_start = [&](int threads) { communicator->SetThreads(threads); };
    options.on_thread_done = [&] { communicator->ThreadDone(); };
  }
  const auto start = std::chrono::steady_clock::now();
  AsyncRunResult r;
  if (elastic != nullptr) {  // a pass over the files, chunk by chunk as the job's queue hands them out
    auto chunk = [&](int, int64_t c, int64_t n) -> absl::StatusOr<std::optional<int64_t>> {
      std::vector<std::string> part;
      for (size_t i = static_cast<size_t>(c); i < files.size(); i += static_cast<size_t>(n)) part.push_back(files[i]);
      if (part.empty()) return std::optional<int64_t>(0);
      OAR_ASSIGN_OR_RETURN(AsyncRunResult one, async.Run(main, feed, part, FLAGS_threads, fetch, options));
      OAR_RETURN_IF_ERROR(FlushChunk(communicator.get(), geo.get(), c));
      r.instances += one.instances;
      r.threads = one.threads;
      if (!one.last.empty()) r.last = std::move(one.last);
      return std::optional<int64_t>(one.instances);
    };
    OAR_RETURN_IF_ERROR(TrainElasticEpochs(elastic, env.trainer_id, 1, chunk).status());
  } else {
    OAR_ASSIGN_OR_RETURN(r, async.Run(main, feed, mine, FLAGS_threads, fetch, options));
  }
  if (communicator != nullptr) {  // its queued gradients go; the pservers' last values land in the scope
    OAR_RETURN_IF_ERROR(Annotate(communicator->Stop(), "the communicator's last sends"));
    OAR_RETURN_IF_ERROR(communicator->InstallReceived(&root));
    renv.communicator = nullptr;  // the test programs below pull for themselves
  }
  if (geo != nullptr) {  // what changed since the last exchange
    OAR_RETURN_IF_ERROR(Annotate(geo->Flush(), "GEO-SGD's last exchange"));
    renv.geo = nullptr;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double loss = 0;
  if (!r.last.empty() && r.last[0].initialized() && r.last[0].numel() > 0 && r.last[0].dtype() == DataType::kFloat32) {
    loss = r.last[0].data<float>()[0];
  }
  std::string result = absl::StrFormat("@oar result trainer=%d examples=%lld seconds=%.3f loss=%.6f", env.trainer_id,
                                       static_cast<long long>(r.instances), seconds, loss);
  const bool evaluates = EvaluatesTheJob(elastic, env.trainer_id);
  if (evaluates && model != nullptr && !FLAGS_test_files.empty()) {
    ProgramDesc test = model->test.desc();
    OAR_RETURN_IF_ERROR(t.PrefetchDistributedTable(&test));
    OAR_ASSIGN_OR_RETURN(TestMetrics m,
                         TestOnFiles(exe, test, model->vars.prediction.name(), feed, FLAGS_test_files, &root));
    absl::StrAppendFormat(&result, " test_auc=%.4f test_loss=%.4f", m.auc, m.loss);
  } else if (evaluates && !FLAGS_test_files.empty() && !loss_name.empty()) {
    // A program: its loss and each --fetch over the test files, with the
    // parameters this trainer pulled last.
    ProgramDesc test = PruneToTargets(main, UsedSlotNames(feed), fetch);
    OAR_RETURN_IF_ERROR(t.PrefetchDistributedTable(&test));
    OAR_ASSIGN_OR_RETURN(const std::vector<double> values,
                         EvaluateProgramOnFiles(exe, test, main, &root, feed, FLAGS_test_files, fetch));
    absl::StrAppend(&result, " ", EvalLine(fetch, values, ' '));
  }
  OAR_RETURN_IF_ERROR(Annotate(exe.Close(), "saying COMPLETE to the pservers"));
  NoteTrainerCompleted();
  if (report) {
    std::printf("%s\n", result.c_str());
  } else {
    std::printf("trainer %d: %lld instances in %.1f s (%.0f/s), %d thread(s)\n%s\n", env.trainer_id,
                static_cast<long long>(r.instances), seconds, r.instances / std::max(seconds, 1e-9), r.threads,
                result.substr(12).c_str());
  }
  std::fflush(stdout);
  return absl::OkStatus();
}

}  // namespace oar::cli
