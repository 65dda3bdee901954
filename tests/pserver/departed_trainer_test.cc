// Defect 1, by parameter values: in a sync job, a trainer that completes
// stops contributing. Trainer 1 trains 3 steps and completes; trainer 0
// trains 10. Fluid's rule (and ours): the departed trainer's share is zero
// while the merge still scales by 1/trainers, so from step 3 on each update
// is lr x g0 / 2. The reference is one process applying exactly those
// merged gradients: the global batch at lr for steps 0-2, then trainer 0's
// half at lr / 2. Before the fix, trainer 1's last gradient was added again
// at every later step and the parameters went elsewhere.
#include "gtest/gtest.h"
#include "tests/util/inproc_job.h"

namespace oar {
namespace {

std::map<std::string, std::vector<float>> Reference(const std::map<std::string, std::vector<float>>& initial,
                                                    int together, int total) {
  JobModel m("sgd");
  Executor exe;
  Scope scope;
  EXPECT_TRUE(exe.Run(m.startup.desc(), &scope).ok());
  for (const auto& [name, values] : initial) {
    Tensor* t = scope.FindVar(name)->GetMutable<Tensor>();
    std::copy(values.begin(), values.end(), t->data<float>());
  }
  std::string lr;
  for (size_t i = 0; i < m.main.desc().Block(0).OpSize(); ++i) {
    if (m.main.desc().Block(0).Op(i).type == "sgd") lr = m.main.desc().Block(0).Op(i).Input("LearningRate")[0];
  }
  for (int step = 0; step < total; ++step) {
    const bool both = step < together;
    scope.FindVar(lr)->GetMutable<Tensor>()->data<float>()[0] = both ? 0.01f : 0.005f;
    auto r = exe.Run(m.main.desc(), &scope, JobBatch(step, 0, both ? 8 : 4), {m.loss.name()});
    EXPECT_TRUE(r.ok()) << r.status();
  }
  std::map<std::string, std::vector<float>> out;
  for (const auto& name : JobParams()) out[name] = TensorToVector<float>(scope.FindVar(name)->Get<Tensor>());
  return out;
}

TEST(DepartedTrainerTest, ACompletedTrainersGradientIsNotAddedAgain) {
  for (const char* wire : {"inprocess", "grpc", "tcp"}) {
    SCOPED_TRACE(wire);
    JobSpec spec;
    spec.steps = {10, 3};
    spec.wire = wire;
    const JobResult r = RunJob(spec);
    ASSERT_TRUE(r.ok()) << r.Errors();
    ASSERT_EQ(r.losses[0].size(), 10u);
    ASSERT_EQ(r.losses[1].size(), 3u);
    const auto want = Reference(r.initial[0], 3, 10);
    for (const auto& p : JobParams()) {
      const auto& got = r.final[0].at(p);
      ASSERT_EQ(got.size(), want.at(p).size());
      for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want.at(p)[i], 1e-5) << p << "[" << i << "]";
    }
    // The comparison is not of a flat line: the parameters moved after step 3.
    const auto frozen = Reference(r.initial[0], 3, 3);
    float moved = 0;
    for (const auto& p : JobParams()) {
      for (size_t i = 0; i < want.at(p).size(); ++i) moved = std::max(moved, std::abs(want.at(p)[i] - frozen.at(p)[i]));
    }
    EXPECT_GT(moved, 1e-3f);
  }
}

}  // namespace
}  // namespace oar
