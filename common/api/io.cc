#include "common/api/io.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/base/status.h"
#include "common/framework/prepared_block.h"
#include "common/framework/tensor_io.h"

namespace oar {

namespace proto = paddle::framework::proto;

namespace {

std::string JoinPath(const std::string& dir, const std::string& name) {
  return (std::filesystem::path(dir) / name).string();
}

// A one-block program of save/load ops over `vars` (declared persistable).
ProgramDesc IoProgram(const ProgramDesc& src, const std::vector<std::string>& vars, const std::string& dirname,
                      const std::string& filename, bool save) {
  ProgramDesc p;
  BlockDesc* b = p.MutableBlock(0);
  std::vector<std::string> sorted = vars;
  std::sort(sorted.begin(), sorted.end());
  for (const auto& name : sorted) {
    VarDesc* v = b->Var(name);
    if (const VarDesc* d = src.Block(0).FindVar(name)) *v = *d;
    v->persistable = true;
  }
  if (!filename.empty()) {
    OpDesc* op = b->AppendOp();
    op->type = save ? "save_combine" : "load_combine";
    if (save)
      op->SetInput("X", sorted);
    else
      op->SetOutput("Out", sorted);
    op->SetAttr("file_path", JoinPath(dirname, filename));
    return p;
  }
  for (const auto& name : sorted) {
    OpDesc* op = b->AppendOp();
    op->type = save ? "save" : "load";
    if (save)
      op->SetInput("X", {name});
    else
      op->SetOutput("Out", {name});
    op->SetAttr("file_path", JoinPath(dirname, name));
  }
  return p;
}

// Runs a one-off program without adding it to the Executor's cache.
absl::Status RunOnce(Executor& exe, Scope* scope, const ProgramDesc& program) {
  OAR_ASSIGN_OR_RETURN(auto prepared, exe.Prepare(program, 0));
  return exe.RunPrepared(prepared.get(), scope);
}

}  // namespace

std::vector<std::string> PersistableVarNames(const ProgramDesc& program) {
  std::vector<std::string> names;
  for (const auto& [name, v] : program.Block(0).vars()) {
    if (v.persistable && v.type != proto::VarType::FEED_MINIBATCH && v.type != proto::VarType::FETCH_LIST &&
        v.type != proto::VarType::READER && v.type != proto::VarType::RAW) {
      names.push_back(name);
    }
  }
  return names;
}

absl::Status save_vars(Executor& exe, Scope* scope, const std::string& dirname, const ProgramDesc& program,
                       const std::vector<std::string>& vars, const std::string& filename) {
  for (const auto& v : vars) {
    const Variable* var = scope->FindVar(v);
    if (var != nullptr && var->IsType<SparseTable>()) continue;  // a pserver's table shard
    if (var == nullptr || !var->IsType<Tensor>() || !var->Get<Tensor>().initialized()) {
      return absl::FailedPreconditionError(absl::StrCat("cannot save '", v, "': it holds no tensor in the scope"));
    }
  }
  return RunOnce(exe, scope, IoProgram(program, vars, dirname, filename, true));
}

absl::Status load_vars(Executor& exe, Scope* scope, const std::string& dirname, const ProgramDesc& program,
                       const std::vector<std::string>& vars, const std::string& filename) {
  return RunOnce(exe, scope, IoProgram(program, vars, dirname, filename, false));
}

absl::Status save_persistables(Executor& exe, Scope* scope, const std::string& dirname, const ProgramDesc& program,
                               const std::string& filename) {
  return save_vars(exe, scope, dirname, program, PersistableVarNames(program), filename);
}

absl::Status load_persistables(Executor& exe, Scope* scope, const std::string& dirname, const ProgramDesc& program,
                               const std::string& filename) {
  return load_vars(exe, scope, dirname, program, PersistableVarNames(program), filename);
}

namespace {

// paddle.static.save's .pdparams/.pdopt are Python pickles (they start
// with the pickle protocol's 0x80), not Fluid's format: say how to convert.
absl::Status RefusePickle(const std::string& path) {
  std::string prefix = path;
  std::ifstream in(path, std::ios::binary);
  const bool pickled = in && in.get() == 0x80;
  if (!pickled && !std::filesystem::exists(path + ".pdparams")) return absl::OkStatus();
  for (const char* ext : {".pdparams", ".pdopt"}) {
    if (absl::EndsWith(prefix, ext)) prefix.resize(prefix.size() - std::strlen(ext));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(path, " is paddle.static.save's pickled format (", prefix,
                   ".pdparams/.pdopt); oar reads save_persistables' files: convert them with "
                   "`python3 scripts/pdparams_to_fluid.py ",
                   prefix, " --out DIR` and pass --params DIR"));
}

}  // namespace

absl::Status LoadPersistablesFrom(Executor& exe, Scope* scope, const std::string& path, const ProgramDesc& program) {
  const std::filesystem::path p(path);
  if (std::filesystem::is_directory(p)) return load_persistables(exe, scope, path, program);
  OAR_RETURN_IF_ERROR(RefusePickle(path));
  return load_persistables(exe, scope, p.parent_path().string(), program, p.filename().string());
}

ProgramDesc PruneToTargets(const ProgramDesc& src, const std::vector<std::string>& feeds,
                           const std::vector<std::string>& targets) {
  ProgramDesc p(src);
  BlockDesc* b = p.MutableBlock(0);
  const int32_t dropped = static_cast<int32_t>(OpRole::kBackward) | static_cast<int32_t>(OpRole::kOptimize);
  std::set<std::string> needed(targets.begin(), targets.end());
  std::set<std::string> feed_set(feeds.begin(), feeds.end());
  std::vector<bool> keep(b->OpSize(), false);
  for (size_t i = b->OpSize(); i-- > 0;) {
    const OpDesc& op = b->Op(i);
    if (op.role() & dropped) continue;
    bool useful = false;
    for (const auto& o : op.OutputArgNames()) useful |= needed.count(o) > 0;
    if (!useful) continue;
    keep[i] = true;
    for (const auto& in : op.InputArgNames()) {
      if (!feed_set.count(in)) needed.insert(in);
    }
  }
  std::set<std::string> used(feeds.begin(), feeds.end());
  for (size_t i = b->OpSize(); i-- > 0;) {
    if (!keep[i]) {
      b->RemoveOps(i, i + 1);
      continue;
    }
    OpDesc* op = b->MutableOp(i);
    if (op->HasAttr("is_test")) op->SetAttr("is_test", true);
    for (const auto& n : op->InputArgNames()) used.insert(n);
    for (const auto& n : op->OutputArgNames()) used.insert(n);
  }
  std::vector<std::string> unused;
  for (const auto& [name, v] : b->vars())
    if (!used.count(name)) unused.push_back(name);
  for (const auto& n : unused) b->RemoveVar(n);
  return p;
}

absl::Status save_inference_model(const std::string& dirname, const std::vector<std::string>& feeded_var_names,
                                  const std::vector<std::string>& target_vars, Executor& exe, Scope* scope,
                                  const ProgramDesc& program, const std::string& model_filename,
                                  const std::string& params_filename) {
  for (const auto& n : feeded_var_names) {
    if (!program.Block(0).FindVar(n))
      return absl::InvalidArgumentError(absl::StrCat("feed '", n, "' is not in the program"));
  }
  for (const auto& n : target_vars) {
    if (!program.Block(0).FindVar(n))
      return absl::InvalidArgumentError(absl::StrCat("target '", n, "' is not in the program"));
  }
  ProgramDesc pruned = PruneToTargets(program, feeded_var_names, target_vars);
  ProgramDesc with_io(pruned);
  AddFeedFetchOps(&with_io, feeded_var_names, target_vars);
  std::error_code ec;
  std::filesystem::create_directories(dirname, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot create ", dirname, ": ", ec.message()));
  OAR_RETURN_IF_ERROR(WriteFileAtomically(JoinPath(dirname, model_filename.empty() ? "__model__" : model_filename),
                                          with_io.Serialize()));
  return save_persistables(exe, scope, dirname, pruned, params_filename);
}

absl::StatusOr<InferenceModel> load_inference_model(const std::string& dirname, Executor& exe, Scope* scope,
                                                    const std::string& model_filename,
                                                    const std::string& params_filename) {
  const std::string path = JoinPath(dirname, model_filename.empty() ? "__model__" : model_filename);
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::stringstream buf;
  buf << in.rdbuf();
  auto parsed = ProgramDesc::Parse(buf.str());
  if (!parsed.ok()) return Annotate(parsed.status(), path);
  InferenceModel m;
  m.program = *std::move(parsed);
  BlockDesc* b = m.program->MutableBlock(0);
  std::map<int32_t, std::string> feeds, fetches;
  for (size_t i = b->OpSize(); i-- > 0;) {
    const OpDesc& op = b->Op(i);
    if (op.type == "feed")
      feeds[op.GetAttr<int32_t>("col")] = op.Output("Out")[0];
    else if (op.type == "fetch")
      fetches[op.GetAttr<int32_t>("col")] = op.Input("X")[0];
    else
      continue;
    b->RemoveOps(i, i + 1);
  }
  b->RemoveVar(kFeedVarName);
  b->RemoveVar(kFetchVarName);
  for (const auto& [col, name] : feeds) m.feed_names.push_back(name);
  for (const auto& [col, name] : fetches) m.fetch_names.push_back(name);
  OAR_RETURN_IF_ERROR(load_persistables(exe, scope, dirname, *m.program, params_filename));
  return m;
}

}  // namespace oar
