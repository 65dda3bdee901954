// A training that diverges, run as a user would: the step whose loss is
// NaN ends the run saying where and what to try; --check_nan_inf names the
// first op that wrote a non-finite value instead; in a distributed job the
// trainer that diverged stops every process, which all name it.
#include <string>

#include "gtest/gtest.h"
#include "tests/util/oar_process.h"

namespace oar {
namespace {

// SGD with a learning rate of 1e30: the first update overflows the weights.
const std::string kDiverging = "--model fashion_mlp --optimizer sgd --lr 1e30 --limit 2000 --epochs 1 --seed 3";

TEST(DivergedTrainingTest, ANaNLossEndsTheRunAtItsStep) {
  Result r = Oar("train " + kDiverging);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("oar: error: the loss is NaN at step 2 (epoch 1): the training diverged. Try a lower --lr; "
                       "--check_nan_inf"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("test_accuracy="), std::string::npos) << "no result from a diverged model:\n" << r.out;
}

TEST(DivergedTrainingTest, CheckNanInfNamesTheFirstOpThatWroteOne) {
  for (const std::string how : {"flag", "environment"}) {
    Result r = how == "flag" ? Oar("train --check_nan_inf " + kDiverging)
                             : RunCommand("FLAGS_check_nan_inf=1 " + OarBinary() + " train " + kDiverging);
    EXPECT_EQ(r.code, 1) << how << ":\n" << r.out;
    EXPECT_NE(r.out.find("FLAGS_check_nan_inf: op 'mul' wrote Inf to 'fc_1.tmp_0' (Out)"), std::string::npos)
        << how << ":\n"
        << r.out;
  }
}

TEST(DivergedTrainingTest, ADivergedTrainerStopsItsDistributedJob) {
  Result r = Oar("launch --pservers 1 --trainers 2 --rpc_deadline 60000 " + kDiverging);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("the loss is NaN at step"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("failed, so the job stops: trainer "), std::string::npos) << r.out;
}

}  // namespace
}  // namespace oar
