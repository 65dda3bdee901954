// The parts of GPU support that need no GPU: Place names, GPU selection,
// where an op's kernel runs on a GPU place (host-side ops on the CPU, others
// refused by name), the inputs a GPU executor leaves where they lie, and
// the one-line errors on a host without a GPU.
#include "common/device/gpu_info.h"
#include "common/device/place.h"
#include "common/framework/executor.h"
#include "common/framework/op_registry.h"
#include "common/framework/place_transfer.h"
#include "gtest/gtest.h"

namespace oar {
namespace {

TEST(PlaceTest, FluidNamesAndEquality) {
  EXPECT_EQ(CPUPlace().ToString(), "CPUPlace");
  EXPECT_EQ(CUDAPlace(3).ToString(), "CUDAPlace(3)");
  EXPECT_EQ(CUDAPinnedPlace().ToString(), "CUDAPinnedPlace");
  EXPECT_FALSE(CUDAPlace(0) == CUDAPlace(1));
  EXPECT_TRUE(CUDAPinnedPlace() == CUDAPinnedPlace());
  EXPECT_TRUE(CUDAPinnedPlace().is_host());
  EXPECT_FALSE(CUDAPlace(0).is_host());
  EXPECT_FALSE(CPUPlace() == CUDAPinnedPlace());
}

TEST(SelectedGpusTest, DefaultsToEveryVisibleGpu) {
  auto ids = ParseSelectedGpus("", 3);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(*ids, (std::vector<int>{0, 1, 2}));
}

TEST(SelectedGpusTest, KeepsTheListedOrder) {
  auto ids = ParseSelectedGpus(" 2,0 ", 3);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(*ids, (std::vector<int>{2, 0}));
}

TEST(SelectedGpusTest, RefusesBadLists) {
  for (const char* spec : {"0,0", "3", "x", "-1", "1,,2"}) {
    auto ids = ParseSelectedGpus(spec, 3);
    ASSERT_FALSE(ids.ok()) << spec;
    EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument) << spec;
    EXPECT_NE(ids.status().message().find(spec), std::string::npos) << ids.status();
  }
  EXPECT_NE(ParseSelectedGpus("3", 3).status().message().find("not visible"), std::string::npos);
  EXPECT_NE(ParseSelectedGpus("0,0", 3).status().message().find("twice"), std::string::npos);
}

TEST(SelectedGpusTest, NoGpuIsAFailedPrecondition) {
  auto ids = ParseSelectedGpus("0", 0);
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(ids.status().message().find("no GPU is visible"), std::string::npos) << ids.status();
}

TEST(ChooseKernelTest, HostSideOpsRunTheirCpuKernelOnAGpuPlace) {
  const OpInfo* feed = OpRegistry::Global().Find("feed");
  ASSERT_NE(feed, nullptr);
  auto k = feed->ChooseKernel(CUDAPlace(0), DataType::kFloat32);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_TRUE(k->second == CPUPlace());
}

// Paddle's fallback: an op without a GPU kernel for the dtype runs its CPU
// kernel on the host; without one there either it is refused by name.
TEST(ChooseKernelTest, AnOpWithoutAGpuKernelRunsItsCpuKernelOnTheHost) {
  OpRegistry r;
  r.Register("only_cpu").Input("X").Output("Out").Kernel<float>([](const ExecutionContext&) {
    return absl::OkStatus();
  });
  auto k = r.Find("only_cpu")->ChooseKernel(CUDAPlace(1), DataType::kFloat32);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_TRUE(k->second == CPUPlace());
  auto none = r.Find("only_cpu")->ChooseKernel(CUDAPlace(1), DataType::kInt64);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  const std::string msg(none.status().message());
  EXPECT_NE(msg.find("only_cpu: no GPU kernel for int64"), std::string::npos) << msg;
  EXPECT_NE(msg.find("CUDAPlace(1)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("CPU kernels: float32"), std::string::npos) << msg;
  auto cpu = r.Find("only_cpu")->ChooseKernel(CPUPlace(), DataType::kFloat32);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_TRUE(cpu->second == CPUPlace());
}

// A GPU kernel hands a call to the CPU kernel by this status alone: an
// ordinary Unimplemented error stays an error.
TEST(ChooseKernelTest, OnlyRunOnHostInsteadHandsACallToTheCpuKernel) {
  OpDesc op;
  op.type = "elementwise_add";
  const absl::Status s = RunOnHostInstead(op, "numpy's broadcast of X[8, 4] and Y[1, 4]");
  EXPECT_TRUE(IsRunOnHostInstead(s));
  EXPECT_NE(s.message().find("elementwise_add: no GPU kernel for this call (numpy's"), std::string::npos) << s;
  EXPECT_FALSE(IsRunOnHostInstead(absl::UnimplementedError("elementwise_add: no GPU kernel for this call")));
  EXPECT_FALSE(IsRunOnHostInstead(absl::OkStatus()));
}

TEST(GpuExecutorTest, WithoutAGpuRunIsAOneLineError) {
  if (GpuCount() > 0) GTEST_SKIP() << "this host has a GPU (the gpu tests cover it)";
  ProgramDesc program;
  Scope scope;
  Executor exe(CUDAPlace(0));
  auto out = exe.Run(program, &scope);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(out.status().message().find("no GPU is visible"), std::string::npos) << out.status();
  EXPECT_EQ(std::string(out.status().message()).find('\n'), std::string::npos);
}

TEST(GpuTensorTest, CopyToAGpuWithoutOneIsAnError) {
  if (GpuCount() > 0) GTEST_SKIP() << "this host has a GPU (the gpu tests cover it)";
  Tensor src = MakeTensor<float>({2}, {1, 2});
  Tensor dst;
  absl::Status s = src.CopyTo(CUDAPlace(0), &dst);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  Tensor host;
  ASSERT_TRUE(src.CopyTo(CPUPlace(), &host).ok());
  EXPECT_EQ(TensorToVector<float>(host), (std::vector<float>{1, 2}));
}

// Ids of lookup_table (checked on the host by its GPU kernel), the W of its
// grad (its shape alone is read), and the
// condition of conditional_block are kReadAnywhere: a GPU executor leaves
// them where they lie instead of copying them over and back.
TEST(MoveInputsTest, AReadAnywhereSlotStaysWhereItLies) {
  for (const std::string type : {"lookup_table", "lookup_table_v2", "lookup_table_grad", "lookup_table_v2_grad"}) {
    const OpInfo* info = OpRegistry::Global().Find(type);
    ASSERT_NE(info, nullptr) << type;
    const bool grad = type.find("_grad") != std::string::npos;
    for (const SlotSpec& spec : info->inputs()) {  // the grads read W's shape alone
      EXPECT_EQ(spec.read_anywhere, spec.name == "Ids" || (grad && spec.name == "W")) << type << " " << spec.name;
    }
  }
  const OpInfo* cond = OpRegistry::Global().Find("conditional_block");
  ASSERT_NE(cond, nullptr);
  for (const SlotSpec& spec : cond->inputs()) EXPECT_TRUE(spec.read_anywhere) << "conditional_block " << spec.name;
  for (const SlotSpec& spec : OpRegistry::Global().Find("sequence_pool_grad")->inputs()) {
    EXPECT_EQ(spec.read_anywhere, spec.name == "X") << "sequence_pool_grad " << spec.name;  // its shape and LoD alone
  }
  Scope scope;
  *scope.Var("ids")->GetMutable<Tensor>() = MakeTensor<int64_t>({2, 1}, {1, 0});
  *scope.Var("w")->GetMutable<Tensor>() = MakeTensor<float>({2, 2}, {1, 2, 3, 4});
  OpDesc op;
  op.type = "lookup_table";
  op.SetInput("Ids", {"ids"});
  op.SetInput("W", {"w"});
  const std::string ids_slot = "Ids", w_slot = "W";
  OpBinding binding;
  binding.inputs.push_back(BoundSlot{&ids_slot, {scope.FindVar("ids")}, /*read_anywhere=*/true});
  binding.inputs.push_back(BoundSlot{&w_slot, {scope.FindVar("w")}, /*read_anywhere=*/false});
  const absl::Status s = MoveInputsTo(op, binding, CUDAPlace(0));
  EXPECT_TRUE(scope.FindVar("ids")->Get<Tensor>().place() == CPUPlace());
  if (GpuCount() == 0) {  // W cannot move: the error names it, not the ids before it
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_NE(s.message().find("'w'"), std::string::npos) << s;
  } else {
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_TRUE(scope.FindVar("w")->Get<Tensor>().place() == CUDAPlace(0));
  }
}

}  // namespace
}  // namespace oar
