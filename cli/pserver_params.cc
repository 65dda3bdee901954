#include "cli/pserver_params.h"

#include <cstring>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/api/io.h"
#include "common/base/status.h"

namespace oar::cli {
namespace {

struct RowSlice {
  std::string source;          // the saved variable
  int64_t offset = 0;          // its first row
  std::vector<int64_t> shape;  // the block's
};

// Block name -> (parameter, first row), and each sliced block's optimizer
// accumulators -> (themselves, the block's first row).
std::map<std::string, RowSlice> Slices(const ProgramDesc& pserver, const std::vector<SplitParam>& split) {
  std::map<std::string, RowSlice> slices;
  for (const SplitParam& sp : split) {
    int64_t offset = 0;
    for (const VarDesc& block : sp.param_blocks) {
      if (block.name != sp.param) slices[block.name] = {sp.param, offset, block.shape};
      offset += block.shape.empty() ? 0 : block.shape[0];
    }
  }
  for (size_t b = 0; b < pserver.NumBlocks(); ++b) {  // optimize ops live in listen_and_serv's blocks
    const BlockDesc& block = pserver.Block(b);
    for (size_t i = 0; i < block.OpSize(); ++i) {
      const OpDesc& op = block.Op(i);
      if (!op.inputs.count("Param") || op.Input("Param").empty()) continue;
      auto it = slices.find(op.Input("Param")[0]);
      if (it == slices.end()) continue;
      const RowSlice param = it->second;
      for (const std::string& in : op.InputArgNames()) {  // the accumulators: the block's shape
        const VarDesc* var = pserver.Block(0).FindVar(in);
        if (var != nullptr && var->shape == param.shape && in != op.Input("Param")[0] &&
            !absl::StrContains(in, "@GRAD") && !slices.count(in)) {
          slices[in] = {in, param.offset, param.shape};
        }
      }
    }
  }
  return slices;
}

}  // namespace

absl::StatusOr<int> LoadPserverParams(Executor& exe, const std::string& params, const ProgramDesc& origin,
                                      const ProgramDesc& pserver, const std::vector<SplitParam>& split, Scope* scope) {
  Scope saved;
  OAR_RETURN_IF_ERROR(Annotate(LoadPersistablesFrom(exe, &saved, params, origin), "--params " + params));
  const std::map<std::string, RowSlice> slices = Slices(pserver, split);
  int assigned = 0;
  for (const std::string& name : PersistableVarNames(pserver)) {
    Variable* dst_var = scope->FindVar(name);
    if (absl::StrContains(name, "@GRAD") || dst_var == nullptr || !dst_var->IsType<Tensor>()) continue;
    Tensor* dst = dst_var->GetMutable<Tensor>();
    auto slice = slices.find(name);
    const std::string source = slice != slices.end() ? slice->second.source : name;
    const Variable* src_var = saved.FindVar(source);
    if (src_var == nullptr || !src_var->IsType<Tensor>() || !src_var->Get<Tensor>().initialized()) continue;
    const Tensor& src = src_var->Get<Tensor>();
    const bool whole = !dst->initialized() || (src.dims() == dst->dims() && src.dtype() == dst->dtype()) ||
                       (src.numel() == 1 && dst->numel() == 1);  // a 0-D and a [1] scalar alike
    if (slice == slices.end() && whole) {
      dst->CopyFrom(src);
      ++assigned;
      continue;
    }
    const int64_t rows = dst->dims().size() ? dst->dims()[0] : 0;
    const int64_t offset = slice != slices.end() ? slice->second.offset : 0;
    const bool fits = slice != slices.end() && src.dtype() == dst->dtype() && src.dims().size() == dst->dims().size() &&
                      src.dims().size() >= 1 && offset + rows <= src.dims()[0] &&
                      src.numel() / src.dims()[0] == dst->numel() / std::max<int64_t>(rows, 1);
    if (!fits) {
      return absl::InvalidArgumentError(absl::StrCat("--params ", params, ": '", source, "' is ", src.dims().ToString(),
                                                     " there, but this pserver's '", name, "' is ",
                                                     dst->dims().ToString()));
    }
    const size_t row_bytes = dst->nbytes() / static_cast<size_t>(std::max<int64_t>(rows, 1));
    std::memcpy(dst->raw_data(), static_cast<const char*>(src.raw_data()) + offset * row_bytes, dst->nbytes());
    ++assigned;
  }
  return assigned;
}

}  // namespace oar::cli
