// split_byref and split_selected_rows: the trainer-side cuts of a
// parameter's gradient into its pserver blocks (dist_ops.h lists their
// slots). Host-side; stateless.
#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/framework/selected_rows_util.h"
#include "common/ops/op_util.h"
#include "trainer/dist_ops.h"

namespace oar {
namespace {

absl::Status SplitByrefInferShape(InferShapeContext& ctx) {
  const DDim x = ctx.InputDim("X");
  const auto sections = ctx.Attr<std::vector<int32_t>>("sections");
  if (sections.size() != ctx.OutputSize("Out")) {
    return ctx.Error(sections.size(), " sections for ", ctx.OutputSize("Out"), " outputs");
  }
  int64_t total = 0;
  for (size_t i = 0; i < sections.size(); ++i) {
    if (sections[i] < 0) return ctx.Error("section ", i, " is negative (", sections[i], ")");
    DDim d = x;
    d[0] = sections[i];
    total += sections[i];
    ctx.SetOutputDim("Out", d, i);
  }
  if (x[0] >= 0 && total != x[0]) return ctx.Error("sections add up to ", total, " rows, X has ", x[0]);
  return absl::OkStatus();
}

absl::Status SplitByrefKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  const auto sections = ctx.Attr<std::vector<int32_t>>("sections");
  int64_t begin = 0;
  for (size_t i = 0; i < sections.size(); ++i) {
    *ctx.Output("Out", i) = x->Slice(begin, begin + sections[i]);  // a view: no copy
    begin += sections[i];
  }
  return absl::OkStatus();
}

// Rows of a sparse gradient by the pserver block they fall in; each part's
// rows count from its block's first row.
absl::Status SplitSelectedRowsKernel(const ExecutionContext& ctx) {
  const Variable* xv = ctx.InputVar("X", 0);
  if (xv == nullptr || !xv->IsType<SelectedRows>()) {
    return absl::InvalidArgumentError("split_selected_rows: X must be SelectedRows");
  }
  const SelectedRows& x = xv->Get<SelectedRows>();
  OAR_RETURN_IF_ERROR(CheckSelectedRows(x, absl::StrCat("split_selected_rows: X '", ctx.op().Input("X")[0], "'")));
  const auto sections = ctx.Attr<std::vector<int64_t>>("height_sections");
  if (sections.size() != ctx.op().Output("Out").size()) {
    return absl::InvalidArgumentError(absl::StrCat("split_selected_rows: ", sections.size(), " height_sections for ",
                                                   ctx.op().Output("Out").size(), " outputs"));
  }
  OAR_ASSIGN_OR_RETURN(std::vector<SelectedRows> blocks, SplitRowsBySections(x, sections, "split_selected_rows"));
  for (size_t s = 0; s < blocks.size(); ++s)
    *ctx.OutputVar("Out", s)->GetMutable<SelectedRows>() = std::move(blocks[s]);
  return absl::OkStatus();
}

}  // namespace

void RegisterSplitOps(OpRegistry* r) {
  r->Register("split_selected_rows")
      .HostSide()
      .Input("X")
      .Output("Out", kDuplicable)
      .Attr("height_sections", std::vector<int64_t>{})
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(AnyKernelDtype)
      .Kernel<float>(SplitSelectedRowsKernel);
  r->Register("split_byref")
      .HostSide()
      .Input("X")
      .Output("Out", kDuplicable)
      .Attr("sections", std::vector<int32_t>{})
      .Attr("num", int32_t{0})
      .SetInferShape(SplitByrefInferShape)
      .SetKernelDtype(AnyKernelDtype)
      .Kernel<float>(SplitByrefKernel);
}

}  // namespace oar
