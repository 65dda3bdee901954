// `oar export`: writes a model's programs as serialized ProgramDesc files
// (main.pb, startup.pb) that `oar inspect`, the transpiler and Fluid read.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli/command.h"
#include "cli/model_build.h"
#include "common/status.h"
#include "gflags/gflags.h"

DEFINE_string(out, "", "directory to write the programs into (created if missing)");
DECLARE_string(model);
DECLARE_string(optimizer);
DECLARE_double(lr);
DECLARE_int32(seed);
DECLARE_int32(batch_size);

namespace oar::cli {
namespace {

absl::Status WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return absl::PermissionDeniedError(path + ": " + std::strerror(errno));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) return absl::DataLossError(path + ": write failed");
  return absl::OkStatus();
}

absl::Status Export() {
  if (FLAGS_out.empty()) return absl::InvalidArgumentError("--out DIR is required");
  BuildOptions bo{FLAGS_model, FLAGS_optimizer, static_cast<float>(FLAGS_lr), FLAGS_seed, FLAGS_batch_size};
  OAR_ASSIGN_OR_RETURN(auto programs, BuildModel(bo));
  std::error_code ec;
  std::filesystem::create_directories(FLAGS_out, ec);
  if (ec) return absl::PermissionDeniedError(FLAGS_out + ": " + ec.message());
  OAR_RETURN_IF_ERROR(WriteFile(FLAGS_out + "/main.pb", programs->main.desc().Serialize()));
  OAR_RETURN_IF_ERROR(WriteFile(FLAGS_out + "/startup.pb", programs->startup.desc().Serialize()));
  std::cout << "wrote " << FLAGS_out << "/main.pb (" << programs->main.desc().Block(0).OpSize()
            << " ops) and " << FLAGS_out << "/startup.pb ("
            << programs->startup.desc().Block(0).OpSize() << " ops)\n";
  return absl::OkStatus();
}

}  // namespace

int RunExport(const std::vector<std::string>& args) {
  if (!args.empty()) return Fail("export takes no positional arguments (got '" + args[0] + "')");
  absl::Status s = Export();
  return s.ok() ? 0 : Fail(std::string(s.message()));
}

}  // namespace oar::cli
