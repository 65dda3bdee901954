// The remaining optimizers against plain reference implementations over 10
// steps, and every optimizer's sparse (SelectedRows) path against its dense
// path fed the same gradient densified.
#include <cmath>
#include <functional>

#include "common/framework/selected_rows_util.h"
#include "gtest/gtest.h"
#include "tests/common/ops/op_test_util.h"

namespace oar::testing {
namespace {

constexpr int64_t kRows = 4, kWidth = 3, kN = kRows * kWidth;
using State = std::map<std::string, std::vector<double>>;

struct OptCase {
  std::string name;
  OpDesc op;   // reads vars by the names in `init`, "g" and "lr"
  State init;  // accumulators besides "p"
  // One reference step: updates `s` given gradient g and rate lr.
  std::function<void(State& s, const std::vector<double>& g, double lr)> step;
};

OpDesc Op(const std::string& type, OpDesc::VarMap in, OpDesc::VarMap out, std::map<std::string, Attribute> attrs = {}) {
  in["Param"] = {"p"};
  in["Grad"] = {"g"};
  in["LearningRate"] = {"lr"};
  out["ParamOut"] = {"p"};
  return MakeOp(type, std::move(in), std::move(out), std::move(attrs));
}

std::vector<double> Fill(double v) { return std::vector<double>(kN, v); }
double F(float v) { return static_cast<double>(v); }  // attrs travel as float

std::vector<OptCase> Cases() {
  std::vector<OptCase> c;
  c.push_back({"adagrad",
               Op("adagrad", {{"Moment", {"m"}}}, {{"MomentOut", {"m"}}}, {{"epsilon", 1e-6f}}),
               {{"m", Fill(0.1)}},
               [](State& s, const std::vector<double>& g, double lr) {
                 for (int i = 0; i < kN; ++i) {
                   s["m"][i] += g[i] * g[i];
                   s["p"][i] -= lr * g[i] / (std::sqrt(s["m"][i]) + F(1e-6f));
                 }
               }});
  c.push_back(
      {"decayed_adagrad",
       Op("decayed_adagrad", {{"Moment", {"m"}}}, {{"MomentOut", {"m"}}}, {{"decay", 0.9f}, {"epsilon", 1e-6f}}),
       {{"m", Fill(0.1)}},
       [](State& s, const std::vector<double>& g, double lr) {
         for (int i = 0; i < kN; ++i) {
           s["m"][i] = F(0.9f) * s["m"][i] + (1 - F(0.9f)) * g[i] * g[i];
           s["p"][i] -= lr * g[i] / (std::sqrt(s["m"][i]) + F(1e-6f));
         }
       }});
  c.push_back({"adamax",
               Op("adamax", {{"Moment", {"m"}}, {"InfNorm", {"u"}}, {"Beta1Pow", {"b1p"}}},
                  {{"MomentOut", {"m"}}, {"InfNormOut", {"u"}}}),
               {{"m", Fill(0)}, {"u", Fill(0)}, {"b1p", {F(0.9f)}}},
               [](State& s, const std::vector<double>& g, double lr) {
                 const double b1 = F(0.9f), b2 = F(0.999f), eps = F(1e-8f);
                 for (int i = 0; i < kN; ++i) {
                   s["m"][i] = b1 * s["m"][i] + (1 - b1) * g[i];
                   s["u"][i] = std::max(b2 * s["u"][i] + eps, std::abs(g[i]));
                   s["p"][i] -= lr / (1 - s["b1p"][0]) * s["m"][i] / s["u"][i];
                 }
                 s["b1p"][0] *= b1;  // as minimize() appends a scale op
               }});
  for (bool centered : {false, true}) {
    OpDesc op = Op("rmsprop", {{"MeanSquare", {"ms"}}, {"Moment", {"mom"}}, {"MeanGrad", {"mg"}}},
                   {{"MeanSquareOut", {"ms"}}, {"MomentOut", {"mom"}}, {"MeanGradOut", {"mg"}}},
                   {{"decay", 0.9f}, {"momentum", 0.5f}, {"epsilon", 1e-6f}, {"centered", centered}});
    c.push_back({centered ? "rmsprop_centered" : "rmsprop",
                 op,
                 {{"ms", Fill(0.5)}, {"mom", Fill(0)}, {"mg", Fill(0)}},
                 [centered](State& s, const std::vector<double>& g, double lr) {
                   const double rho = F(0.9f), mu = F(0.5f), eps = F(1e-6f);
                   for (int i = 0; i < kN; ++i) {
                     s["ms"][i] = rho * s["ms"][i] + (1 - rho) * g[i] * g[i];
                     double denom = s["ms"][i] + eps;
                     if (centered) {
                       s["mg"][i] = rho * s["mg"][i] + (1 - rho) * g[i];
                       denom = s["ms"][i] - s["mg"][i] * s["mg"][i] + eps;
                     }
                     s["mom"][i] = mu * s["mom"][i] + lr * g[i] / std::sqrt(denom);
                     s["p"][i] -= s["mom"][i];
                   }
                 }});
  }
  for (float power : {-0.5f, -0.3f}) {
    OpDesc op = Op("ftrl", {{"SquaredAccumulator", {"sq"}}, {"LinearAccumulator", {"lin"}}},
                   {{"SquaredAccumOut", {"sq"}}, {"LinearAccumOut", {"lin"}}},
                   {{"l1", 0.01f}, {"l2", 0.1f}, {"lr_power", power}});
    c.push_back({power == -0.5f ? "ftrl" : "ftrl_lr_power",
                 op,
                 {{"sq", Fill(0.1)}, {"lin", Fill(0)}},
                 [power](State& s, const std::vector<double>& g, double lr) {
                   const double l1 = F(0.01f), l2 = F(0.1f), pw = F(power);
                   for (int i = 0; i < kN; ++i) {
                     const double acc = s["sq"][i] + g[i] * g[i];
                     const double sigma = (std::pow(acc, -pw) - std::pow(s["sq"][i], -pw)) / lr;
                     s["lin"][i] += g[i] - sigma * s["p"][i];
                     const double l = s["lin"][i];
                     const double y = std::pow(acc, -pw) / lr + 2 * l2;
                     s["p"][i] = std::abs(l) > l1 ? (l1 * (l > 0 ? 1 : -1) - l) / y : 0.0;
                     s["sq"][i] = acc;
                   }
                 }});
  }
  c.push_back({"lars_momentum",
               Op("lars_momentum", {{"Velocity", {"v"}}}, {{"VelocityOut", {"v"}}},
                  {{"mu", 0.9f}, {"lars_coeff", 0.001f}, {"lars_weight_decay", 0.0005f}}),
               {{"v", Fill(0)}},
               [](State& s, const std::vector<double>& g, double lr) {
                 double pn = 0, gn = 0;
                 for (int i = 0; i < kN; ++i) {
                   pn += s["p"][i] * s["p"][i];
                   gn += g[i] * g[i];
                 }
                 pn = std::sqrt(pn);
                 gn = std::sqrt(gn);
                 const double wd = F(0.0005f);
                 const double local = lr * F(0.001f) * pn / (gn + wd * pn);
                 for (int i = 0; i < kN; ++i) {
                   s["v"][i] = F(0.9f) * s["v"][i] + local * (g[i] + wd * s["p"][i]);
                   s["p"][i] -= s["v"][i];
                 }
               }});
  return c;
}

std::vector<double> Grad(int step) { return TensorToVector<double>(RandomTensor<double>({kN}, -1, 1, 50 + step)); }

DDim ShapeOf(const std::vector<double>& v) { return v.size() == 1 ? DDim{1} : DDim{kRows, kWidth}; }

class OptimizerReferenceTest : public ::testing::TestWithParam<OptCase> {};

TEST_P(OptimizerReferenceTest, MatchesReferenceOverTenSteps) {
  const OptCase& c = GetParam();
  State st = c.init;
  st["p"] = TensorToVector<double>(RandomTensor<double>({kN}, -1, 1, 1));
  Scope s;
  for (const auto& [name, v] : st) SetTensor(&s, name, MakeTensor<double>(ShapeOf(v), v));
  const double lr = 0.05;
  SetTensor(&s, "lr", MakeTensor<double>({1}, {lr}));
  for (int t = 0; t < 10; ++t) {
    std::vector<double> g = Grad(t);
    SetTensor(&s, "g", MakeTensor<double>({kRows, kWidth}, g));
    std::vector<OpDesc> ops = {c.op};
    if (c.name == "adamax") ops.push_back(MakeOp("scale", {{"X", {"b1p"}}}, {{"Out", {"b1p"}}}, {{"scale", 0.9f}}));
    absl::Status status = RunOps(ops, &s);
    ASSERT_TRUE(status.ok()) << status;
    c.step(st, g, lr);
  }
  for (const auto& [name, want] : st) {
    std::vector<double> got = TensorToVector<double>(GetTensor(s, name));
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << name << "[" << i << "]";
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, OptimizerReferenceTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<OptCase>& i) { return i.param.name; });

// ---- sparse vs dense ----

struct SparseCase {
  std::string name;
  OpDesc op;
  State init;
};

std::vector<SparseCase> SparseCases() {
  std::vector<SparseCase> c;
  c.push_back({"sgd", Op("sgd", {}, {}), {}});
  c.push_back(
      {"momentum", Op("momentum", {{"Velocity", {"v"}}}, {{"VelocityOut", {"v"}}}, {{"mu", 0.9f}}), {{"v", Fill(0)}}});
  c.push_back({"momentum_nesterov",
               Op("momentum", {{"Velocity", {"v"}}}, {{"VelocityOut", {"v"}}}, {{"mu", 0.9f}, {"use_nesterov", true}}),
               {{"v", Fill(0)}}});
  c.push_back({"adam",
               Op("adam", {{"Moment1", {"m1"}}, {"Moment2", {"m2"}}, {"Beta1Pow", {"b1"}}, {"Beta2Pow", {"b2"}}},
                  {{"Moment1Out", {"m1"}}, {"Moment2Out", {"m2"}}}),
               {{"m1", Fill(0)}, {"m2", Fill(0)}, {"b1", {0.9}}, {"b2", {0.999}}}});
  for (const auto& oc : Cases()) c.push_back({oc.name, oc.op, oc.init});
  return c;
}

class SparseOptimizerTest : public ::testing::TestWithParam<SparseCase> {};

TEST_P(SparseOptimizerTest, SparsePathEqualsDensePathOnTheSameGradient) {
  const SparseCase& c = GetParam();
  Scope dense, sparse;
  std::vector<double> p = TensorToVector<double>(RandomTensor<double>({kN}, -1, 1, 1));
  for (Scope* s : {&dense, &sparse}) {
    SetTensor(s, "p", MakeTensor<double>({kRows, kWidth}, p));
    SetTensor(s, "lr", MakeTensor<double>({1}, {0.05}));
    for (const auto& [name, v] : c.init) SetTensor(s, name, MakeTensor<double>(ShapeOf(v), v));
  }
  for (int t = 0; t < 10; ++t) {
    SelectedRows g;  // rows 1 and 3 (1 twice), never 0 or 2
    g.height = kRows;
    g.rows = {3, 1, 1};
    g.value = RandomTensor<double>({3, kWidth}, -1, 1, 70 + t);
    *sparse.Var("g")->GetMutable<SelectedRows>() = g;
    SetTensor(&dense, "g", Densify<double>(g));
    absl::Status a = RunOps({c.op}, &sparse), b = RunOps({c.op}, &dense);
    ASSERT_TRUE(a.ok()) << a;
    ASSERT_TRUE(b.ok()) << b;
  }
  for (const auto& name : c.op.OutputArgNames()) {
    std::vector<double> x = TensorToVector<double>(GetTensor(sparse, name));
    std::vector<double> y = TensorToVector<double>(GetTensor(dense, name));
    ASSERT_EQ(x.size(), y.size()) << name;
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], 1e-9) << name << "[" << i << "]";
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, SparseOptimizerTest, ::testing::ValuesIn(SparseCases()),
                         [](const ::testing::TestParamInfo<SparseCase>& i) { return i.param.name; });

TEST(SparseOptimizerTest, LazyAdamLeavesRowsWithoutGradientAlone) {
  Scope s;
  std::vector<double> p = TensorToVector<double>(RandomTensor<double>({kN}, -1, 1, 1));
  SetTensor(&s, "p", MakeTensor<double>({kRows, kWidth}, p));
  SetTensor(&s, "lr", MakeTensor<double>({1}, {0.05}));
  for (const char* m : {"m1", "m2"}) SetTensor(&s, m, MakeTensor<double>({kRows, kWidth}, Fill(0)));
  SetTensor(&s, "b1", MakeTensor<double>({1}, {0.9}));
  SetTensor(&s, "b2", MakeTensor<double>({1}, {0.999}));
  SelectedRows g;
  g.height = kRows;
  g.rows = {2};
  g.value = MakeTensor<double>({1, kWidth}, {1, 1, 1});
  *s.Var("g")->GetMutable<SelectedRows>() = g;
  OpDesc op = Op("adam", {{"Moment1", {"m1"}}, {"Moment2", {"m2"}}, {"Beta1Pow", {"b1"}}, {"Beta2Pow", {"b2"}}},
                 {{"Moment1Out", {"m1"}}, {"Moment2Out", {"m2"}}}, {{"lazy_mode", true}});
  ASSERT_TRUE(RunOps({op}, &s).ok());
  std::vector<double> out = TensorToVector<double>(GetTensor(s, "p"));
  for (int i = 0; i < kN; ++i) {
    if (i / kWidth == 2)
      EXPECT_NE(out[i], p[i]);
    else
      EXPECT_EQ(out[i], p[i]) << i;
  }
}

}  // namespace
}  // namespace oar::testing
