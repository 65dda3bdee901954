// GlobalShuffle (InMemoryDataset.global_shuffle across a job's trainers):
// three trainers, each a thread here exchanging through a shared all-gather,
// end with disjoint sets of records whose union is every record, each a
// fair share; with one trainer it changes nothing.
#include "common/data/global_shuffle.h"

#include <algorithm>
#include <barrier>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace oar {
namespace {

// An all-gather among `n` threads: each deposits its tensor, all wait, each
// copies every deposit, all wait again before the next round.
class ThreadGather {
 public:
  explicit ThreadGather(int n) : slots_(static_cast<size_t>(n)), sync_(n) {}
  absl::Status Gather(int rank, const Tensor& in, std::vector<Tensor>* out) {
    slots_[static_cast<size_t>(rank)] = in;
    sync_.arrive_and_wait();
    out->clear();
    for (const Tensor& t : slots_) {
      Tensor copy;
      copy.CopyFrom(t);
      out->push_back(std::move(copy));
    }
    sync_.arrive_and_wait();
    return absl::OkStatus();
  }

 private:
  std::vector<Tensor> slots_;
  std::barrier<> sync_;
};

TEST(GlobalShuffleTest, TrainersEndWithDisjointSharesOfEveryRecord) {
  constexpr int kTrainers = 3;
  // Uneven inputs: trainer t starts with 100 * (t + 1) records.
  std::vector<std::vector<std::string>> in(kTrainers), out(kTrainers);
  int total = 0;
  for (int t = 0; t < kTrainers; ++t) {
    for (int i = 0; i < 100 * (t + 1); ++i) in[static_cast<size_t>(t)].push_back(absl::StrCat("1 ", t, " ", i));
    total += 100 * (t + 1);
  }
  ThreadGather gather(kTrainers);
  std::vector<std::thread> threads;
  std::vector<absl::Status> status(kTrainers);
  for (int t = 0; t < kTrainers; ++t) {
    threads.emplace_back([&, t] {
      ShuffleGroup g{.rank = t, .size = kTrainers, .all_gather = [&, t](const Tensor& i, std::vector<Tensor>* o) {
                       return gather.Gather(t, i, o);
                     }};
      auto r = GlobalShuffle(in[static_cast<size_t>(t)], /*seed=*/7, g);
      status[static_cast<size_t>(t)] = r.status();
      if (r.ok()) out[static_cast<size_t>(t)] = std::move(*r);
    });
  }
  for (auto& th : threads) th.join();
  std::multiset<std::string> seen;
  for (int t = 0; t < kTrainers; ++t) {
    ASSERT_TRUE(status[static_cast<size_t>(t)].ok()) << status[static_cast<size_t>(t)];
    seen.insert(out[static_cast<size_t>(t)].begin(), out[static_cast<size_t>(t)].end());
    // About a third each (600 records: 200 expected, far from 100 or 300).
    EXPECT_GT(out[static_cast<size_t>(t)].size(), 150u) << t;
    EXPECT_LT(out[static_cast<size_t>(t)].size(), 250u) << t;
  }
  ASSERT_EQ(static_cast<int>(seen.size()), total);  // nothing lost, nothing twice:
  std::set<std::string> unique(seen.begin(), seen.end());
  EXPECT_EQ(unique.size(), seen.size());
  // Records moved: trainer 0 now holds some of trainer 2's.
  EXPECT_TRUE(std::any_of(out[0].begin(), out[0].end(), [](const std::string& r) { return r.rfind("1 2 ", 0) == 0; }));
}

TEST(GlobalShuffleTest, OneTrainerKeepsItsRecords) {
  auto r = GlobalShuffle({"a", "b"}, 1, ShuffleGroup{});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (std::vector<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace oar
