// `oar launch --pservers P --trainers T --model NAME`: a whole cluster on
// this machine. Picks P free ports on 127.0.0.1, starts P pservers and T
// trainers as `oar run` processes with the PADDLE_* environment each role
// reads, shows one progress display for the trainers, and prints a summary
// (test accuracy, wall time, examples/s). With --mode nccl2 there are no
// pservers: T trainers, each on a free port (PADDLE_TRAINER_ENDPOINTS), that
// all-reduce among themselves. Every flag given here that `oar run` reads
// goes to each child. A failing process, or Ctrl-C, stops every other
// process; the launcher then exits non-zero naming the role that failed and
// why. With --elastic (cli/elastic_launch.h) trainers may die and be added
// without stopping the job.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/async_train_util.h"
#include "cli/command.h"
#include "cli/elastic_job.h"
#include "cli/elastic_launch.h"
#include "cli/host_share.h"
#include "cli/launch_monitor.h"
#include "cli/launch_observability.h"
#include "cli/launch_plan.h"
#include "cli/launch_summary.h"
#include "cli/process_group.h"
#include "cli/trainer_failure.h"
#include "common/base/listen_sockets.h"
#include "common/base/status.h"
#include "common/elastic/local_etcd.h"
#include "gflags/gflags.h"

DEFINE_string(step_log_dir, "", "each trainer appends its per-step losses to DIR/trainer.<id>.steps");
DEFINE_bool(metrics, false,
            "each process serves its Prometheus metrics on a free port (printed at the start) at /metrics");
DEFINE_string(metrics_dir, "", "each process writes its final metrics to DIR/<role>.<i>.prom when it ends");
DEFINE_string(timeline, "",
              "write one Chrome trace of the whole job to FILE: each process's ops and RPC handling in its own lane "
              "(each runs with --profile_path; the launcher merges them)");
DEFINE_int32(bind_trainers, -1,
             "bind each trainer to CPUs of its own (the pservers run on any): 1 yes, 0 no, -1 when the job's "
             "processes outnumber the CPUs this launcher may run on and its trainers do not");
DEFINE_int32(pserver_exit_timeout_ms, 30000, "how long pservers may take to exit after the last trainer");
DECLARE_string(log_dir);    // glog's flag: here, where each process's log goes
DECLARE_string(shuffle);    // cli/data_flags.cc
DECLARE_string(data_feed);  // async_train_cmd.cc
DECLARE_string(files);
DECLARE_string(trainers);  // trainers_flag.cc
DECLARE_int64(max_steps);
DECLARE_int32(epochs);

DECLARE_int32(rpc_shm_batch_wakeups);
DECLARE_int32(rpc_shm_spin_us);

namespace oar::cli {
namespace {

std::atomic<int> g_signal{0};
void OnLaunchSignal(int sig) { g_signal = sig; }

// Flags `oar run` reads that the launcher sets per child itself.
const char* const kPerChildFlags[] = {
    "role",    "pservers", "trainers", "trainer_id",   "current_endpoint", "trainer_endpoints", "report",
    "dry_run", "step_log", "cpu_num",  "metrics_port", "metrics_file",     "profile_path",      "selected_gpus"};

std::string SelfExe() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "oar" : p.string();
}

// Why child i failed, from its exit and its last log lines.
std::string Explain(const ProcessGroup& g, const LaunchMonitor& m, const ChildExit& e) {
  std::string why = e.signal ? absl::StrCat("killed by signal ", e.signal) : absl::StrCat("exit code ", e.code);
  const auto tail = m.Tail(e.index);
  std::vector<std::string> last;
  for (auto it = tail.rbegin(); it != tail.rend() && last.size() < 3; ++it) {
    if (it->find("error") != std::string::npos || it->find("Error") != std::string::npos || last.empty()) {
      last.insert(last.begin(), *it);
    }
  }
  return absl::StrCat(g.spec(e.index).name, " failed (", why, ")", last.empty() ? "" : ":\n  ",
                      absl::StrJoin(last, "\n  "));
}

absl::Status Launch() {
  OAR_ASSIGN_OR_RETURN(LaunchPlan plan, PlanLaunch());
  const bool nccl2 = plan.nccl2, elastic = plan.elastic, async_executor = plan.async_executor;
  const int pservers = plan.pservers, trainers = plan.trainers;
  const std::vector<int>& gpus = plan.gpus;
  const std::string& batch_note = plan.batch_note;
  // The endpoints and the metrics servers listen before any child starts:
  // each child is handed its sockets (ProcessGroup, LISTEN_FDS), so no
  // port can be taken between its choice and its use.
  // Trainers get endpoints of their own in nccl2 mode, and in a pserver job
  // whose MultiSlot files they shuffle globally (they join each other for
  // it: cli/shuffle_ring.h). The pservers' come first.
  const bool shuffle_eps =
      !nccl2 && !async_executor && !FLAGS_data_feed.empty() && FLAGS_shuffle == "global" && trainers > 1;
  const int n_ps_eps = nccl2 ? 0 : pservers, n_tr_eps = nccl2 || shuffle_eps ? trainers : 0;
  const int n_eps = n_ps_eps + n_tr_eps;
  struct Sockets {
    std::vector<int> fds;
    ~Sockets() {
      for (int fd : fds) ::close(fd);  // those never handed over (an early error)
    }
  } sockets;
  std::vector<int> ports;
  for (int i = 0; i < n_eps + (FLAGS_metrics ? pservers + trainers : 0); ++i) {
    int port = 0;
    OAR_ASSIGN_OR_RETURN(const int fd, ListenOnLoopback(&port));
    sockets.fds.push_back(fd);
    ports.push_back(port);
  }
  const std::vector<int> metrics_ports(ports.begin() + n_eps, ports.end());
  ports.resize(static_cast<size_t>(n_eps));
  std::vector<std::string> eps;  // the pservers', then the trainers'
  for (int p : ports) eps.push_back(absl::StrCat("127.0.0.1:", p));
  const std::string ep_list = absl::StrJoin(eps.begin(), eps.begin() + n_ps_eps, ",");
  const std::string trainer_list = absl::StrJoin(eps.begin() + n_ps_eps, eps.end(), ",");
  for (const auto* dir : {&FLAGS_log_dir, &FLAGS_step_log_dir, &FLAGS_metrics_dir}) {
    std::error_code ec;
    if (!dir->empty()) std::filesystem::create_directories(*dir, ec);
    if (ec) return absl::PermissionDeniedError(absl::StrCat(*dir, ": ", ec.message()));
  }
  // An elastic job's etcd: the user's (--elastic_server, passed on as any
  // flag `oar run` reads), or one of the launcher's own.
  std::unique_ptr<elastic::LocalEtcd> etcd;
  std::unique_ptr<elastic::EtcdClient> etcd_client;
  std::vector<std::string> common = {SelfExe(), "run"};
  if (elastic) {
    if (!FlagGiven("elastic_server")) {
      OAR_ASSIGN_OR_RETURN(etcd, elastic::LocalEtcd::Start());
      common.push_back("--elastic_server=" + etcd->url());
      std::fprintf(stderr, "oar launch: etcd-server on %s (its log: %s)\n", etcd->url().c_str(), etcd->log().c_str());
    }
    common.push_back("--trainers=" + FLAGS_trainers);
    std::string server;
    gflags::GetCommandLineOption("elastic_server", &server);
    OAR_ASSIGN_OR_RETURN(etcd_client, elastic::EtcdClient::Connect(etcd ? etcd->url() : server, absl::Seconds(10)));
  }
  const Command* run = FindCommand("run");
  std::vector<gflags::CommandLineFlagInfo> all;
  gflags::GetAllFlags(&all);
  for (const auto& f : all) {  // those set here that `oar run` reads: a child's own defaults are the same
    if (f.is_default || !CommandReads(*run, f.name)) continue;
    if (std::find(std::begin(kPerChildFlags), std::end(kPerChildFlags), f.name) != std::end(kPerChildFlags)) continue;
    common.push_back(absl::StrCat("--", f.name, "=", f.current_value));
  }
  std::vector<ChildSpec> specs;
  std::vector<std::string> names;
  std::vector<int> trainer_of;
  const std::string trainers_num = std::to_string(trainers);
  for (int i = 0; i < pservers; ++i) {
    specs.push_back({absl::StrCat("pserver.", i),
                     common,
                     {{"PADDLE_TRAINING_ROLE", "PSERVER"},
                      {"PADDLE_TRAINERS_NUM", trainers_num},
                      {"PADDLE_PSERVER_ENDPOINTS", ep_list},
                      {"PADDLE_CURRENT_ENDPOINT", eps[i]}}});
    trainer_of.push_back(-1);
  }
  for (int i = 0; i < trainers; ++i) {
    std::vector<std::string> argv = common;
    argv.push_back("--report");
    std::string cpu;
    if (FlagGiven("cpu_num") && gflags::GetCommandLineOption("cpu_num", &cpu)) {
      argv.push_back("--cpu_num=" + cpu);
    } else if (std::getenv("CPU_NUM") == nullptr) {
      argv.push_back("--cpu_num=1");  // one place per trainer unless asked (CPU_NUM or --cpu_num)
    }
    if (!FLAGS_step_log_dir.empty())
      argv.push_back(absl::StrCat("--step_log=", FLAGS_step_log_dir, "/trainer.", i, ".steps"));
    if (!gpus.empty()) argv.push_back(absl::StrCat("--selected_gpus=", gpus[static_cast<size_t>(i) % gpus.size()]));
    ChildSpec spec{absl::StrCat("trainer.", i),
                   argv,
                   {{"PADDLE_TRAINING_ROLE", "TRAINER"},
                    {"PADDLE_TRAINERS_NUM", trainers_num},
                    {"PADDLE_TRAINER_ID", std::to_string(i)}}};
    if (!nccl2) spec.env.push_back({"PADDLE_PSERVER_ENDPOINTS", ep_list});
    if (n_tr_eps > 0) {
      spec.env.push_back({"PADDLE_TRAINER_ENDPOINTS", trainer_list});
      spec.env.push_back({"PADDLE_CURRENT_ENDPOINT", eps[static_cast<size_t>(n_ps_eps + i)]});
    }
    specs.push_back(std::move(spec));
    trainer_of.push_back(i);
  }
  // Every process on one host: their share of the CPUs (host_share.h).
  OAR_ASSIGN_OR_RETURN(const std::string binding,
                       ShareHost(&specs, pservers, trainers, FLAGS_bind_trainers,
                                 {.blas_threads = std::getenv("OPENBLAS_NUM_THREADS") != nullptr,
                                  .batch_wakeups = FLAGS_rpc_shm_batch_wakeups >= 0,
                                  .shm_spin = FLAGS_rpc_shm_spin_us >= 0}));
  for (const auto& s : specs) names.push_back(s.name);
  // The children's metrics files when --metrics_dir is not given: here,
  // removed when the launch ends.
  const std::string scratch =
      (std::filesystem::temp_directory_path() / absl::StrCat("oar_launch_", ::getpid())).string();
  struct RemoveScratch {
    std::string dir;
    ~RemoveScratch() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } remove_scratch{FLAGS_metrics_dir.empty() ? scratch : ""};
  if (FLAGS_metrics_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(scratch, ec);
    if (ec) return absl::PermissionDeniedError(absl::StrCat(scratch, ": ", ec.message()));
  }
  std::vector<std::string> metrics_files;
  OAR_RETURN_IF_ERROR(AddObservabilityFlags(&specs, metrics_ports, scratch, &metrics_files));
  // What an elastic job's added trainer starts from: trainer i's first.
  std::vector<ChildSpec> first_spec(specs.begin() + pservers, specs.end());
  const char* mode = plan.mode;
  if (nccl2) {
    std::fprintf(stderr, "oar launch: %d trainer(s) on %s, nccl2 (all-reduce among the trainers)\n", trainers,
                 trainer_list.c_str());
  } else {
    std::fprintf(stderr, "oar launch: %d pserver(s) on %s, %d trainer(s), %s\n", pservers, ep_list.c_str(), trainers,
                 mode);
  }

  if (!binding.empty()) std::fprintf(stderr, "oar launch: %s\n", binding.c_str());
  if (!batch_note.empty()) std::fprintf(stderr, "oar launch: %s\n", batch_note.c_str());

  const auto start = std::chrono::steady_clock::now();
  LaunchMonitor monitor(names, trainer_of, FLAGS_log_dir);
  OAR_RETURN_IF_ERROR(monitor.OpenLogs());
  struct sigaction sa {};
  sa.sa_handler = OnLaunchSignal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGHUP, &sa, nullptr);  // the terminal closed: stop the cluster as for Ctrl-C
  // Child i serves its endpoint (a pserver; a trainer that has one) and
  // its metrics on the sockets made for them.
  for (size_t i = 0; i < specs.size(); ++i) {
    const int endpoint = trainer_of[i] < 0 ? static_cast<int>(i) : (n_tr_eps > 0 ? n_ps_eps + trainer_of[i] : -1);
    if (endpoint >= 0) specs[i].listen_fds.push_back(sockets.fds[static_cast<size_t>(endpoint)]);
    if (FLAGS_metrics) specs[i].listen_fds.push_back(sockets.fds[static_cast<size_t>(n_eps) + i]);
  }
  sockets.fds.clear();  // Start closes each once its child has it
  ProcessGroup group;
  OAR_RETURN_IF_ERROR(group.Start(
      std::move(specs), [&monitor](size_t c, const std::string& line, bool out) { monitor.OnLine(c, line, out); }));
  // An elastic job's trainers: the live process of each id, another
  // started on an id whose process is gone (a fresh name: trainer.1.run2).
  std::vector<int> runs(static_cast<size_t>(trainers), 1);
  ChaosRunner chaos_runner(
      std::move(plan.chaos), trainers,
      {.process_of = [&](int id) -> std::optional<size_t> {
         for (size_t i = group.size(); i-- > 0;) {
           if (trainer_of[i] == id && group.running(i)) return i;
         }
         return std::nullopt;
       },
       .kill =
           [&](size_t i, int signal) {
             group.SignalOne(i, signal);
             if (signal == SIGSTOP) monitor.ChildGone(i);  // lost to the job, though its process stays
           },
       .has_stepped = [&](size_t i) { return monitor.HasStepped(i); },
       .start = [&](int id) -> absl::StatusOr<std::string> {
         const std::string name = absl::StrCat("trainer.", id, ".run", ++runs[static_cast<size_t>(id)]);
         OAR_ASSIGN_OR_RETURN(ChildSpec s, RespawnSpec(first_spec[static_cast<size_t>(id)], name, FLAGS_metrics));
         OAR_RETURN_IF_ERROR(monitor.AddChild(name, id));
         OAR_RETURN_IF_ERROR(group.Add(std::move(s)));
         names.push_back(name);
         trainer_of.push_back(id);
         metrics_files.push_back(
             absl::StrCat(FLAGS_metrics_dir.empty() ? scratch : FLAGS_metrics_dir, "/", name, ".prom"));
         return name;
       }});
  auto stop = [&](absl::Status why) {
    group.StopAll();
    group.DrainOutput();
    monitor.Finish();
    return why;
  };
  std::optional<std::chrono::steady_clock::time_point> trainers_done_at;
  bool etcd_said = false;
  for (;;) {
    monitor.Tick();
    for (const ChildExit& e : group.Poll()) {
      const bool is_trainer = trainer_of[e.index] >= 0;
      // An elastic job's trainer lost to a signal (killed, out of memory)
      // or taken out by the pservers (it woke past its lease) leaves it;
      // one that fails with an error stops it, as in any job.
      if (elastic && is_trainer && (e.signal != 0 || e.code == kExitTakenOut)) {
        monitor.ChildGone(e.index);
        if (e.signal != 0) {
          std::fprintf(stderr, "oar launch: %s ended (killed by signal %d); the job goes on without it\n",
                       names[e.index].c_str(), e.signal);
        } else {
          std::fprintf(stderr, "oar launch: %s ended: the pservers had taken it out; the job goes on without it\n",
                       names[e.index].c_str());
        }
        const absl::Status forgot = ForgetDeadTrainer(etcd_client.get(), ElasticJobId(), trainer_of[e.index], e.pid);
        if (!forgot.ok()) std::fprintf(stderr, "oar launch: %s\n", std::string(forgot.message()).c_str());
        continue;
      }
      // A pserver exits 0 once every trainer has said COMPLETE (which a
      // trainer does before its final evaluation); one that stops early
      // shows up as the trainers' RPC errors.
      if (e.code != 0) return stop(absl::AbortedError(Explain(group, monitor, e)));
    }
    bool any = false, trainer_running = false;
    for (size_t i = 0; i < group.size(); ++i) {
      any |= group.running(i);
      trainer_running |= group.running(i) && trainer_of[i] >= 0 && !chaos_runner.frozen(i);
    }
    if (!any) break;
    if (!trainer_running) chaos_runner.KillFrozen();  // the job is done without them
    if (!trainer_running && !trainers_done_at) trainers_done_at = std::chrono::steady_clock::now();
    if (g_signal != 0) {
      return stop(
          absl::CancelledError(absl::StrCat("interrupted (signal ", g_signal.load(), "); stopped every process")));
    }
    if (trainers_done_at && std::chrono::steady_clock::now() - *trainers_done_at >
                                std::chrono::milliseconds(FLAGS_pserver_exit_timeout_ms)) {
      group.StopAll();  // the trainers are done; a pserver that lingers is told to go
      break;
    }
    if (elastic && !trainers_done_at) {
      if (absl::Status s = chaos_runner.Tick(monitor.JobSteps()); !s.ok()) return stop(s);
    }
    if (etcd != nullptr && !etcd_said && !etcd->alive()) {
      std::fprintf(stderr, "oar launch: the job's etcd-server exited (its log: %s)\n", etcd->log().c_str());
      etcd_said = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  group.DrainOutput();
  monitor.Finish();
  if (!FLAGS_timeline.empty()) OAR_RETURN_IF_ERROR(MergeTimeline(names));
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const LaunchShape shape{
      .nccl2 = nccl2, .pservers = pservers, .trainers = trainers, .mode = mode, .data_feed = async_executor};
  std::vector<std::string> extra;
  bool once = true;
  if (elastic && nccl2) {  // no chunks: the rings, each from the commit it restored
    for (const RingFormed& r : monitor.Rings()) {
      extra.push_back(absl::StrCat("ring ", r.ring, ": trainers ", r.trainers, " from step ", r.step, " (epoch ",
                                   r.epoch, ", example ", r.offset, ")"));
    }
    for (const std::string& done : chaos_runner.done()) extra.push_back(absl::StrCat("chaos: ", done));
  } else if (elastic) {
    // AsyncExecutor trainers make one pass over their files' chunks.
    int64_t files = 0;
    if (async_executor) {
      OAR_ASSIGN_OR_RETURN(const std::vector<std::string> listed, ExpandFiles(FLAGS_files));
      files = static_cast<int64_t>(listed.size());
    }
    const int epochs = async_executor ? 1 : FLAGS_epochs;
    DoneInEtcd done_in_etcd;  // the record the trainers' lines are checked against
    elastic::TaskQueue record(etcd_client.get(), ElasticJobId(), "launcher", 0);
    for (int e = 1; e <= epochs; ++e) {
      const absl::StatusOr<elastic::EpochProgress> p = record.Progress(e);
      if (!p.ok()) continue;  // etcd gone, or the epoch never opened: the lines alone
      for (const auto& [c, member] : p->done) done_in_etcd[{e, c}] = member;
    }
    extra = ElasticSummaryLines(monitor.Trainers(), monitor.Chunks(), names, epochs, ElasticChunks(trainers, files),
                                chaos_runner.done(), &once, done_in_etcd);
  }
  if (elastic) {
    const std::vector<std::string> not_reached = chaos_runner.NotReached();
    if (!not_reached.empty()) {
      extra.push_back(absl::StrCat("chaos not reached (the job ended at step ", monitor.JobSteps(),
                                   "): ", absl::StrJoin(not_reached, ", ")));
    }
  }
  PrintLaunchSummary(shape, monitor.Trainers(), monitor.FirstStepSeconds(), wall, names, metrics_files, extra);
  if (!once && FLAGS_max_steps == 0) return absl::DataLossError("some chunks were not trained exactly once (above)");
  return absl::OkStatus();
}

}  // namespace

int RunLaunch(const std::vector<std::string>& args) {
  const int code = RunWithoutArgs("launch", args, Launch);
  // Interrupted: the shell's convention, 128 + the signal (130 for Ctrl-C).
  return code != 0 && g_signal != 0 ? 128 + g_signal.load() : code;
}

}  // namespace oar::cli
