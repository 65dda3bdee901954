// `oar export`: writes a model's programs as serialized ProgramDesc files
// (main.pb, startup.pb) that `oar inspect`, the transpiler and Fluid read.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli/command.h"
#include "cli/model_build.h"
#include "common/base/status.h"
#include "gflags/gflags.h"

DEFINE_string(out, "", "directory to write the programs into (created if missing)");

namespace oar::cli {
namespace {

absl::Status Export() {
  if (FLAGS_out.empty()) return absl::InvalidArgumentError("--out DIR is required");
  OAR_ASSIGN_OR_RETURN(auto programs, BuildModelFromFlags());
  std::error_code ec;
  std::filesystem::create_directories(FLAGS_out, ec);
  if (ec) return absl::PermissionDeniedError(FLAGS_out + ": " + ec.message());
  OAR_RETURN_IF_ERROR(WriteFileBytes(FLAGS_out + "/main.pb", programs->main.desc().Serialize()));
  OAR_RETURN_IF_ERROR(WriteFileBytes(FLAGS_out + "/startup.pb", programs->startup.desc().Serialize()));
  std::cout << "wrote " << FLAGS_out << "/main.pb (" << programs->main.desc().Block(0).OpSize() << " ops) and "
            << FLAGS_out << "/startup.pb (" << programs->startup.desc().Block(0).OpSize() << " ops)\n";
  return absl::OkStatus();
}

}  // namespace

int RunExport(const std::vector<std::string>& args) { return RunWithoutArgs("export", args, Export); }

}  // namespace oar::cli
