// oar: one binary for every role. `oar <command> --help` for each command.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string>

#include "absl/synchronization/mutex.h"
#include "cli/command.h"
#include "cli/flag_parse.h"
#include "cli/runtime_flags.h"
#include "common/base/blas_core.h"
#include "common/base/listen_sockets.h"
#include "common/framework/op_registry.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "pserver/pserver_ops.h"
#include "trainer/dist_ops.h"
#include "trainer/gen_nccl_id_op.h"

DECLARE_string(data);
DECLARE_string(program);  // cli/train_cmd.cc

namespace {

void PrintUsage() {
  std::cout << "oar — a distributed trainer for PaddlePaddle Fluid programs\n\n"
               "usage: oar <command> [flags]\n\ncommands:\n";
  size_t width = 0;  // the longest name, so that every summary starts in one column
  for (const auto& c : oar::cli::Commands()) width = std::max(width, c.name.size());
  for (const auto& c : oar::cli::Commands()) {
    std::cout << "  " << c.name << std::string(width + 2 - c.name.size(), ' ') << c.summary << "\n";
  }
  std::cout << "\nRun 'oar <command> --help' for a command's flags.\n";
}

}  // namespace

int main(int argc, char** argv) {
  oar::ReexecWithBestBlasCore(argv);  // first: it may restart the process (blas_core.h)
  google::InitGoogleLogging(argv[0]);
  // Debian's Abseil is built with Mutex deadlock detection on: a lock-order
  // graph updated on every lock, 2% of a pserver's cycles. Oar's lock order
  // is fixed by design (each class documents it); production runs skip it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Every op a transpiled program may hold, so any command can run or
  // inspect any role's program.
  oar::OpRegistry::ExtendGlobal(oar::RegisterDistOps);
  oar::OpRegistry::ExtendGlobal(oar::RegisterGenNcclIdOp);
  oar::OpRegistry::ExtendGlobal(oar::RegisterPserverOps);
  FLAGS_logtostderr = true;
  // Sockets a launcher handed over (LISTEN_FDS): servers serve them rather
  // than bind their ports (common/base/listen_sockets.h).
  if (absl::Status s = oar::AdoptInheritedListenSockets(); !s.ok()) return oar::cli::Fail(std::string(s.message()));
  VLOG(1) << "OpenBLAS kernels: " << oar::BlasCoreName()
          << (std::getenv("OPENBLAS_CORETYPE") ? " (OPENBLAS_CORETYPE)" : "");
  if (argc >= 2 && std::string(argv[1]) == "--version") {
    std::cout << "oar " << OAR_VERSION << "\n";
    return 0;
  }
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" || std::string(argv[1]) == "help") {
    PrintUsage();
    return argc < 2 ? 1 : 0;
  }
  const std::string name = argv[1];
  for (const auto& cmd : oar::cli::Commands()) {
    if (cmd.name != name) continue;
    for (int i = 2; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--help" || a == "-h" || a == "--helpfull") {
        oar::cli::PrintCommandHelp(cmd);
        return 0;
      }
    }
    std::vector<std::string> given;
    absl::StatusOr<std::vector<std::string>> parsed = oar::cli::ParseCommandFlags(cmd, argc, argv, &given);
    if (!parsed.ok()) return oar::cli::Fail(std::string(parsed.status().message()));
    const std::vector<std::string>& args = *parsed;
    // gflags' own help and version flags: answered, never a run that ignores them.
    for (const std::string& g : given) {
      if (g == "version") {
        std::cout << "oar " << OAR_VERSION << "\n";
        return 0;
      }
      if (g == "helpshort" || g == "helpxml" || g == "helpon" || g == "helpmatch" || g == "helppackage") {
        oar::cli::PrintCommandHelp(cmd);
        return 0;
      }
    }
    if (absl::Status s = oar::cli::CheckFlagsRead(cmd, given); !s.ok()) return oar::cli::Fail(std::string(s.message()));
    // Your own arrays: a program file's trainers read them (cli/data_flags.h).
    const bool own_data = !FLAGS_program.empty() && cmd.name != "async-train";
    if (oar::cli::CommandReads(cmd, "data") && FLAGS_data != "fashion_mnist" && !own_data) {
      return oar::cli::Fail("--data '" + FLAGS_data + "': " + cmd.name +
                            " --model trains on fashion_mnist (read from "
                            "--data_dir); a --program also reads npy:DIR and npy:FILE.npz; MultiSlot files go "
                            "through --data_feed and --files");
    }
    oar::cli::ApplyRuntimeFlags();  // --check_nan_inf, --gpu_allow_tf32
    return cmd.run(args);
  }
  std::vector<std::string> names;
  for (const auto& c : oar::cli::Commands()) names.push_back(c.name);
  const std::string near = oar::cli::NearestName(name, names);
  std::cerr << "oar: error: unknown command '" << name << "'" << (near.empty() ? "" : " (did you mean '" + near + "'?)")
            << "\n";
  PrintUsage();
  return 2;
}
