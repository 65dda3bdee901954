// The NCCL backend of Collective. Needs a GPU: each test skips itself, with
// the reason, on a host without one (CI's). Labelled `gpu` in ctest.
#include "trainer/collective/nccl_collective.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <thread>

#include "gtest/gtest.h"

namespace oar {
namespace {

int Gpus() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

TEST(NcclCollectiveTest, OneRankAllReduceBroadcastAllGatherBarrier) {
  if (!NcclAvailable()) GTEST_SKIP() << "no GPU on this host";
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  auto c = CreateNcclCollective({.unique_id = reinterpret_cast<const uint8_t*>(&id), .rank = 0, .size = 1});
  ASSERT_TRUE(c.ok()) << c.status();
  Tensor t = MakeTensor<float>({3}, {1, 2, 3});
  ASSERT_TRUE((*c)->AllReduce(&t, "g").ok());
  EXPECT_EQ(TensorToVector<float>(t), (std::vector<float>{1, 2, 3}));
  ASSERT_TRUE((*c)->Broadcast(&t, 0, "w").ok());
  std::vector<Tensor> all;
  ASSERT_TRUE((*c)->AllGather(MakeTensor<int64_t>({2, 1}, {7, 9}), &all, "rows").ok());
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(TensorToVector<int64_t>(all[0]), (std::vector<int64_t>{7, 9}));
  EXPECT_TRUE((*c)->Barrier().ok());
}

// Tensors on the communicator's GPU are reduced where they are.
TEST(NcclCollectiveTest, OneRankOnDeviceTensorsInPlace) {
  if (!NcclAvailable()) GTEST_SKIP() << "no GPU on this host";
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  auto c = CreateNcclCollective({.unique_id = reinterpret_cast<const uint8_t*>(&id), .rank = 0, .size = 1});
  ASSERT_TRUE(c.ok()) << c.status();
  Tensor dev;
  ASSERT_TRUE(MakeTensor<float>({3}, {1, 2, 3}).CopyTo(CUDAPlace(0), &dev).ok());
  const void* where = dev.raw_data();
  ASSERT_TRUE((*c)->AllReduce(&dev, "g").ok());
  ASSERT_TRUE((*c)->Broadcast(&dev, 0, "w").ok());
  EXPECT_EQ(dev.raw_data(), where);
  EXPECT_TRUE(dev.place() == CUDAPlace(0));
  Tensor back;
  ASSERT_TRUE(dev.CopyTo(CPUPlace(), &back).ok());
  EXPECT_EQ(TensorToVector<float>(back), (std::vector<float>{1, 2, 3}));
  std::vector<Tensor> all;
  ASSERT_TRUE((*c)->AllGather(dev, &all, "rows").ok());
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(TensorToVector<float>(all[0]), (std::vector<float>{1, 2, 3}));
}

TEST(NcclCollectiveTest, TwoRanksOnTwoGpusSum) {
  if (Gpus() < 2) GTEST_SKIP() << "needs 2 GPUs, this host has " << Gpus();
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<absl::Status> status(2);
  std::vector<std::vector<float>> got(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto c =
          CreateNcclCollective({.unique_id = reinterpret_cast<const uint8_t*>(&id), .rank = r, .size = 2, .device = r});
      if (!c.ok()) {
        status[r] = c.status();
        return;
      }
      Tensor t = MakeTensor<float>({4}, {1.0f * (r + 1), 2, 3, 4});
      status[r] = (*c)->AllReduce(&t, "g");
      got[r] = TensorToVector<float>(t);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(status[r].ok()) << status[r];
    EXPECT_EQ(got[r], (std::vector<float>{3, 4, 6, 8}));
  }
}

TEST(NcclCollectiveTest, WithoutAGpuCreatingOneSaysWhy) {
  if (NcclAvailable()) GTEST_SKIP() << "this host has a GPU";
  uint8_t id[128] = {};
  auto c = CreateNcclCollective({.unique_id = id, .rank = 0, .size = 1});
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(c.status().message().find("needs a GPU"), std::string::npos) << c.status();
}

}  // namespace
}  // namespace oar
