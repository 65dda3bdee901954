// save_checkpoint / load_checkpoint (common/api/io.h): save_persistables
// plus a manifest — one line per variable: name, dtype, shape — written last
// and atomically, so an interrupted save never looks complete. Loading
// checks the whole manifest against the program before it reads a byte: a
// checkpoint of another model is told as such (what it lacks, what it holds
// instead), a variable of another shape or type is named with both, and
// what the checkpoint holds beyond the program is reported to the caller
// (the optimizer state of another optimizer, say), not loaded.
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/api/io.h"
#include "common/base/status.h"
#include "common/framework/sparse_table.h"
#include "common/framework/tensor_io.h"

namespace oar {
namespace {

constexpr char kManifest[] = "__manifest__";
constexpr char kManifestHeader[] = "oar-checkpoint 1";

std::string JoinPath(const std::string& dir, const std::string& name) {
  return (std::filesystem::path(dir) / name).string();
}

// "a, b, c, d and 5 more": at most `shown` names.
std::string SomeOf(const std::vector<std::string>& names, size_t shown = 4) {
  if (names.size() <= shown) return absl::StrJoin(names, ", ");
  return absl::StrCat(absl::StrJoin(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(shown), ", "), " and ",
                      names.size() - shown, " more");
}

// name → (dtype, shape) as the manifest lists them.
using Manifest = std::map<std::string, std::pair<std::string, std::string>>;

absl::StatusOr<Manifest> ReadManifest(const std::string& dirname) {
  if (!std::filesystem::is_directory(dirname)) {
    return absl::NotFoundError(absl::StrCat(dirname, " is not a folder (a checkpoint is the folder --save wrote)"));
  }
  std::ifstream in(JoinPath(dirname, kManifest));
  if (!in) {
    return absl::FailedPreconditionError(absl::StrCat(dirname, " is not a complete checkpoint (no ", kManifest,
                                                      "; the save may have been interrupted)"));
  }
  std::string line;
  std::getline(in, line);
  if (line != kManifestHeader) return absl::InvalidArgumentError(absl::StrCat(dirname, ": unknown checkpoint format"));
  Manifest listed;
  while (std::getline(in, line)) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    if (f.size() != 3) return absl::InvalidArgumentError(absl::StrCat(dirname, ": bad manifest line '", line, "'"));
    listed[f[0]] = {f[1], f[2]};
  }
  return listed;
}

}  // namespace

absl::Status save_checkpoint(Executor& exe, Scope* scope, const std::string& dirname, const ProgramDesc& program) {
  std::error_code ec;
  std::filesystem::create_directories(dirname, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot create ", dirname, ": ", ec.message()));
  std::filesystem::remove(JoinPath(dirname, kManifest), ec);  // incomplete until rewritten
  OAR_RETURN_IF_ERROR(save_persistables(exe, scope, dirname, program));
  std::string manifest = absl::StrCat(kManifestHeader, "\n");
  for (const auto& name : PersistableVarNames(program)) {
    const Variable* var = scope->FindVar(name);
    if (var->IsType<SparseTable>()) {  // rows grow: its declared shape, which load checks
      const VarDesc& v = *program.Block(0).FindVar(name);
      absl::StrAppend(&manifest, name, " ", DataTypeName(v.dtype), " ", absl::StrJoin(v.shape, ","), "\n");
      continue;
    }
    const Tensor& t = var->Get<Tensor>();
    absl::StrAppend(&manifest, name, " ", DataTypeName(t.dtype()), " ", absl::StrJoin(t.dims(), ","), "\n");
  }
  return WriteFileAtomically(JoinPath(dirname, kManifest), manifest);
}

absl::Status load_checkpoint(Executor& exe, Scope* scope, const std::string& dirname, const ProgramDesc& program,
                             std::vector<std::string>* left_out) {
  OAR_ASSIGN_OR_RETURN(Manifest listed, ReadManifest(dirname));
  const std::vector<std::string> wanted = PersistableVarNames(program);
  std::vector<std::string> missing;
  absl::Status mismatch;  // the first variable of another shape or type
  for (const auto& name : wanted) {
    auto it = listed.find(name);
    if (it == listed.end()) {
      missing.push_back(name);
      continue;
    }
    const VarDesc& v = *program.Block(0).FindVar(name);
    std::string want = absl::StrJoin(v.shape, ",");
    if (mismatch.ok() && (it->second.first != DataTypeName(v.dtype) ||
                          (!v.shape.empty() && !DDim(v.shape).HasUnknown() && it->second.second != want))) {
      mismatch = absl::InvalidArgumentError(absl::StrCat(dirname, ": '", name, "' is ", it->second.first, "[",
                                                         it->second.second, "], the program wants ",
                                                         DataTypeName(v.dtype), "[", want, "]"));
    }
  }
  std::vector<std::string> extra;
  const std::set<std::string> known(wanted.begin(), wanted.end());
  for (const auto& [name, shape] : listed) {
    if (!known.count(name)) extra.push_back(name);
  }
  if (!missing.empty()) {
    std::string holds =
        extra.empty() ? "" : absl::StrCat(" and holds ", extra.size(), " it does not (", SomeOf(extra), ")");
    return absl::InvalidArgumentError(absl::StrCat(
        dirname, " is not a checkpoint of this program: it lacks ", missing.size(), " of the program's ", wanted.size(),
        " variables (", SomeOf(missing), ")", holds,
        missing.size() == wanted.size() ? "; it was saved from another model" : "; was it saved from another model?"));
  }
  OAR_RETURN_IF_ERROR(mismatch);
  if (left_out != nullptr) *left_out = extra;
  return load_persistables(exe, scope, dirname, program);
}

}  // namespace oar
