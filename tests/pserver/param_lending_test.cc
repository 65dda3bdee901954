// ParamLending alone: Lend moves the parameters into one shared region (the
// values unchanged, what is absent or empty left out); nothing moves back
// until a trainer's COMPLETE makes it due, and then every lent parameter
// gets memory of its own again, under the lock of the block that writes it.
#include "pserver/param_lending.h"

#include <map>

#include "common/framework/tensor.h"
#include "gtest/gtest.h"

namespace oar {
namespace {

struct Lending {
  Scope scope;
  absl::Mutex w_lock, b_lock;
  std::map<std::string, int> locked;  // how often each parameter's block lock was asked for
  ParamLending lending{&scope,
                       [this](const std::string& p) -> absl::Mutex* {
                         ++locked[p];
                         return p == "w" ? &w_lock : p == "b" ? &b_lock : nullptr;
                       },
                       [] { return std::string("pserver test"); }};
  Lending() {
    *scope.Var("w")->GetMutable<Tensor>() = MakeTensor<float>({2, 3}, {1, 2, 3, 4, 5, 6});
    *scope.Var("b")->GetMutable<Tensor>() = MakeTensor<float>({3}, {-1, 0, 1});
    scope.Var("unset")->GetMutable<Tensor>();
  }
  const Tensor& T(const std::string& name) { return scope.FindVar(name)->Get<Tensor>(); }
};

TEST(ParamLendingTest, LendMovesTheParametersIntoOneRegionWithTheirValues) {
  Lending l;
  auto region = l.lending.Lend({"w", "b", "unset", "absent"});
  ASSERT_NE(region, nullptr);
  EXPECT_EQ(l.lending.lent(), (std::vector<std::string>{"b", "w"}));
  EXPECT_TRUE(l.T("w").OverForeignMemory());
  EXPECT_TRUE(l.T("b").OverForeignMemory());
  EXPECT_EQ(TensorToVector<float>(l.T("w")), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(TensorToVector<float>(l.T("b")), (std::vector<float>{-1, 0, 1}));
  EXPECT_EQ(ParamLending(&l.scope, nullptr, [] { return std::string(); }).Lend({"unset"}), nullptr);
}

TEST(ParamLendingTest, TheParametersMoveBackOnlyOnceDueAndUnderTheirBlocksLocks) {
  Lending l;
  auto region = l.lending.Lend({"w", "b"});
  ASSERT_NE(region, nullptr);
  l.lending.UnlendIfDue();  // no trainer completed: the loan stands
  EXPECT_TRUE(l.T("w").OverForeignMemory());
  EXPECT_TRUE(l.locked.empty());
  l.lending.MarkDue();
  l.lending.UnlendIfDue();
  EXPECT_FALSE(l.T("w").OverForeignMemory());
  EXPECT_FALSE(l.T("b").OverForeignMemory());
  EXPECT_EQ(TensorToVector<float>(l.T("w")), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(TensorToVector<float>(l.T("b")), (std::vector<float>{-1, 0, 1}));
  EXPECT_EQ(l.locked, (std::map<std::string, int>{{"b", 1}, {"w", 1}}));
  EXPECT_TRUE(l.lending.lent().empty());
  l.lending.MarkDue();
  l.lending.UnlendIfDue();  // nothing left to move
  EXPECT_EQ(l.locked, (std::map<std::string, int>{{"b", 1}, {"w", 1}}));
}

}  // namespace
}  // namespace oar
