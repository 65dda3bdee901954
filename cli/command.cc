#include "cli/command.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/role_env.h"
#include "gflags/gflags.h"

namespace oar::cli {

int RunTrain(const std::vector<std::string>& args);
int RunExport(const std::vector<std::string>& args);
int RunInspect(const std::vector<std::string>& args);
int RunTranspile(const std::vector<std::string>& args);
int RunRun(const std::vector<std::string>& args);
int RunLaunch(const std::vector<std::string>& args);
int RunAsyncTrain(const std::vector<std::string>& args);
int RunGenCtrData(const std::vector<std::string>& args);
int RunDeploy(const std::vector<std::string>& args);

const std::vector<Command>& Commands() {
  static const auto* cmds = new std::vector<Command>{
      {"train",
       "train a model from examples/, or a program file (e.g. written by paddle.static), in this process",
       "oar train --model NAME [flags]\n       oar train --program main.pb --startup startup.pb --feed_names VAR,... "
       "--loss_name LOSS [--data fashion_mnist|npy:DIR|npy:FILE.npz | --data_feed DESC --files GLOBS] "
       "[--test_data npy:DIR | --test_files GLOBS] [--fetch NAME,...] [--params DIR|FILE] [flags]",
       "cli/train_cmd.cc",
       {"program",
        "startup",
        "loss_name",
        "feed_names",
        "fetch",
        "params",
        "selected_gpus",
        "gpu_allow_tf32",
        "data_feed",
        "files",
        "test_files",
        "test_data",
        "dataset",
        "shuffle",
        "drop_last",
        "prefetch",
        "skip_bad_lines",
        "metrics_port",
        "metrics_host",
        "metrics_file",
        "metrics_linger_s",
        "profile",
        "profile_sorted_key",
        "profile_path",
        "check_nan_inf"},
       RunTrain,
       {{"program", "a main program file (.pb) to train instead of --model (e.g. written by paddle.static)"},
        {"startup", "its startup program file (.pb); required with --program"},
        {"fetch", "with --program: scalar variables (e.g. the accuracy) to average over the test data"},
        {"loss_name", "with --program: the loss variable to fetch (also --loss)"},
        {"feed_names",
         "with --program: the variables the data feeds, matched by name to npy arrays and MultiSlot "
         "slots (Fashion-MNIST: the image, then the label), \"x,label\" (also --feed)"},
        {"data_feed",
         "with --program: the DataFeedDesc (Fluid's text format) of MultiSlot --files; each used slot "
         "feeds the variable of its name"},
        {"files", "with --data_feed: the training files, comma-separated paths or globs"},
        {"test_files", "with --data_feed: MultiSlot files to evaluate on after training (test_loss=, test_<fetch>=)"},
        {"skip_bad_lines", "with --data_feed: count and skip malformed lines instead of stopping at the first"}}},
      {"deploy",
       "write a job's Kubernetes manifests (plain, PaddleFlow's or Kubeflow's PaddleJob) from one description",
       "oar deploy --pservers P --trainers T --image IMG [--mode pserver|nccl2] [--runtime_split_send_recv] [--async "
       "[--half_async | --geo_sgd_mode]] [--elastic --trainers MIN:MAX] [--format plain|paddle-operator|kubeflow] "
       "--out DIR [--name NAME] [--port N] [--model M] [--epochs N]",
       "cli/deploy_cmd.cc",
       {"pservers", "trainers", "mode", "out", "model", "epochs", "elastic", "async", "runtime_split_send_recv",
        "half_async", "geo_sgd_mode", "geo_sgd_need_push_nums"},
       RunDeploy,
       {{"pservers", "the number of pservers (pserver mode; default 1)"},
        {"trainers",
         "the number of trainers (default 1); with --elastic MIN:MAX (the trainer StatefulSet's replicas: MAX)"},
        {"elastic",
         "an elastic job (pserver mode, sync or with --async; or nccl2 mode): an etcd StatefulSet, and trainers as a "
         "StatefulSet that kubectl scale resizes between MIN and MAX"},
        {"async", "pserver mode trains async (every pod's `oar run` gets --async)"},
        {"runtime_split_send_recv",
         "every pod's trainers cut gradients into the pservers' blocks as they send; with --async through Fluid's "
         "communicator (--half_async: half-async), whose FLAGS_communicator_* each pod reads from its environment"},
        {"geo_sgd_mode", "with --async: GEO-SGD (--geo_sgd_need_push_nums N: steps between exchanges)"},
        {"mode", "pserver or nccl2 (default pserver)"},
        {"out", "the directory the manifests go into (created if missing)"},
        {"model", "the model every pod trains, passed to oar run (default fashion_mlp)"},
        {"epochs", "passes the trainers make (default 2)"}}},
      {"export",
       "write a model's main.pb and startup.pb",
       "oar export --model NAME --out DIR [flags]",
       "cli/export_cmd.cc",
       {"model", "optimizer", "lr", "seed", "batch_size"},
       RunExport},
      {"inspect",
       "print a serialized program (blocks, vars, ops) and every op Oar cannot run in it",
       "oar inspect FILE.pb | oar inspect --ops [FILE.pb]",
       "cli/inspect_cmd.cc",
       {},
       RunInspect},
      {"transpile",
       "split a program into trainer and pserver programs (DistributeTranspiler)",
       "oar transpile (--model NAME | --program main.pb --startup startup.pb) --pservers EP,EP --trainers N "
       "--trainer_id I [--async] [--mode pserver|nccl2] --out DIR [--json]",
       "cli/transpile_cmd.cc",
       {"out", "model", "optimizer", "lr", "seed", "batch_size", "trainers"},
       RunTranspile},
      {"run",
       "play one role of a distributed job, as PADDLE_TRAINING_ROLE and the PADDLE_* variables say",
       "PADDLE_TRAINING_ROLE=TRAINER|PSERVER PADDLE_TRAINERS_NUM=N PADDLE_PSERVER_ENDPOINTS=EP,EP ... oar run "
       "--model NAME [flags]\n\n(reads " +
           absl::StrJoin(RoleEnvVariables(), ", ") + "; flags override them)",
       "cli/run_cmd.cc",
       {"model",
        "optimizer",
        "lr",
        "seed",
        "batch_size",
        "epochs",
        "data_dir",
        "data",
        "limit",
        "constant_init",
        "step_log",
        "max_steps",
        "program",
        "startup",
        "pservers",
        "trainers",
        "trainer_id",
        "current_endpoint",
        "trainer_endpoints",
        "sync",
        "async",
        "mode",
        "min_block_size",
        "no_slice",
        "split_method",
        "runtime_split_send_recv",
        "half_async",
        "geo_sgd_mode",
        "geo_sgd_need_push_nums",
        "loss_name",
        "feed_names",
        "data_feed",
        "files",
        "threads",
        "fetch",
        "debug",
        "skip_bad_lines",
        "test_files",
        "params",
        "metrics_port",
        "metrics_host",
        "metrics_file",
        "metrics_linger_s",
        "profile",
        "profile_sorted_key",
        "profile_path",
        "device",
        "selected_gpus",
        "gpu_allow_tf32",
        "collective_transport",
        "check_nan_inf",
        "test_data",
        "dataset",
        "shuffle",
        "drop_last",
        "prefetch"},
       RunRun,
       {{"batch_size", "the global batch (default 128): each trainer takes batch_size / trainers"},
        {"data_feed",
         "trainers train from MultiSlot files: a --program in sync or nccl2 mode through the data layer "
         "(--dataset, --shuffle), a --model or an --async program with AsyncExecutor threads"},
        {"files",
         "with --data_feed: the training files; trainer t takes file i when i % trainers == t (every "
         "file's line l when l % trainers == t, when there are fewer files than trainers)"},
        {"test_files",
         "with --data_feed: trainer 0 ends by evaluating on them (a model's test_auc=; a program's "
         "test_loss= and test_<fetch>=)"}},
       {"/cli/rpc_flags.cc", "/cli/communicator_flags.cc", "/cli/elastic_job.cc", "/cli/elastic_ring.cc"}},
      {"launch",
       "run a whole cluster (pservers and trainers, or nccl2 trainers) on this machine, with one progress "
       "display",
       "oar launch [--mode pserver] --pservers P --trainers T [--sync|--async] --model NAME [--epochs N] [--cpu_num N] "
       "[--log_dir DIR] [--device gpu]\n       oar launch --mode nccl2 --trainers T --model NAME [--cpu_num N] ...\n"
       "       oar launch --pservers P --trainers T --async --model ctr_dnn_dist --data_feed F --files 'glob' "
       "[--threads N] [--test_files 'glob']",
       "cli/launch_cmd.cc",
       {"pservers",
        "trainers",
        "log_dir",
        "cpu_num",
        "model",
        "optimizer",
        "lr",
        "seed",
        "batch_size",
        "epochs",
        "data_dir",
        "data",
        "limit",
        "constant_init",
        "max_steps",
        "sync",
        "async",
        "mode",
        "min_block_size",
        "no_slice",
        "split_method",
        "runtime_split_send_recv",
        "half_async",
        "geo_sgd_mode",
        "geo_sgd_need_push_nums",
        "program",
        "startup",
        "loss_name",
        "feed_names",
        "checkpoint_dir",
        "checkpoint_every",
        "fuse_all_reduce_ops",
        "fuse_parameter_memory_size",
        "data_feed",
        "files",
        "threads",
        "fetch",
        "skip_bad_lines",
        "test_files",
        "params",
        "metrics_linger_s",
        "device",
        "selected_gpus",
        "gpu_allow_tf32",
        "collective_transport",
        "check_nan_inf",
        "test_data",
        "dataset",
        "shuffle",
        "drop_last",
        "prefetch",
        "elastic",
        "chaos",
        "elastic_server",
        "job_id",
        "elastic_chunks",
        "elastic_commit_every"},
       RunLaunch,
       {{"log_dir", "write each process's log to DIR/<role>.<i>.log instead of the terminal"},
        {"pservers", "the number of pservers to start (1 when not given; none in nccl2 mode)"},
        {"trainers",
         "the number of trainers to start (default 1), in either mode; with --elastic MIN:MAX (it starts MAX)"},
        {"metrics_linger_s",
         "with --metrics: how long each process keeps serving its final metrics after its "
         "work ends, so a scrape sees the totals (default 0)"},
        {"mode", "pserver (pservers and trainers) or nccl2 (trainers that all-reduce among themselves)"},
        {"batch_size", "the global batch (default 128): each trainer takes batch_size / trainers"},
        {"data_feed",
         "trainers train from MultiSlot files: a --program in sync or nccl2 mode through the data layer "
         "(--dataset, --shuffle), a --model or an --async program with AsyncExecutor threads"},
        {"files",
         "with --data_feed: the training files, shared among the trainers by index (by line when fewer "
         "than the trainers)"},
        {"test_files",
         "with --data_feed: trainer 0 ends by evaluating on them (test_auc= for a model; test_loss= "
         "and test_<fetch>= for a program)"}},
       {"/cli/rpc_flags.cc", "/cli/communicator_flags.cc"}},
      {"async-train",
       "train a program on MultiSlot files with AsyncExecutor's lock-free threads",
       "oar async-train (--program main.pb --startup startup.pb | --model ctr_dnn) --data_feed data.prototxt "
       "--files 'dir/part-*' [--threads N] [--fetch loss,...] [--debug] [--skip_bad_lines] [--test_files 'glob'] "
       "[--params DIR|FILE] [--loss_name LOSS] [--step_log FILE]",
       "cli/async_train_cmd.cc",
       {"program", "startup", "model", "optimizer", "lr", "seed", "params", "loss_name", "step_log"},
       RunAsyncTrain,
       {{"program", "the main program file (.pb) to train"},
        {"startup", "its startup program file (.pb)"},
        {"params", "with --program: start from persistables Paddle saved (a directory or one combined file)"},
        {"loss_name", "with --program: the loss, for --step_log, the progress display and --test_files"},
        {"step_log", "append each batch's loss (any thread's, as it finishes) to this file, one per line"},
        {"model", "a model from examples/ that trains from MultiSlot files (ctr_dnn) instead of --program"}}},
      {"gen-ctr-data",
       "write MultiSlot CTR data from a planted logistic model (for ctr_dnn)",
       "oar gen-ctr-data --out DIR [--examples N] [--files K] [--seed S] [--batch_size B]",
       "cli/gen_ctr_data_cmd.cc",
       {"out", "files", "seed", "batch_size"},
       RunGenCtrData,
       {{"files", "the number of files per split (default 4)"},
        {"out", "the folder to write train/, test/ and data_feed.prototxt to"},
        {"batch_size", "the batch_size written into data_feed.prototxt (default 64)"},
        {"seed", "seed of the planted model and the examples"}}},
  };
  return *cmds;
}

void PrintCommandHelp(const Command& cmd) {
  std::cout << "usage: " << cmd.usage << "\n\n" << cmd.summary << "\n";
  std::vector<gflags::CommandLineFlagInfo> flags;
  gflags::GetAllFlags(&flags);
  bool header = false;
  for (const auto& f : flags) {
    const bool shared = std::find(cmd.shared_flags.begin(), cmd.shared_flags.end(), f.name) != cmd.shared_flags.end();
    if (!absl::EndsWith(f.filename, cmd.flags_file) && !shared) continue;
    if (!header) {
      std::cout << "\nflags:\n";
      header = true;
    }
    // A flag with a meaning of its own here (--pservers: a count, not
    // endpoints) has its own text, which gives its default.
    auto own = cmd.flag_help.find(f.name);
    if (own != cmd.flag_help.end()) {
      std::cout << "  --" << f.name << "\n      " << own->second << "\n";
      continue;
    }
    std::cout << "  --" << f.name << " (" << f.type << ", default "
              << (f.default_value.empty() ? "\"\"" : f.default_value) << ")\n      " << f.description << "\n";
  }
  // The flags of the libraries it runs (the RPC layer, the pserver, the
  // trainer runtime): read too, so listed too.
  header = false;
  for (const auto& f : flags) {
    if (absl::EndsWith(f.filename, cmd.flags_file) ||
        std::find(cmd.shared_flags.begin(), cmd.shared_flags.end(), f.name) != cmd.shared_flags.end()) {
      continue;
    }
    const bool from_dir = std::any_of(cmd.flag_dirs.begin(), cmd.flag_dirs.end(),
                                      [&f](const std::string& d) { return f.filename.find(d) != std::string::npos; });
    if (!from_dir) continue;
    if (!header) {
      std::cout << "\nflags of the RPC layer and the runtime:\n";
      header = true;
    }
    std::cout << "  --" << f.name << " (" << f.type << ", default "
              << (f.default_value.empty() ? "\"\"" : f.default_value) << ")\n      " << f.description << "\n";
  }
  std::cout << "\nAny flag may also be set as an environment variable FLAGS_<name>.\n";
  if (CommandReads(cmd, "feed_names")) std::cout << "--feed and --loss stand for --feed_names and --loss_name.\n";
}

const Command* FindCommand(const std::string& name) {
  for (const auto& c : Commands()) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

bool CommandReads(const Command& cmd, const std::string& name) {
  gflags::CommandLineFlagInfo f;
  if (!gflags::GetCommandLineFlagInfo(name.c_str(), &f)) return false;
  if (absl::EndsWith(f.filename, cmd.flags_file)) return true;
  if (std::find(cmd.shared_flags.begin(), cmd.shared_flags.end(), name) != cmd.shared_flags.end()) return true;
  for (const auto& dir : cmd.flag_dirs) {
    if (f.filename.find(dir) != std::string::npos) return true;
  }
  // glog's and gflags' own flags (logging, --flagfile...) go with every command.
  for (const char* ours : {"/cli/", "/common/", "/trainer/", "/pserver/", "/transpiler/", "/examples/", "/bench/"}) {
    if (f.filename.find(ours) != std::string::npos) return false;
  }
  return true;
}

absl::Status CheckFlagsRead(const Command& cmd, const std::vector<std::string>& given) {
  for (const auto& name : given) {
    if (CommandReads(cmd, name)) continue;
    std::vector<std::string> readers;
    for (const auto& c : Commands()) {
      if (CommandReads(c, name)) readers.push_back("oar " + c.name);
    }
    return absl::InvalidArgumentError(
        absl::StrCat("oar ", cmd.name, " does not read --", name,
                     readers.empty() ? "" : absl::StrCat(" (", absl::StrJoin(readers, ", "), " do)"), "; see 'oar ",
                     cmd.name, " --help'"));
  }
  return absl::OkStatus();
}

int Fail(const std::string& message) {
  std::cerr << "oar: error: " << message << "\n";
  return 1;
}

}  // namespace oar::cli

namespace oar::cli {

bool FlagGiven(const char* name) {
  gflags::CommandLineFlagInfo info;
  return gflags::GetCommandLineFlagInfo(name, &info) && !info.is_default;
}

int RunWithoutArgs(const std::string& command, const std::vector<std::string>& args, absl::Status (*body)()) {
  if (!args.empty()) return Fail(command + " takes no positional arguments (got '" + args[0] + "')");
  absl::Status s = body();
  return s.ok() ? 0 : Fail(std::string(s.message()));
}

absl::StatusOr<std::string> ReadFileBytes(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return absl::InvalidArgumentError(path + " is a folder, not a file");
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError("cannot open " + path + ": " + std::strerror(errno));
  std::stringstream buf;
  buf << f.rdbuf();
  return buf.str();
}

absl::Status WriteFileBytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return absl::PermissionDeniedError(path + ": " + std::strerror(errno));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) return absl::DataLossError(path + ": write failed");
  return absl::OkStatus();
}

}  // namespace oar::cli
