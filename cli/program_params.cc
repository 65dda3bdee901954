// --params for a program file; see program_params.h.
//
// Thread-safety: the calling thread.
#include "cli/program_params.h"

#include "absl/strings/str_cat.h"
#include "common/api/io.h"
#include "common/base/status.h"

namespace oar::cli {
namespace {

// Every loaded persistable has the shape the program declares (load ops take
// whatever the file holds; parameters of another network fail here, named).
absl::Status CheckLoadedShapes(const std::string& path, const ProgramDesc& main, const Scope& scope) {
  for (const std::string& name : PersistableVarNames(main)) {
    const VarDesc* var = main.Block(0).FindVar(name);
    const Variable* v = scope.FindVar(name);
    if (var == nullptr || v == nullptr || !v->IsType<Tensor>()) continue;
    const DDim want(var->shape), got = v->Get<Tensor>().dims();
    bool known = true;
    for (int64_t d : var->shape) known &= d >= 0;
    if (known && want != got && !(want.numel() == 1 && got.numel() == 1)) {
      return absl::InvalidArgumentError(absl::StrCat("--params ", path, ": '", name, "' is ", got.ToString(),
                                                     " there, but the program declares ", want.ToString()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LoadProgramParams(Executor& exe, Scope* scope, const std::string& path, const ProgramDesc& main) {
  OAR_RETURN_IF_ERROR(Annotate(LoadPersistablesFrom(exe, scope, path, main), "--params " + path));
  return CheckLoadedShapes(path, main, *scope);
}

}  // namespace oar::cli
