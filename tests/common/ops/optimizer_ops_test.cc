// Each optimizer op against a plain reference implementation, 10 steps.
#include <cmath>

#include "gtest/gtest.h"
#include "tests/common/ops/op_test_util.h"

namespace oar::testing {
namespace {

constexpr int kSteps = 10;
constexpr int64_t kN = 7;

std::vector<double> Grad(int step) {
  Tensor g = RandomTensor<double>({kN}, -1, 1, 100 + step);
  return TensorToVector<double>(g);
}

void Expect(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
}

TEST(SgdOpTest, MatchesReference) {
  Scope s;
  std::vector<double> p = TensorToVector<double>(RandomTensor<double>({kN}, -1, 1, 1));
  SetTensor(&s, "p", MakeTensor<double>({kN}, p));
  SetTensor(&s, "lr", MakeTensor<double>({1}, {0.1}));
  for (int t = 0; t < kSteps; ++t) {
    std::vector<double> g = Grad(t);
    SetTensor(&s, "g", MakeTensor<double>({kN}, g));
    ASSERT_TRUE(
        RunOps({MakeOp("sgd", {{"Param", {"p"}}, {"Grad", {"g"}}, {"LearningRate", {"lr"}}}, {{"ParamOut", {"p"}}})},
               &s)
            .ok());
    for (int64_t i = 0; i < kN; ++i) p[i] -= 0.1 * g[i];
  }
  Expect(TensorToVector<double>(GetTensor(s, "p")), p);
}

class MomentumOpTest : public ::testing::TestWithParam<bool> {};

TEST_P(MomentumOpTest, MatchesReference) {
  const bool nesterov = GetParam();
  const double mu = 0.9, lr = 0.05;
  Scope s;
  std::vector<double> p = TensorToVector<double>(RandomTensor<double>({kN}, -1, 1, 1));
  std::vector<double> v(kN, 0.0);
  SetTensor(&s, "p", MakeTensor<double>({kN}, p));
  SetTensor(&s, "v", MakeTensor<double>({kN}, v));
  SetTensor(&s, "lr", MakeTensor<double>({1}, {lr}));
  for (int t = 0; t < kSteps; ++t) {
    std::vector<double> g = Grad(t);
    SetTensor(&s, "g", MakeTensor<double>({kN}, g));
    ASSERT_TRUE(
        RunOps({MakeOp("momentum", {{"Param", {"p"}}, {"Grad", {"g"}}, {"Velocity", {"v"}}, {"LearningRate", {"lr"}}},
                       {{"ParamOut", {"p"}}, {"VelocityOut", {"v"}}}, {{"mu", float(mu)}, {"use_nesterov", nesterov}})},
               &s)
            .ok());
    for (int64_t i = 0; i < kN; ++i) {
      v[i] = float(mu) * v[i] + g[i];
      p[i] -= nesterov ? (g[i] + float(mu) * v[i]) * lr : lr * v[i];
    }
  }
  Expect(TensorToVector<double>(GetTensor(s, "p")), p);
  Expect(TensorToVector<double>(GetTensor(s, "v")), v);
}

INSTANTIATE_TEST_SUITE_P(Nesterov, MomentumOpTest, ::testing::Bool());

TEST(AdamOpTest, MatchesReference) {
  const double b1 = 0.9, b2 = 0.999, eps = 1e-8, lr = 0.01;
  Scope s;
  std::vector<double> p = TensorToVector<double>(RandomTensor<double>({kN}, -1, 1, 1));
  std::vector<double> m1(kN, 0.0), m2(kN, 0.0);
  double b1p = float(b1), b2p = float(b2);
  SetTensor(&s, "p", MakeTensor<double>({kN}, p));
  SetTensor(&s, "m1", MakeTensor<double>({kN}, m1));
  SetTensor(&s, "m2", MakeTensor<double>({kN}, m2));
  SetTensor(&s, "b1p", MakeTensor<double>({1}, {b1p}));
  SetTensor(&s, "b2p", MakeTensor<double>({1}, {b2p}));
  SetTensor(&s, "lr", MakeTensor<double>({1}, {lr}));
  for (int t = 0; t < kSteps; ++t) {
    std::vector<double> g = Grad(t);
    SetTensor(&s, "g", MakeTensor<double>({kN}, g));
    // The update, then the beta-power scales minimize() appends after it.
    ASSERT_TRUE(RunOps({MakeOp("adam",
                               {{"Param", {"p"}},
                                {"Grad", {"g"}},
                                {"LearningRate", {"lr"}},
                                {"Moment1", {"m1"}},
                                {"Moment2", {"m2"}},
                                {"Beta1Pow", {"b1p"}},
                                {"Beta2Pow", {"b2p"}}},
                               {{"ParamOut", {"p"}}, {"Moment1Out", {"m1"}}, {"Moment2Out", {"m2"}}},
                               {{"beta1", float(b1)}, {"beta2", float(b2)}, {"epsilon", float(eps)}}),
                        MakeOp("scale", {{"X", {"b1p"}}}, {{"Out", {"b1p"}}}, {{"scale", float(b1)}}),
                        MakeOp("scale", {{"X", {"b2p"}}}, {{"Out", {"b2p"}}}, {{"scale", float(b2)}})},
                       &s)
                    .ok());
    const double fb1 = float(b1), fb2 = float(b2), feps = float(eps);
    const double lr_t = lr * std::sqrt(1 - b2p) / (1 - b1p);
    for (int64_t i = 0; i < kN; ++i) {
      m1[i] = fb1 * m1[i] + (1 - fb1) * g[i];
      m2[i] = fb2 * m2[i] + (1 - fb2) * g[i] * g[i];
      p[i] -= lr_t * m1[i] / (std::sqrt(m2[i]) + feps * std::sqrt(1 - b2p));
    }
    b1p *= fb1;
    b2p *= fb2;
  }
  Expect(TensorToVector<double>(GetTensor(s, "p")), p);
  Expect(TensorToVector<double>(GetTensor(s, "m2")), m2);
}

TEST(SgdOpTest, GradShapeMismatchNamesBothVariables) {
  Scope s;
  SetTensor(&s, "p", MakeTensor<float>({3}, {1, 2, 3}));
  SetTensor(&s, "g", MakeTensor<float>({2}, {1, 2}));
  SetTensor(&s, "lr", MakeTensor<float>({1}, {0.1f}));
  absl::Status st =
      RunOps({MakeOp("sgd", {{"Param", {"p"}}, {"Grad", {"g"}}, {"LearningRate", {"lr"}}}, {{"ParamOut", {"p"}}})}, &s);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'g'"), std::string::npos) << st;
  EXPECT_NE(st.message().find("'p'"), std::string::npos) << st;
}

}  // namespace
}  // namespace oar::testing
