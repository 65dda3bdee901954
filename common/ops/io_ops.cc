// save / load (one variable per file) and save_combine / load_combine (many
// variables in one file, in input order), in Fluid's LoDTensor layout (a
// pserver's SparseTable in Fluid's SelectedRows layout).
// Files are written atomically (temporary, fsync, rename).
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/framework/op_registry.h"
#include "common/framework/sparse_table_io.h"
#include "common/framework/tensor_io.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

absl::Status PrepareTarget(const ExecutionContext& ctx, const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError(ctx.op().type + ": file_path is empty");
  if (!ctx.Attr<bool>("overwrite") && std::filesystem::exists(path)) {
    return absl::AlreadyExistsError(ctx.op().type + ": " + path + " exists and overwrite is false");
  }
  std::error_code ec;
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec)
    return absl::PermissionDeniedError(ctx.op().type + ": cannot create " + parent.string() + ": " + ec.message());
  return absl::OkStatus();
}

absl::Status SaveKernel(const ExecutionContext& ctx) {
  if (ctx.Attr<bool>("save_as_fp16"))
    return absl::UnimplementedError(ctx.op().type + ": save_as_fp16 is not supported");
  const std::string path = ctx.Attr<std::string>("file_path");
  OAR_RETURN_IF_ERROR(PrepareTarget(ctx, path));
  std::ostringstream buf;
  for (size_t i = 0; i < ctx.InputSize("X"); ++i) {
    const Variable* v = ctx.InputVar("X", i);
    if (v != nullptr && v->IsType<SparseTable>()) {  // a pserver's table shard: Fluid's SelectedRows layout
      OAR_RETURN_IF_ERROR(Annotate(WriteSparseTable(v->Get<SparseTable>(), buf), ctx.op().Input("X")[i]));
      continue;
    }
    OAR_ASSIGN_OR_RETURN(const Tensor* t, RequireInput(ctx, "X", i));
    OAR_RETURN_IF_ERROR(Annotate(WriteLoDTensor(*t, buf), ctx.op().Input("X")[i]));
  }
  return WriteFileAtomically(path, buf.str());
}

absl::Status LoadKernel(const ExecutionContext& ctx) {
  if (ctx.Attr<bool>("load_as_fp16"))
    return absl::UnimplementedError(ctx.op().type + ": load_as_fp16 is not supported");
  if (ctx.op().GetAttr<bool>("model_from_memory")) {
    return absl::UnimplementedError(ctx.op().type + ": model_from_memory is not supported");
  }
  const std::string path = ctx.Attr<std::string>("file_path");
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(ctx.op().type + ": cannot open " + path);
  const size_t n = ctx.op().Output("Out").size();
  for (size_t i = 0; i < n; ++i) {
    const std::string what = path + " (" + ctx.op().Output("Out")[i] + ")";
    Variable* v = ctx.OutputVar("Out", i);
    if (v != nullptr && v->IsType<SparseTable>()) {
      OAR_RETURN_IF_ERROR(ReadSparseTable(in, what, v->GetMutable<SparseTable>()));
    } else {
      OAR_RETURN_IF_ERROR(ReadLoDTensor(in, what, ctx.Output("Out", i)));
    }
  }
  if (in.peek() != std::char_traits<char>::eof()) {
    return absl::InvalidArgumentError(ctx.op().type + ": " + path + " holds more data than its " + std::to_string(n) +
                                      " variable(s)");
  }
  return absl::OkStatus();
}

absl::Status NoShape(InferShapeContext&) { return absl::OkStatus(); }
DataType AnyDtype(const ExecutionContext&) { return DataType::kFloat32; }

}  // namespace

void RegisterIoOps(OpRegistry* r) {
  r->Register("save")
      .HostSide()
      .Input("X")
      .Attr("file_path", std::string())
      .Attr("overwrite", true)
      .Attr("save_as_fp16", false)
      .SetInferShape(NoShape)
      .SetKernelDtype(AnyDtype)
      .Kernel<float>(SaveKernel);
  r->Register("save_combine")
      .HostSide()
      .Input("X", kDuplicable)
      .Attr("file_path", std::string())
      .Attr("overwrite", true)
      .Attr("save_as_fp16", false)
      .SetInferShape(NoShape)
      .SetKernelDtype(AnyDtype)
      .Kernel<float>(SaveKernel);
  r->Register("load")
      .HostSide()
      .Output("Out")
      .Attr("file_path", std::string())
      .Attr("load_as_fp16", false)
      .SetInferShape(NoShape)
      .SetKernelDtype(AnyDtype)
      .Kernel<float>(LoadKernel);
  r->Register("load_combine")
      .HostSide()
      .Output("Out", kDuplicable)
      .Attr("file_path", std::string())
      .Attr("load_as_fp16", false)
      .Attr("model_from_memory", false)
      .SetInferShape(NoShape)
      .SetKernelDtype(AnyDtype)
      .Kernel<float>(LoadKernel);
}

}  // namespace oar
