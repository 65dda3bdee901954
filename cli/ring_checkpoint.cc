#include "cli/ring_checkpoint.h"

#include <filesystem>
#include <fstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/api/io.h"
#include "common/base/status.h"

namespace oar::cli {

namespace fs = std::filesystem;

namespace {

constexpr char kPrefix[] = "step-";

// The step a DIR/step-<S> entry holds, or -1.
int64_t StepOf(const fs::path& p) {
  const std::string name = p.filename().string();
  int64_t step = -1;
  if (name.rfind(kPrefix, 0) != 0 || !absl::SimpleAtoi(name.substr(sizeof(kPrefix) - 1), &step)) return -1;
  return step;
}

}  // namespace

absl::Status WriteRingCommit(Executor& exe, Scope* scope, const ProgramDesc& program, const std::string& dir,
                             const TrainingPosition& pos) {
  const fs::path final_path = fs::path(dir) / absl::StrCat(kPrefix, pos.step);
  const fs::path tmp = fs::path(dir) / absl::StrCat(".writing-", kPrefix, pos.step);
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec)
    return absl::PermissionDeniedError(
        absl::StrCat("--checkpoint_dir: cannot create ", tmp.string(), ": ", ec.message()));
  OAR_RETURN_IF_ERROR(save_checkpoint(exe, scope, tmp.string(), program));
  {
    std::ofstream f(tmp / "position");
    f << pos.step << " " << pos.epoch << " " << pos.offset << "\n";
    if (!f) return absl::DataLossError(absl::StrCat("--checkpoint_dir: cannot write ", (tmp / "position").string()));
  }
  fs::remove_all(final_path, ec);
  fs::rename(tmp, final_path, ec);
  if (ec)
    return absl::DataLossError(
        absl::StrCat("--checkpoint_dir: cannot rename into ", final_path.string(), ": ", ec.message()));
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const int64_t s = StepOf(e.path());
    if (s >= 0 && s < pos.step && !fs::exists(e.path() / "resumed")) fs::remove_all(e.path(), ec);
  }
  return absl::OkStatus();
}

void MarkRingCommitResumed(const std::string& dir, int64_t step) {
  const fs::path p = fs::path(dir) / absl::StrCat(kPrefix, step);
  if (fs::is_directory(p)) std::ofstream(p / "resumed") << "a ring restored this commit\n";
}

absl::StatusOr<std::optional<TrainingPosition>> LoadNewestRingCommit(Executor& exe, Scope* scope,
                                                                     const ProgramDesc& program,
                                                                     const std::string& dir) {
  std::error_code ec;
  fs::path newest;
  int64_t best = -1;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const int64_t s = StepOf(e.path());
    if (s > best && fs::exists(e.path() / "position")) {
      best = s;
      newest = e.path();
    }
  }
  if (best < 0) return std::optional<TrainingPosition>();
  std::vector<std::string> left_out;
  OAR_RETURN_IF_ERROR(Annotate(load_checkpoint(exe, scope, newest.string(), program, &left_out),
                               absl::StrCat("--checkpoint_dir: restarting from ", newest.string())));
  TrainingPosition pos;
  std::ifstream f(newest / "position");
  if (!(f >> pos.step >> pos.epoch >> pos.offset) || pos.step < 0 || pos.epoch < 1 || pos.offset < 0) {
    return absl::DataLossError(absl::StrCat((newest / "position").string(), " is not '<step> <epoch> <offset>'"));
  }
  return std::optional<TrainingPosition>(pos);
}

}  // namespace oar::cli
