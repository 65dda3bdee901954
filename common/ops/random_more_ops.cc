// Sampling ops of paddle.* and fluid.layers: bernoulli (each element 1 with
// the probability X holds), multinomial (num_samples category ids per row
// of X's weights, with or without replacement), randint ([low, high)),
// randperm (a permutation of 0..n−1) and sampling_id (one id per row of X's
// probabilities). Their draws come from Oar's own engine (a `seed`
// attribute of 0, or none, means a fresh seed): Paddle's random stream is
// not reproduced, only its distributions.
//
// Thread-safety: stateless kernels; each call owns its engine.
#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

std::mt19937_64 Engine(const ExecutionContext& ctx) {
  const int32_t seed = ctx.op().HasAttr("seed") ? ctx.Attr<int32_t>("seed") : 0;
  return std::mt19937_64(seed != 0 ? static_cast<uint64_t>(seed) : std::random_device{}());
}

template <typename T>
void PutInts(Tensor* out, const DDim& dims, const std::vector<int64_t>& v, DataType dt) {
  if (dt == DataType::kInt32) {
    int32_t* p = out->mutable_data<int32_t>(dims);
    for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<int32_t>(v[i]);
  } else if (dt == DataType::kFloat32) {
    float* p = out->mutable_data<float>(dims);
    for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<float>(v[i]);
  } else {
    int64_t* p = out->mutable_data<int64_t>(dims);
    std::copy(v.begin(), v.end(), p);
  }
}

template <typename T>
absl::Status BernoulliKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  auto rng = Engine(ctx);
  std::uniform_real_distribution<double> u(0, 1);
  T* o = ctx.Output("Out")->mutable_data<T>(x->dims());
  for (int64_t i = 0; i < x->numel(); ++i) {
    const double p = x->data<T>()[i];
    if (!(p >= 0 && p <= 1))
      return absl::InvalidArgumentError(absl::StrCat("bernoulli: X holds ", p, ", not a probability"));
    o[i] = u(rng) < p ? T(1) : T(0);
  }
  return absl::OkStatus();
}

absl::Status MultinomialKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  const DDim& d = x->dims();
  const int64_t c = d[d.size() - 1], rows = c ? x->numel() / c : 0, k = ctx.Attr<int32_t>("num_samples");
  const bool replace = ctx.Attr<bool>("replacement");
  if (!replace && k > c)
    return absl::InvalidArgumentError(absl::StrCat("multinomial: ", k, " samples without replacement from ", c));
  auto rng = Engine(ctx);
  std::vector<int64_t> out;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> w(x->data<float>() + r * c, x->data<float>() + (r + 1) * c);
    for (int64_t s = 0; s < k; ++s) {
      std::discrete_distribution<int64_t> pick(w.begin(), w.end());
      const int64_t id = pick(rng);
      out.push_back(id);
      if (!replace) w[static_cast<size_t>(id)] = 0;
    }
  }
  std::vector<int64_t> od(d.begin(), d.end() - 1);
  od.push_back(k);
  PutInts<int64_t>(ctx.Output("Out"), DDim(od), out, DataType::kInt64);
  return absl::OkStatus();
}

absl::Status RandintKernel(const ExecutionContext& ctx) {
  const int64_t lo = ctx.Attr<int32_t>("low"), hi = ctx.Attr<int32_t>("high");
  if (lo >= hi) return absl::InvalidArgumentError(absl::StrCat("randint: low ", lo, " is not below high ", hi));
  Tensor* out = ctx.Output("Out");
  out->Resize(DDim(ctx.Attr<std::vector<int64_t>>("shape")));
  OAR_RETURN_IF_ERROR(ResizeFromShapeTensors(ctx, out));
  auto rng = Engine(ctx);
  std::uniform_int_distribution<int64_t> u(lo, hi - 1);
  std::vector<int64_t> v(static_cast<size_t>(out->dims().numel()));
  for (int64_t& e : v) e = u(rng);
  PutInts<int64_t>(out, out->dims(), v, static_cast<DataType>(ctx.Attr<int32_t>("dtype")));
  return absl::OkStatus();
}

absl::Status RandpermKernel(const ExecutionContext& ctx) {
  const int64_t n = ctx.Attr<int32_t>("n");
  std::vector<int64_t> v(static_cast<size_t>(std::max<int64_t>(n, 0)));
  std::iota(v.begin(), v.end(), 0);
  auto rng = Engine(ctx);
  std::shuffle(v.begin(), v.end(), rng);
  PutInts<int64_t>(ctx.Output("Out"), DDim{n}, v, static_cast<DataType>(ctx.Attr<int32_t>("dtype")));
  return absl::OkStatus();
}

absl::Status SamplingIdKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  const int64_t rows = x->dims()[0], c = rows ? x->numel() / rows : 0;
  auto rng = Engine(ctx);
  std::uniform_real_distribution<double> u(ctx.Attr<float>("min"), ctx.Attr<float>("max"));
  std::vector<int64_t> ids;
  for (int64_t r = 0; r < rows; ++r) {  // the first id whose running probability passes the draw
    const double draw = u(rng);
    double run = 0;
    int64_t id = c - 1;
    for (int64_t j = 0; j < c; ++j) {
      run += x->data<float>()[r * c + j];
      if (run > draw) {
        id = j;
        break;
      }
    }
    ids.push_back(id);
  }
  PutInts<int64_t>(ctx.Output("Out"), DDim{rows}, ids, DataType::kInt64);
  return absl::OkStatus();
}

}  // namespace

void RegisterRandomMoreOps(OpRegistry* r) {
  r->Register("bernoulli")
      .Input("X")
      .Output("Out")
      .SetInferShape(SameShapeAsX)
      .Kernel<float>(BernoulliKernel<float>)
      .Kernel<double>(BernoulliKernel<double>);
  r->Register("multinomial")
      .Input("X")
      .Output("Out")
      .Attr("num_samples", int32_t{1})
      .Attr("replacement", false)
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(AnyKernelDtype)
      .Kernel<float>(MultinomialKernel);
  r->Register("randint")
      .Input("ShapeTensor", kDispensable | kReadAnywhere)
      .Input("ShapeTensorList", kDuplicable | kDispensable | kReadAnywhere)
      .Output("Out")
      .Attr("shape", std::vector<int64_t>{})
      .Attr("low", int32_t{0})
      .Attr("high", int32_t{0})
      .Attr("seed", int32_t{0})
      .Attr("dtype", int32_t{3})
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(AnyKernelDtype)
      .Kernel<float>(RandintKernel);
  r->Register("randperm")
      .Output("Out")
      .Attr("n", int32_t{0})
      .Attr("dtype", int32_t{3})
      .Attr("seed", int32_t{0})
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(AnyKernelDtype)
      .Kernel<float>(RandpermKernel);
  r->Register("sampling_id")
      .Input("X")
      .Output("Out")
      .Attr("min", 0.0f)
      .Attr("max", 1.0f)
      .Attr("seed", int32_t{0})
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(AnyKernelDtype)
      .Kernel<float>(SamplingIdKernel);
}

}  // namespace oar
