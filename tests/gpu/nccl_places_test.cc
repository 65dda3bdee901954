// NcclPlaces, the NCCL clique of a process's GPUs that the ParallelExecutor
// sums gradients through, over every GPU of the host (one GPU makes a clique
// of one: the calls still go through NCCL and the GPU's stream). Needs a
// GPU: each test skips itself, with the reason, on a host without one.
// Labelled `gpu`.
#include "trainer/collective/nccl_places.h"

#include <vector>

#include "common/device/device_memory.h"
#include "common/device/gpu_info.h"
#include "gtest/gtest.h"
#include "tests/common/ops/op_test_util.h"
#include "tests/gpu/require_gpu.h"

namespace oar {
namespace {

std::vector<int> Devices() {
  std::vector<int> d;
  for (int i = 0; i < GpuCount(); ++i) d.push_back(i);
  return d;
}

// Place i holds (i + 1) * base, on GPU i.
std::vector<Tensor> OnEveryGpu(const std::vector<float>& base) {
  std::vector<Tensor> out(static_cast<size_t>(GpuCount()));
  for (size_t i = 0; i < out.size(); ++i) {
    std::vector<float> v;
    for (float b : base) v.push_back(b * static_cast<float>(i + 1));
    EXPECT_TRUE(
        MakeTensor<float>({static_cast<int64_t>(v.size())}, v).CopyTo(CUDAPlace(static_cast<int>(i)), &out[i]).ok());
  }
  return out;
}

std::vector<float> OnHost(const Tensor& t) {
  EXPECT_TRUE(SyncPlace(t.place()).ok());
  Tensor host;
  EXPECT_TRUE(t.CopyTo(CPUPlace(), &host).ok());
  return TensorToVector<float>(host);
}

std::vector<Tensor*> Pointers(std::vector<Tensor>& ts) {
  std::vector<Tensor*> p;
  for (Tensor& t : ts) p.push_back(&t);
  return p;
}

TEST(NcclPlacesTest, SumsReducesAndBroadcastsAcrossEveryGpu) {
  REQUIRE_GPU();
  auto clique = NcclPlaces::Create(Devices());
  ASSERT_TRUE(clique.ok()) << clique.status();
  const int n = GpuCount();
  const float total = n * (n + 1) / 2.0f;  // 1 + 2 + ... + n
  const std::vector<float> base = {1, -2, 0.5f, 3};

  std::vector<Tensor> all = OnEveryGpu(base);
  const void* where = all[0].raw_data();
  ASSERT_TRUE((*clique)->AllReduce(Pointers(all), "g").ok());
  EXPECT_EQ(all[0].raw_data(), where);  // in place
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(OnHost(all[i]), (std::vector<float>{total, -2 * total, 0.5f * total, 3 * total})) << "GPU " << i;
  }

  std::vector<Tensor> reduced = OnEveryGpu(base);
  const size_t root = static_cast<size_t>(n - 1);
  ASSERT_TRUE((*clique)->Reduce(Pointers(reduced), root, "g").ok());
  EXPECT_EQ(OnHost(reduced[root]), (std::vector<float>{total, -2 * total, 0.5f * total, 3 * total}));

  std::vector<Tensor> bcast = OnEveryGpu(base);
  ASSERT_TRUE((*clique)->Broadcast(Pointers(bcast), root, "w").ok());
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(OnHost(bcast[i]), OnHost(OnEveryGpu(base)[root])) << "GPU " << i;
  }
}

TEST(NcclPlacesTest, TensorsElsewhereOrOfAnotherSizeAreNamedErrors) {
  REQUIRE_GPU();
  auto clique = NcclPlaces::Create(Devices());
  ASSERT_TRUE(clique.ok()) << clique.status();
  std::vector<Tensor> ts = OnEveryGpu({1, 2});
  ts[0] = MakeTensor<float>({2}, {1, 2});  // on the host
  absl::Status s = (*clique)->AllReduce(Pointers(ts), "fc_0.w_0@GRAD");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'fc_0.w_0@GRAD': place 0's tensor is on CPUPlace"), std::string::npos) << s;
  std::vector<Tensor> one = OnEveryGpu({1});
  one.pop_back();
  EXPECT_EQ((*clique)->Broadcast(Pointers(one), 0, "w").code(), absl::StatusCode::kInvalidArgument);
  std::vector<Tensor> ints(static_cast<size_t>(GpuCount()));
  for (int i = 0; i < GpuCount(); ++i) ASSERT_TRUE(MakeTensor<bool>({1}, {true}).CopyTo(CUDAPlace(i), &ints[i]).ok());
  s = (*clique)->AllReduce(Pointers(ints), "mask");
  EXPECT_NE(s.message().find("cannot sum bool"), std::string::npos) << s;
}

}  // namespace
}  // namespace oar
