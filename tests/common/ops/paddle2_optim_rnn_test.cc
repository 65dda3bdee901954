// Paddle 2.x's optimizers and recurrent pieces against Paddle's numbers
// or central differences: sparse Adam as Paddle's CPU kernel steps,
// creation ops shaped by ShapeTensor/ShapeTensorList, the rnn op's
// gradients, and lamb (PaddlePaddle 2.6.2's recorded parameters).
#include <cmath>

#include "common/framework/selected_rows.h"
#include "gtest/gtest.h"
#include "tests/common/ops/op_test_util.h"

namespace oar::testing {
namespace {

// Paddle's CPU adam on a sparse gradient (lazy_mode off) advances the beta
// powers before its step reads them, where Beta1PowOut is Beta1Pow as every
// program binds them. The expected values were recorded from PaddlePaddle
// 2.6.2 (an Embedding(10, 2, sparse=True) fed ids 1, 3, 1, loss
// sum(emb * [1, -2]), Adam(0.1)): row 1 moves by -0.07441342 after one step
// and -0.16025907 after two; unused rows do not move.
TEST(SparseAdamTest, StepsAsPaddlesCpuKernel) {
  Scope s;
  SetTensor(&s, "p", MakeTensor<float>({10, 2}, std::vector<float>(20, 0.f)));
  SetTensor(&s, "lr", MakeTensor<float>({1}, {0.1f}));
  SetTensor(&s, "m1", MakeTensor<float>({10, 2}, std::vector<float>(20, 0.f)));
  SetTensor(&s, "m2", MakeTensor<float>({10, 2}, std::vector<float>(20, 0.f)));
  SetTensor(&s, "b1", MakeTensor<float>({1}, {0.9f}));
  SetTensor(&s, "b2", MakeTensor<float>({1}, {0.999f}));
  OpDesc op = MakeOp("adam",
                     {{"Param", {"p"}},
                      {"Grad", {"g"}},
                      {"LearningRate", {"lr"}},
                      {"Moment1", {"m1"}},
                      {"Moment2", {"m2"}},
                      {"Beta1Pow", {"b1"}},
                      {"Beta2Pow", {"b2"}}},
                     {{"ParamOut", {"p"}},
                      {"Moment1Out", {"m1"}},
                      {"Moment2Out", {"m2"}},
                      {"Beta1PowOut", {"b1"}},
                      {"Beta2PowOut", {"b2"}}});
  const float want[2] = {-0.07441342f, -0.16025907f};
  for (int step = 0; step < 2; ++step) {
    SelectedRows g;
    g.height = 10;
    g.rows = {1, 3, 1};
    g.value = MakeTensor<float>({3, 2}, {1, -2, 1, -2, 1, -2});
    *s.Var("g")->GetMutable<SelectedRows>() = g;
    ASSERT_TRUE(RunOps({op}, &s).ok());
    const float* p = GetTensor(s, "p").data<float>();
    EXPECT_NEAR(p[2], want[step], 2e-7) << "step " << step;
    EXPECT_NEAR(p[3], -want[step], 2e-7) << "step " << step;
    EXPECT_NEAR(p[6], want[step], 2e-7) << "step " << step;
    EXPECT_EQ(p[0], 0.f);
  }
}

}  // namespace
}  // namespace oar::testing

namespace oar::testing {
namespace {

// Paddle 2.x computes a creation op's shape when a dimension is the batch
// size (paddle.nn.LSTM's initial states: [layers, shape(x)[0], hidden]):
// ShapeTensorList holds one int tensor per dimension, ShapeTensor all.
TEST(ShapeTensorTest, CreationOpsTakeTheirShapeFromTensors) {
  Scope s;
  SetTensor(&s, "two", MakeTensor<int32_t>({1}, {2}));
  SetTensor(&s, "batch", MakeTensor<int64_t>({1}, {5}));
  SetTensor(&s, "whole", MakeTensor<int64_t>({2}, {3, 4}));
  ASSERT_TRUE(
      RunOps({MakeOp("fill_constant", {{"ShapeTensorList", {"two", "batch"}}}, {{"Out", {"a"}}}, {{"value", 1.5f}}),
              MakeOp("uniform_random", {{"ShapeTensor", {"whole"}}}, {{"Out", {"b"}}}, {{"seed", int32_t{3}}})},
             &s)
          .ok());
  EXPECT_EQ(GetTensor(s, "a").dims(), (DDim{2, 5}));
  EXPECT_EQ(GetTensor(s, "a").data<float>()[9], 1.5f);
  EXPECT_EQ(GetTensor(s, "b").dims(), (DDim{3, 4}));
}

// The rnn op's gradients (LSTM, GRU, tanh RNN; 2 layers, both directions)
// against central differences, with the final states in the loss too.
class RnnGradTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RnnGradTest, GradientsMatchNumeric) {
  const std::string mode = GetParam();
  const int64_t T = 3, N = 2, I = 3, H = 2, G = mode == "LSTM" ? 4 : mode == "GRU" ? 3 : 1;
  std::map<std::string, Tensor> in = {{"x", RandomTensor<double>({T, N, I}, -1, 1, 20)},
                                      {"h0", RandomTensor<double>({4, N, H}, -1, 1, 21)}};
  std::vector<std::string> ws, bs, states = {"h0"};
  if (mode == "LSTM") {
    in["c0"] = RandomTensor<double>({4, N, H}, -1, 1, 22);
    states.push_back("c0");
  }
  for (int c = 0; c < 4; ++c) {
    const int64_t in_dim = c < 2 ? I : 2 * H;
    for (const auto& [name, dims] : {std::make_pair("wi" + std::to_string(c), DDim{G * H, in_dim}),
                                     std::make_pair("wh" + std::to_string(c), DDim{G * H, H})}) {
      in[name] = RandomTensor<double>(dims, -0.8, 0.8, 30 + ws.size());
      ws.push_back(name);
    }
    for (const std::string name : {"bi" + std::to_string(c), "bh" + std::to_string(c)}) {
      in[name] = RandomTensor<double>({G * H}, -0.5, 0.5, 60 + bs.size());
      bs.push_back(name);
    }
  }
  std::vector<std::string> weights = ws;
  weights.insert(weights.end(), bs.begin(), bs.end());
  std::vector<std::string> state_out = {"hT"};
  if (mode == "LSTM") state_out.push_back("cT");
  OpDesc op = MakeOp("rnn", {{"Input", {"x"}}, {"PreState", states}, {"WeightList", weights}, {"SequenceLength", {}}},
                     {{"Out", {"y"}}, {"State", state_out}, {"Reserve", {"r"}}, {"DropoutState", {"d"}}},
                     {{"mode", mode},
                      {"num_layers", int32_t{2}},
                      {"is_bidirec", true},
                      {"hidden_size", int32_t(H)},
                      {"input_size", int32_t(I)}});
  std::vector<std::string> check = {"x"};
  check.insert(check.end(), states.begin(), states.end());
  check.insert(check.end(), weights.begin(), weights.end());
  std::vector<std::string> loss = {"y"};
  loss.insert(loss.end(), state_out.begin(), state_out.end());
  ExpectGradientsMatch<double>(op, in, check, {.loss_outputs = loss});
}

INSTANTIATE_TEST_SUITE_P(Modes, RnnGradTest, ::testing::Values("LSTM", "GRU", "RNN_TANH"));

}  // namespace
}  // namespace oar::testing

namespace oar::testing {
namespace {

// lamb against PaddlePaddle 2.6.2: y = x·W + b, loss mean(y²), two steps of
// paddle.optimizer.Lamb(0.1, lamb_weight_decay=wd) from the recorded W; the
// final W and b Paddle printed. With wd 0 Paddle does not adapt the step.
TEST(LambTest, TwoStepsMatchPaddle) {
  struct Case {
    float wd;
    std::vector<float> w0, w2, b2;
  };
  const Case cases[] = {
      {0.01f,
       {0.0652087926864624f, -0.2414223551750183f, -0.5483035445213318f, 0.7685800790786743f, -0.45449650287628174f,
        0.9177653789520264f},
       {0.1760866492986679f, -0.3524329960346222f, -0.43649789690971375f, 0.6562183499336243f, -0.34277021884918213f,
        0.8052197098731995f},
       {0.10997237265110016f, -0.11002746224403381f}},
      {0.0f,
       {0.5109950304031372f, 0.16595423221588135f, 0.8028000593185425f, 0.29805004596710205f, -0.9639919996261597f,
        0.8294323682785034f},
       {0.3109133243560791f, -0.03191111981868744f, 0.9966761469841003f, 0.09932142496109009f, -0.7677246928215027f,
        0.6306148767471313f},
       {0.1969590038061142f, -0.19886891543865204f}},
  };
  const float x[2][3] = {{1, 2, 3}, {-1, 0.5f, 2}};
  for (const Case& c : cases) {
    Scope s;
    SetTensor(&s, "w", MakeTensor<float>({3, 2}, c.w0));
    SetTensor(&s, "b", MakeTensor<float>({2}, {0, 0}));
    SetTensor(&s, "lr", MakeTensor<float>({1}, {0.1f}));
    for (const char* m : {"mw1", "mw2"}) SetTensor(&s, m, MakeTensor<float>({3, 2}, std::vector<float>(6, 0)));
    for (const char* m : {"mb1", "mb2"}) SetTensor(&s, m, MakeTensor<float>({2}, {0, 0}));
    for (const char* p : {"w", "b"}) {
      SetTensor(&s, std::string(p) + "_b1p", MakeTensor<float>({1}, {0.9f}));
      SetTensor(&s, std::string(p) + "_b2p", MakeTensor<float>({1}, {0.999f}));
    }
    auto lamb = [&](const std::string& p, const std::string& m) {
      return MakeOp("lamb",
                    {{"Param", {p}},
                     {"Grad", {p + "_g"}},
                     {"LearningRate", {"lr"}},
                     {"Moment1", {m + "1"}},
                     {"Moment2", {m + "2"}},
                     {"Beta1Pow", {p + "_b1p"}},
                     {"Beta2Pow", {p + "_b2p"}}},
                    {{"ParamOut", {p}},
                     {"Moment1Out", {m + "1"}},
                     {"Moment2Out", {m + "2"}},
                     {"Beta1PowOut", {p + "_b1p"}},
                     {"Beta2PowOut", {p + "_b2p"}}},
                    {{"weight_decay", c.wd}});
    };
    for (int step = 0; step < 2; ++step) {
      const float* w = GetTensor(s, "w").data<float>();
      const float* b = GetTensor(s, "b").data<float>();
      std::vector<float> gw(6, 0), gb(2, 0);
      for (int n = 0; n < 2; ++n) {
        for (int j = 0; j < 2; ++j) {
          float y = b[j];
          for (int k = 0; k < 3; ++k) y += x[n][k] * w[k * 2 + j];
          const float gy = 2 * y / 4;  // d mean(y²) / dy over 4 values
          gb[j] += gy;
          for (int k = 0; k < 3; ++k) gw[k * 2 + j] += x[n][k] * gy;
        }
      }
      SetTensor(&s, "w_g", MakeTensor<float>({3, 2}, gw));
      SetTensor(&s, "b_g", MakeTensor<float>({2}, gb));
      ASSERT_TRUE(RunOps({lamb("w", "mw"), lamb("b", "mb")}, &s).ok());
    }
    for (int i = 0; i < 6; ++i)
      EXPECT_NEAR(GetTensor(s, "w").data<float>()[i], c.w2[i], 2e-6) << "wd " << c.wd << " w" << i;
    for (int i = 0; i < 2; ++i)
      EXPECT_NEAR(GetTensor(s, "b").data<float>()[i], c.b2[i], 2e-6) << "wd " << c.wd << " b" << i;
  }
}

}  // namespace
}  // namespace oar::testing
