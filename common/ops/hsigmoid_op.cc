// hierarchical_sigmoid (fluid.layers.hsigmoid, paddle.nn.HSigmoidLoss):
// the loss of walking a binary tree to the label's leaf, each inner node a
// logistic classifier (a row of W, a Bias entry). The default tree is
// Fluid's SimpleCode: class c's code is c + num_classes, its j-th node
// (code >> (j + 1)) − 1 and its j-th decision bit j of the code; a custom
// tree comes as PathTable / PathCode rows, ended by a negative node.
// As Paddle computes it: PreOut [N, L] (L = bit length of num_classes − 1)
// holds softrelu(clip(w·x + b, ±40)) on each path and log 2 on the unused
// tail, Out = Σ PreOut − Σ bit·(w·x + b); the gradient reads PreOut. With
// is_sparse, W@GRAD is a SelectedRows of the nodes walked.
//
// Thread-safety: stateless kernels.
#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/framework/selected_rows.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

int BitLength(int64_t v) {
  int n = 0;
  for (; v > 0; v >>= 1) ++n;
  return n;
}

// Each example's path: nodes and decision bits.
struct Paths {
  std::vector<std::vector<int64_t>> node;
  std::vector<std::vector<int>> bit;
  int64_t width = 0;  // PreOut's columns
};

absl::StatusOr<Paths> ReadPaths(const ExecutionContext& ctx, int64_t n, int64_t nodes) {
  Paths p;
  const Tensor* table = ctx.Input("PathTable");
  const Tensor* code = ctx.Input("PathCode");
  OAR_ASSIGN_OR_RETURN(const Tensor* label, RequireInput(ctx, "Label"));
  if (label->numel() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("hierarchical_sigmoid: Label", label->dims().ToString(), " for ", n, " rows of X"));
  }
  auto at = [](const Tensor& t, int64_t i) {
    return t.dtype() == DataType::kInt32 ? int64_t{t.data<int32_t>()[i]} : t.data<int64_t>()[i];
  };
  if (table != nullptr && code != nullptr) {
    p.width = table->dims()[table->dims().size() - 1];
    for (int64_t i = 0; i < n; ++i) {
      p.node.emplace_back(), p.bit.emplace_back();
      for (int64_t j = 0; j < p.width && at(*table, i * p.width + j) >= 0; ++j) {
        p.node.back().push_back(at(*table, i * p.width + j));
        p.bit.back().push_back(static_cast<int>(at(*code, i * p.width + j)));
      }
    }
  } else {
    const int64_t classes = ctx.Attr<int32_t>("num_classes");
    p.width = BitLength(classes - 1);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t c = at(*label, i);
      if (c < 0 || c >= classes) {
        return absl::InvalidArgumentError(
            absl::StrCat("hierarchical_sigmoid: label ", c, " of row ", i, " outside [0, num_classes=", classes, ")"));
      }
      const int64_t bits = c + classes;
      p.node.emplace_back(), p.bit.emplace_back();
      for (int j = 0; j < BitLength(bits) - 1; ++j) {
        p.node.back().push_back((bits >> (j + 1)) - 1);
        p.bit.back().push_back(static_cast<int>((bits >> j) & 1));
      }
    }
  }
  for (const auto& path : p.node) {
    for (int64_t v : path) {
      if (v >= nodes) {
        return absl::InvalidArgumentError(
            absl::StrCat("hierarchical_sigmoid: node ", v, " outside W's ", nodes, " rows"));
      }
    }
  }
  return p;
}

template <typename T>
absl::Status HsigmoidKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* w, RequireInput(ctx, "W"));
  const Tensor* bias = ctx.Input("Bias");
  const int64_t n = x->dims()[0], d = x->numel() / std::max<int64_t>(n, 1);
  OAR_ASSIGN_OR_RETURN(const Paths p, ReadPaths(ctx, n, w->dims()[0]));
  const T* xp = x->data<T>();
  const T* wp = w->data<T>();
  T* pre = ctx.Output("PreOut")->mutable_data<T>(DDim{n, p.width});
  T* out = ctx.Output("Out")->mutable_data<T>(DDim{n, 1});
  for (int64_t i = 0; i < n; ++i) {
    T loss = 0;
    for (int64_t j = 0; j < p.width; ++j) {
      T z = 0;
      if (j < static_cast<int64_t>(p.node[i].size())) {
        const int64_t v = p.node[i][j];
        for (int64_t k = 0; k < d; ++k) z += wp[v * d + k] * xp[i * d + k];
        if (bias) z += bias->data<T>()[v];
        z = std::clamp(z, T(-40), T(40));
        if (p.bit[i][j]) loss -= z;
      }
      pre[i * p.width + j] = std::log(T(1) + std::exp(z));
      loss += pre[i * p.width + j];
    }
    out[i] = loss;
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status HsigmoidGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* w, RequireInput(ctx, "W"));
  OAR_ASSIGN_OR_RETURN(const Tensor* pre, RequireInput(ctx, "PreOut"));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  const int64_t n = x->dims()[0], d = x->numel() / std::max<int64_t>(n, 1), nodes = w->dims()[0];
  OAR_ASSIGN_OR_RETURN(const Paths p, ReadPaths(ctx, n, nodes));
  const T* xp = x->data<T>();
  const T* wp = w->data<T>();
  const T* pp = pre->data<T>();
  const T* gp = g->data<T>();
  Tensor* dx_t = ctx.Output(GradVarName("X"));
  Tensor* db_t = ctx.Output(GradVarName("Bias"));
  Variable* dw_var = ctx.OutputVar(GradVarName("W"));
  T* dx = dx_t ? dx_t->mutable_data<T>(x->dims()) : nullptr;
  T* db = db_t ? db_t->mutable_data<T>(DDim{nodes, 1}) : nullptr;
  if (dx) std::fill(dx, dx + dx_t->numel(), T(0));
  if (db) std::fill(db, db + nodes, T(0));
  const bool sparse = ctx.Attr<bool>("is_sparse") && dw_var != nullptr;
  std::vector<int64_t> touched;  // sparse: the rows of W@GRAD, in walk order
  std::vector<int64_t> slot(static_cast<size_t>(nodes), -1);
  std::vector<T> dw_rows;
  T* dw = nullptr;
  if (dw_var != nullptr && !sparse) {
    Tensor* t = dw_var->GetMutable<Tensor>();
    dw = t->mutable_data<T>(w->dims());
    std::fill(dw, dw + t->numel(), T(0));
  }
  for (int64_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < p.node[i].size(); ++j) {
      const int64_t v = p.node[i][j];
      // d softrelu(z)/dz = sigmoid(z) = 1 − e^(−PreOut); minus the bit; times Out@GRAD
      const T dz = (T(1) - T(1) / std::exp(pp[i * p.width + static_cast<int64_t>(j)]) - T(p.bit[i][j])) * gp[i];
      if (db) db[v] += dz;
      if (dx) {
        for (int64_t k = 0; k < d; ++k) dx[i * d + k] += dz * wp[v * d + k];
      }
      T* row = dw ? dw + v * d : nullptr;
      if (sparse) {
        if (slot[static_cast<size_t>(v)] < 0) {
          slot[static_cast<size_t>(v)] = static_cast<int64_t>(touched.size());
          touched.push_back(v);
          dw_rows.resize(dw_rows.size() + static_cast<size_t>(d), T(0));
        }
        row = dw_rows.data() + slot[static_cast<size_t>(v)] * d;
      }
      if (row) {
        for (int64_t k = 0; k < d; ++k) row[k] += dz * xp[i * d + k];
      }
    }
  }
  if (sparse) {
    SelectedRows* sr = dw_var->GetMutable<SelectedRows>();
    sr->height = nodes;
    sr->rows = touched;
    T* v = sr->value.mutable_data<T>(DDim{static_cast<int64_t>(touched.size()), d});
    std::copy(dw_rows.begin(), dw_rows.end(), v);
  }
  return absl::OkStatus();
}

void GradVarType(const OpDesc& op, BlockDesc* block) { SetSparseGradType(op, block, GradVarName("W")); }

}  // namespace

void RegisterHsigmoidOp(OpRegistry* r) {
  auto attrs = [](OpInfo& i) -> OpInfo& {
    return i.Attr("num_classes", int32_t{2})
        .Attr("is_sparse", false)
        .Attr("remote_prefetch", false)
        .Attr("trainer_id", int32_t{0})
        .Attr("height_sections", std::vector<int64_t>{})
        .Attr("epmap", std::vector<std::string>{})
        .Attr("table_names", std::vector<std::string>{})
        .Implements("remote_prefetch", {false});
  };
  // W_Out: Paddle 2.x binds it to W itself; never written.
  attrs(r->Register("hierarchical_sigmoid")
            .Input("X")
            .Input("W")
            .Input("Label")
            .Input("PathTable", kDispensable)
            .Input("PathCode", kDispensable)
            .Input("Bias", kDispensable)
            .Output("Out")
            .Output("PreOut")
            .Output("W_Out", kDispensable))
      .SetInferShape(NoShapeInference)
      .SetGradMaker(
          GradOpMaker({"X", "W", "Label", "PathTable", "PathCode", "Bias"}, {"PreOut"}, {"Out"}, {"X", "W", "Bias"}))
      .Kernel<float>(HsigmoidKernel<float>)
      .Kernel<double>(HsigmoidKernel<double>);
  attrs(r->Register("hierarchical_sigmoid_grad")
            .NotInPlace()
            .Input("X")
            .Input("W")
            .Input("Label")
            .Input("PathTable", kDispensable)
            .Input("PathCode", kDispensable)
            .Input("Bias", kDispensable)
            .Input("PreOut")
            .Input(GradVarName("Out"))
            .Output(GradVarName("X"), kDispensable)
            .Output(GradVarName("W"), kDispensable)
            .Output(GradVarName("Bias"), kDispensable))
      .SetInferShape(NoShapeInference)
      .SetInferVarType(GradVarType)
      .Kernel<float>(HsigmoidGradKernel<float>)
      .Kernel<double>(HsigmoidGradKernel<double>);
}

}  // namespace oar
