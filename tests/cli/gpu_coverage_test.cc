// Every op the bundled Fashion-MNIST models run (forward, backward, every
// optimizer `oar train` offers, the startup program, and their transpiled
// pserver-mode trainer programs, parameters sliced over two pservers), and
// every op of the programs PaddlePaddle wrote (tests/testdata/paddle), has
// a GPU kernel or runs on the host by design (feed/fetch, send/recv...), so
// `oar train --device gpu` and `oar run --device gpu` never stop at a
// missing kernel. Two checks: each op type has a GPU kernel of some dtype
// (every op of every block, run or not), and — learned by running the
// programs on the CPU, where an executor picks each kernel's dtype as a GPU
// executor would — a GPU kernel of the very dtype each run chose. This
// reads the op registry, so it runs on every CUDA build, GPU or not (CI's
// included); without CUDA it skips.
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "cli/model_build.h"
#include "common/api/unique_name.h"
#include "common/device/gpu_info.h"
#include "common/framework/executor.h"
#include "common/framework/op_registry.h"
#include "common/framework/run_env.h"
#include "gtest/gtest.h"
#include "tests/common/api/lr_schedules.h"
#include "tests/common/paddle/paddle_fixture.h"
#include "tests/util/build_paths.h"
#include "trainer/dist_ops.h"
#include "transpiler/distribute_transpiler.h"

namespace oar {
namespace {

bool HasGpuKernel(const OpInfo& info) {
  for (DataType d : {DataType::kFloat32, DataType::kFloat64, DataType::kInt32, DataType::kInt64, DataType::kBool}) {
    if (info.FindKernel(Place::Kind::kCUDA, d).ok()) return true;
  }
  return false;
}

// The op types of a block (block 0 unless named) that would stop a GPU
// executor.
void CollectMissing(const ProgramDesc& program, std::vector<std::string>* missing, size_t block_id = 0) {
  const BlockDesc& block = program.Block(block_id);
  for (size_t i = 0; i < block.OpSize(); ++i) {
    const OpDesc& op = block.Op(i);
    const OpInfo* info = OpRegistry::Global().Find(op.type);
    ASSERT_NE(info, nullptr) << op.type;
    if (!info->host_side() && !HasGpuKernel(*info)) missing->push_back(op.type);
  }
}

// The kernels the executors given env() choose, by op type and dtype; the
// ones a GPU executor could not run.
class ChosenKernels {
 public:
  ChosenKernels() {
    env_.on_kernel_chosen = [this](const OpDesc& op, DataType dtype, const Place&) {
      absl::MutexLock l(&mu_);
      chosen_.emplace(op.type, dtype);
    };
  }
  const RunEnv* env() const { return &env_; }
  size_t size() {
    absl::MutexLock l(&mu_);
    return chosen_.size();
  }
  // "type (dtype)" for each chosen kernel a GPU place has no GPU kernel for:
  // there it would fall back to the host (a host-side op runs its CPU kernel
  // there by design: it counts as one).
  std::vector<std::string> MissingOnGpu() {
    absl::MutexLock l(&mu_);
    std::vector<std::string> missing;
    for (const auto& [type, dtype] : chosen_) {
      const OpInfo* info = OpRegistry::Global().Find(type);
      if (info->host_side() || info->FindKernel(Place::Kind::kCUDA, dtype).ok()) continue;
      missing.push_back(absl::StrCat(type, " (", DataTypeName(dtype), ")"));
    }
    return missing;
  }

 private:
  RunEnv env_;
  absl::Mutex mu_;
  std::set<std::pair<std::string, DataType>> chosen_ ABSL_GUARDED_BY(mu_);
};

// Runs `model`'s startup program, two training steps and a test pass on
// the CPU, with `kernels` told of every kernel chosen.
void RunOnCpu(cli::ModelPrograms& p, ChosenKernels* kernels) {
  Executor exe(CPUPlace(), {.env = kernels->env()});
  Scope scope;
  ASSERT_TRUE(exe.Run(p.startup.desc(), &scope).ok());
  const int64_t batch = 4;
  Tensor x, y;
  float* xp = x.mutable_data<float>(DDim{batch, 784});
  for (int64_t i = 0; i < batch * 784; ++i) xp[i] = static_cast<float>(i % 17) / 17;
  int64_t* yp = y.mutable_data<int64_t>(DDim{batch, 1});
  for (int64_t i = 0; i < batch; ++i) yp[i] = i % 10;
  cli::ShapeLikeFeed(p.vars.feeds[0], &x);
  const FeedMap feed = {{p.vars.feeds[0].name(), x}, {p.vars.feeds[1].name(), y}};
  for (int step = 0; step < 2; ++step) {
    auto r = exe.Run(p.main.desc(), &scope, feed, {p.vars.loss.name()});
    ASSERT_TRUE(r.ok()) << r.status();
  }
  auto r = exe.Run(p.test.desc(), &scope, feed, {p.vars.loss.name()});
  ASSERT_TRUE(r.ok()) << r.status();
}

TEST(GpuCoverageTest, EveryOpOfTheFashionModelsHasAGpuKernelOrRunsOnTheHost) {
  if (!BuiltWithCuda()) GTEST_SKIP() << "this oar was built without CUDA";
  OpRegistry::ExtendGlobal(RegisterDistOps);  // send, recv and the barriers, as `oar` registers them
  for (const std::string model : {"fashion_mlp", "fashion_cnn"}) {
    for (const std::string optimizer : {"sgd", "momentum", "adam", "lazy_adam", "adagrad"}) {
      SCOPED_TRACE(model + " with " + optimizer);
      cli::BuildOptions o;
      o.model = model;
      o.optimizer = optimizer;
      auto built = cli::BuildModel(o);
      ASSERT_TRUE(built.ok()) << built.status();
      std::vector<std::string> missing;
      for (const Program* p : {&(*built)->main, &(*built)->startup, &(*built)->test})
        CollectMissing(p->desc(), &missing);
      ChosenKernels kernels;
      RunOnCpu(**built, &kernels);
      EXPECT_GT(kernels.size(), 10u);  // the CPU run reported its kernels
      EXPECT_EQ(kernels.MissingOnGpu(), std::vector<std::string>{});
      // The pserver-mode trainer: small blocks, so big parameters are sliced
      // (split_byref before send, concat after recv).
      DistributeTranspiler t{DistributeTranspilerConfig{}};
      ProgramDesc main = (*built)->main.desc(), startup = (*built)->startup.desc();
      ASSERT_TRUE(t.transpile(0, &main, "127.0.0.1:6174,127.0.0.1:6175", 2, true, &startup).ok());
      auto trainer = t.get_trainer_program(/*wait_port=*/false);
      ASSERT_TRUE(trainer.ok()) << trainer.status();
      auto trainer_startup = t.get_trainer_startup_program();
      ASSERT_TRUE(trainer_startup.ok()) << trainer_startup.status();
      CollectMissing(*trainer, &missing);
      CollectMissing(*trainer_startup, &missing);
      EXPECT_TRUE(missing.empty()) << "no GPU kernel: " << absl::StrJoin(missing, ", ");
    }
  }
}

// Every op of each learning-rate schedule (piecewise_decay's Switch with
// its conditional blocks included), which gpu_lr_schedule_test runs on a GPU.
TEST(GpuCoverageTest, EveryOpOfTheLearningRateSchedulesHasAGpuKernel) {
  if (!BuiltWithCuda()) GTEST_SKIP() << "this oar was built without CUDA";
  for (const testing::Schedule& s : testing::Schedules()) {
    SCOPED_TRACE(s.name);
    UniqueNameGuard names;
    Program main, startup;
    {
      ProgramGuard g(&main, &startup);
      s.build();
    }
    ASSERT_TRUE(main.status().ok()) << main.status();
    std::vector<std::string> missing;
    for (size_t b = 0; b < main.desc().NumBlocks(); ++b) CollectMissing(main.desc(), &missing, b);
    CollectMissing(startup.desc(), &missing);
    EXPECT_TRUE(missing.empty()) << "no GPU kernel: " << absl::StrJoin(missing, ", ");
    // Ten steps on the CPU take every branch of piecewise_decay's Switch.
    ChosenKernels kernels;
    testing::ExpectFollowsFormula(s, CPUPlace(), kernels.env());
    EXPECT_GT(kernels.size(), 0u);
    EXPECT_EQ(kernels.MissingOnGpu(), std::vector<std::string>{});
  }
}

// The whole-model fixtures of issue 20 (ResNet-18, a BERT-style encoder,
// Wide&Deep, LSTM and GRU classifiers, word2vec) use op families that have CPU kernels only for now (layer_norm,
// rnn, gelu, slice, adamw, sigmoid_cross_entropy_with_logits, nce, hierarchical_sigmoid ...; `oar inspect
// --ops` shows which): on --device gpu those ops run their CPU kernels on the
// host, with a warning. The checks below (a GPU kernel for every op) hold for
// the rest.
bool CpuOnlyFixture(const std::string& model) {
  return model == "resnet18" || model == "bert" || model == "wide_deep" || model == "lstm" || model == "gru" ||
         model == "word2vec_nce" || model == "word2vec_hsigmoid";
}

// Every op of the programs PaddlePaddle 2.6 wrote (tests/testdata/paddle/:
// main and startup), which `oar train --program --device gpu` runs.
TEST(GpuCoverageTest, EveryOpOfThePaddleWrittenProgramsHasAGpuKernelOrRunsOnTheHost) {
  if (!BuiltWithCuda()) GTEST_SKIP() << "this oar was built without CUDA";
  const std::string root = TestdataDir() + "/paddle";
  int programs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(root)) {
    if (CpuOnlyFixture(entry.path().filename().string())) continue;
    for (const std::string file : {"main.pb", "startup.pb"}) {
      const std::string path = (entry.path() / file).string();
      SCOPED_TRACE(path);
      std::ifstream in(path, std::ios::binary);
      ASSERT_TRUE(in.good());
      std::stringstream bytes;
      bytes << in.rdbuf();
      auto program = ProgramDesc::Parse(bytes.str());
      ASSERT_TRUE(program.ok()) << program.status();
      std::vector<std::string> missing;
      CollectMissing(**program, &missing);
      EXPECT_TRUE(missing.empty()) << "no GPU kernel: " << absl::StrJoin(missing, ", ");
      ++programs;
    }
  }
  EXPECT_GE(programs, 16);  // the nine fixtures' main and startup programs
}

// The dtypes those programs' kernels run in: each fixture trained on the CPU
// from Paddle's values, as PaddleProgramTest does, its chosen kernels read.
TEST(GpuCoverageTest, EveryKernelThePaddleWrittenProgramsChooseHasAGpuKernelOfItsDtype) {
  if (!BuiltWithCuda()) GTEST_SKIP() << "this oar was built without CUDA";
  int fixtures = 0;
  for (const auto& entry : std::filesystem::directory_iterator(TestdataDir() + "/paddle")) {
    if (!std::filesystem::exists(entry.path() / "losses.txt")) continue;  // a saved model, not a training fixture
    const std::string model = entry.path().filename().string();
    if (CpuOnlyFixture(model)) continue;
    SCOPED_TRACE(model);
    const paddle_fixture::Fixture f = paddle_fixture::Load(model);
    ChosenKernels kernels;
    const std::vector<double> losses = paddle_fixture::Train(model, f, CPUPlace(), kernels.env());
    ASSERT_EQ(losses.size(), static_cast<size_t>(f.steps));
    EXPECT_GT(kernels.size(), 5u);
    EXPECT_EQ(kernels.MissingOnGpu(), std::vector<std::string>{});
    ++fixtures;
  }
  EXPECT_GE(fixtures, 8);
}

}  // namespace
}  // namespace oar
