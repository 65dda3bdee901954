// An elastic sync pserver job end to end, as `oar launch --elastic` runs it
// (its own etcd-server, 2 pservers, trainers joined through etcd): a
// trainer is SIGKILLed mid-epoch and another added back, and the job
// trains on. Sync training is exact, so the test replays the job in one
// process: from the trainers' logs (each chunk's first step, each step's
// loss) and the pservers' (the killed trainer's last counted step), every
// step's contributors and their batches are known; the process computes
// each contributor's gradients and applies their mean with the pservers'
// own ops (each in its trainer's slot, scaled by slots/contributors, then
// sum, scale 1/slots, sgd), in the order the steps were applied. Each
// trainer's logged loss must be that process's loss on its batch at that
// step, and the job's final test loss the process's. The match is to the
// bit (every loss within its printed rounding): the same mean taken as one
// gradient over the joined batches, or GEMMs on another number of BLAS
// threads, differ in the last bits, which a ReLU network amplifies within a
// few hundred steps; hence the per-slot arithmetic, one BLAS thread on both
// sides and lr 0.01. Dropping the killed trainer's last step from the
// replay, or averaging over all slots instead of the contributors, fails it
// by 1e-2 and 2e-1.
#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/data_flags.h"
#include "cli/model_build.h"
#include "common/base/blas.h"
#include "common/data/fashion_mnist.h"
#include "gflags/gflags.h"
#include "gtest/gtest.h"
#include "tests/util/etcd_server.h"
#include "tests/util/need_tool.h"
#include "tests/util/oar_process.h"

DECLARE_int64(limit);
DECLARE_int32(seed);
DECLARE_int32(batch_size);
DECLARE_string(data_dir);

namespace oar {
namespace {

constexpr int kTrainers = 3, kChunks = 12, kBatch = 32, kLimit = 6144, kEpochs = 3, kSeed = 3;
constexpr float kLr = 0.01f;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// One batch a trainer process put into a step.
struct Part {
  int trainer = 0;
  std::string process;  // its log's name
  int epoch = 0, chunk = 0, batch = 0;
  bool has_loss = false;
  double loss = 0;
};

// A trainer process's log: its chunks' first steps, in order, and its
// steps' losses (the k-th progress line is its k-th step with data).
struct ProcessLog {
  int trainer = -1;
  std::vector<std::array<int, 3>> chunks;  // epoch, chunk, first step
  std::vector<double> losses;
};

ProcessLog ParseTrainerLog(const std::string& text) {
  ProcessLog out;
  static const std::regex begin(R"(@oar chunk-begin trainer=(\d+) epoch=(\d+) chunk=(\d+) step=(\d+))");
  static const std::regex progress(R"(@oar progress trainer=(\d+) .* loss=([-0-9.eE+]+))");
  std::smatch m;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (std::regex_search(line, m, begin)) {
      out.trainer = std::stoi(m[1]);
      out.chunks.push_back({std::stoi(m[2]), std::stoi(m[3]), std::stoi(m[4])});
    } else if (std::regex_search(line, m, progress)) {
      out.losses.push_back(std::stod(m[2]));
    }
  }
  return out;
}

TEST(ElasticSyncE2eTest, AKilledAndAnAddedTrainerTrainAsOneProcessOverTheStepsBatches) {
  OAR_NEED_TOOL(EtcdServer::Installed(), "etcd (Debian's etcd-server)");
  const std::string logs = TempDir("elastic_sync");
  // One BLAS thread in the job and here: the same GEMM bits on both sides.
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  SetBlasThreads(1);
  const std::string model = absl::StrCat("--model fashion_mlp --optimizer sgd --lr ", kLr, " --seed ", kSeed,
                                         " --limit ", kLimit, " --batch_size ", kBatch * kTrainers);
  Result job = Oar(absl::StrCat("launch --elastic --pservers 2 --no_slice --trainers 2:", kTrainers, " ", model,
                                " --epochs ", kEpochs, " --rpc_deadline 4000 --log_dir ", logs,
                                " --chaos 'kill trainer 1 at step 40; add 1 at step 150'"));
  ASSERT_EQ(job.code, 0) << job.out;
  EXPECT_NE(job.out.find("chaos: killed trainer 1 (SIGKILL) at step"), std::string::npos) << job.out;
  EXPECT_NE(job.out.find("every chunk trained exactly once: 3 epoch(s) x 12 chunks"), std::string::npos) << job.out;

  // The killed trainer's last step, as both pservers agreed it.
  std::set<int> last_steps;
  static const std::regex left(R"(trainer 1 left the job; its gradients count through step (-?\d+))");
  for (const char* ps : {"pserver.0.log", "pserver.1.log"}) {
    const std::string text = ReadFile(logs + "/" + ps);
    std::smatch m;
    ASSERT_TRUE(std::regex_search(text, m, left)) << text;
    last_steps.insert(std::stoi(m[1]));
  }
  ASSERT_EQ(last_steps.size(), 1u) << "the pservers disagree on trainer 1's last step";
  const int killed_last = *last_steps.begin();

  // Each step's parts, from every trainer process's log.
  std::map<int, std::vector<Part>> steps;
  const int batches_per_chunk = kLimit / kChunks / kBatch;
  int joiner_parts = 0;
  for (const auto& entry : std::filesystem::directory_iterator(logs)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("trainer.", 0) != 0) continue;
    const ProcessLog log = ParseTrainerLog(ReadFile(entry.path().string()));
    const bool killed = name == "trainer.1.log";
    size_t k = 0;  // its k-th step with data
    for (const auto& [epoch, chunk, first] : log.chunks) {
      for (int b = 0; b < batches_per_chunk; ++b, ++k) {
        const int step = first + b;
        if (killed && step > killed_last) break;
        Part p{log.trainer, name, epoch, chunk, b, k < log.losses.size(), k < log.losses.size() ? log.losses[k] : 0};
        steps[step].push_back(p);
        if (name == "trainer.1.run2.log") ++joiner_parts;
      }
    }
    if (!killed) {
      EXPECT_EQ(k, log.losses.size()) << name << ": each step with data logged once";
    }
  }
  ASSERT_FALSE(steps.empty());
  // Trainer 1 contributed before it was killed (its partial chunk counts).
  int killed_parts = 0;
  for (const auto& [s, parts] : steps) {
    for (const Part& p : parts) killed_parts += p.process == "trainer.1.log";
  }
  EXPECT_GT(killed_parts, 0) << job.out;
  std::printf("steps applied %zu; trainer 1 killed after %d, its replacement trained %d batch(es)\n", steps.size(),
              killed_parts, joiner_parts);

  // One process over the same batches: the model as the job built it.
  auto programs = cli::BuildModel({.model = "fashion_mlp",
                                   .optimizer = "sgd",
                                   .learning_rate = kLr,
                                   .seed = kSeed,
                                   .batch_size = kBatch * kTrainers,
                                   .constant_init = std::nullopt});
  ASSERT_TRUE(programs.ok()) << programs.status();
  cli::ModelPrograms& p = **programs;
  gflags::FlagSaver saver;
  FLAGS_limit = kLimit;
  FLAGS_seed = kSeed;
  auto data = cli::DataConfigFromFlags();
  ASSERT_TRUE(data.ok()) << data.status();
  data->batch_size = kBatch;
  std::vector<const VarDesc*> vars;
  for (const auto& f : p.vars.feeds) vars.push_back(p.main.desc().Block(0).FindVar(f.name()));
  cli::ShardSources chunks(*data, vars);
  std::map<std::pair<int, int>, std::vector<FeedBatch>> batches;  // (epoch, chunk) -> its batches
  auto batch_of = [&](const Part& part) -> const FeedBatch& {
    auto& b = batches[{part.epoch, part.chunk}];
    if (b.empty()) {
      auto src = chunks.Make(part.chunk, kChunks);
      EXPECT_TRUE(src.ok()) << src.status();
      EXPECT_TRUE((*src)->StartEpoch(part.epoch - 1).ok());
      for (FeedBatch fed; (*src)->Next(&fed).value_or(false);) b.push_back(fed);
      EXPECT_EQ(static_cast<int>(b.size()), batches_per_chunk);
    }
    return b.at(static_cast<size_t>(part.batch));
  };
  // The pservers' arithmetic, op for op: each contributor's gradients
  // (the main program up to its optimizer ops), scaled by slots/contributors
  // into its slot (empty slots zero), then the transpiled pserver's
  // sum(slots) -> scale(1/slots) -> the optimizer op.
  ProgramDesc backward = p.main.desc();
  ProgramDesc apply = p.main.desc();
  {
    const BlockDesc& main = p.main.desc().Block(0);
    size_t first_opt = main.OpSize();
    for (size_t i = 0; i < main.OpSize(); ++i) {
      if (main.Op(i).role() & static_cast<int32_t>(OpRole::kOptimize)) {
        first_opt = i;
        break;
      }
    }
    backward.MutableBlock(0)->RemoveOps(first_opt, main.OpSize());
    BlockDesc* b = apply.MutableBlock(0);
    b->RemoveOps(0, main.OpSize());
    for (size_t i = first_opt; i < main.OpSize(); ++i) {
      const OpDesc& opt = main.Op(i);
      if (opt.type != "sgd") continue;
      const std::string g = opt.Input("Grad")[0];
      std::vector<std::string> slots;
      for (int t = 0; t < kTrainers; ++t) {
        slots.push_back(absl::StrCat(g, ".trainer_", t));
        *b->Var(slots.back()) = *main.FindVar(g);
        b->Var(slots.back())->name = slots.back();
        b->Var(slots.back())->persistable = true;  // set in the scope, as the pserver receives them
      }
      OpDesc* sum = b->AppendOp();
      sum->type = "sum";
      sum->SetInput("X", slots);
      sum->SetOutput("Out", {g});
      OpDesc* scale = b->AppendOp();
      scale->type = "scale";
      scale->SetInput("X", {g});
      scale->SetOutput("Out", {g});
      scale->SetAttr("scale", 1.0f / static_cast<float>(kTrainers));
      scale->SetAttr("bias", 0.0f);
      scale->SetAttr("bias_after_scale", true);
      *b->AppendOp() = opt;
    }
  }
  std::vector<std::string> grads;
  for (size_t i = 0; i < apply.Block(0).OpSize(); ++i) {
    if (apply.Block(0).Op(i).type == "sgd") grads.push_back(apply.Block(0).Op(i).Input("Grad")[0]);
  }
  ASSERT_FALSE(grads.empty());
  Executor exe(CPUPlace());
  Scope scope;
  ASSERT_TRUE(exe.Run(p.startup.desc(), &scope).ok());
  const std::string loss = p.vars.loss.name();
  int compared = 0;
  for (const auto& [s, parts] : steps) {
    std::map<int, std::vector<Tensor>> by_trainer;  // each contributor's gradients, in `grads` order
    for (const Part& part : parts) {
      const FeedBatch& fed = batch_of(part);
      if (part.has_loss) {  // the trainer's loss on its batch, before the step's update
        auto out = exe.Run(p.test.desc(), &scope, fed.feeds, {loss});
        ASSERT_TRUE(out.ok()) << out.status();
        EXPECT_NEAR((*out)[0].data<float>()[0], part.loss, 2e-5)
            << "step " << s << ", " << part.process << "'s batch " << part.batch << " of chunk " << part.chunk
            << " of epoch " << part.epoch;
        ++compared;
      }
      auto g = exe.Run(backward, &scope, fed.feeds, grads);
      ASSERT_TRUE(g.ok()) << g.status();
      for (Tensor& t : *g) {
        Tensor own;
        own.CopyFrom(t);
        by_trainer[part.trainer].push_back(std::move(own));
      }
    }
    const double k = static_cast<double>(kTrainers) / static_cast<double>(by_trainer.size());
    for (size_t i = 0; i < grads.size(); ++i) {
      for (int t = 0; t < kTrainers; ++t) {
        Tensor* slot = scope.Var(absl::StrCat(grads[i], ".trainer_", t))->GetMutable<Tensor>();
        auto mine = by_trainer.find(t);
        const Tensor& like = by_trainer.begin()->second[i];
        float* dst = slot->mutable_data<float>(like.dims());
        for (int64_t j = 0; j < like.numel(); ++j) {
          dst[j] = mine == by_trainer.end() ? 0.0f
                   : k == 1                 ? mine->second[i].data<float>()[j]
                                            : static_cast<float>(mine->second[i].data<float>()[j] * k);
        }
      }
    }
    const auto applied = exe.Run(apply, &scope);
    ASSERT_TRUE(applied.ok()) << applied.status();
  }
  EXPECT_GT(compared, 100);
  auto test = LoadFashionMnist(FLAGS_data_dir, "t10k");
  ASSERT_TRUE(test.ok()) << test.status();
  auto eval = cli::Evaluate(exe, p, &scope, *test, 500);
  ASSERT_TRUE(eval.ok()) << eval.status();
  EXPECT_NEAR(ValueAfter(job.out, "test_loss="), eval->loss, 2e-4) << job.out;
  EXPECT_NEAR(ValueAfter(job.out, "test_accuracy="), eval->accuracy, 2e-3) << job.out;
}

}  // namespace
}  // namespace oar
