// Every op the bundled Fashion-MNIST models run, forward, backward, every
// optimizer and the startup program, has a GPU kernel or runs on the host
// by design (feed/fetch, send/recv...), so `oar train --device gpu` never
// stops at a missing kernel. This reads the op registry, so it runs on
// every CUDA build, GPU or not (CI's included); without CUDA it skips.
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "cli/model_build.h"
#include "common/device/gpu_info.h"
#include "common/op_registry.h"
#include "gtest/gtest.h"

namespace oar {
namespace {

bool HasGpuKernel(const OpInfo& info) {
  for (DataType d : {DataType::kFloat32, DataType::kFloat64, DataType::kInt32, DataType::kInt64, DataType::kBool}) {
    if (info.FindKernel(Place::Kind::kCUDA, d).ok()) return true;
  }
  return false;
}

TEST(GpuCoverageTest, EveryOpOfTheFashionModelsHasAGpuKernelOrRunsOnTheHost) {
  if (!BuiltWithCuda()) GTEST_SKIP() << "this oar was built without CUDA";
  for (const std::string model : {"fashion_mlp", "fashion_cnn"}) {
    for (const std::string optimizer : {"sgd", "momentum", "adam"}) {
      SCOPED_TRACE(model + " with " + optimizer);
      cli::BuildOptions o;
      o.model = model;
      o.optimizer = optimizer;
      auto built = cli::BuildModel(o);
      ASSERT_TRUE(built.ok()) << built.status();
      std::vector<std::string> missing;
      for (const Program* p : {&(*built)->main, &(*built)->startup, &(*built)->test}) {
        const BlockDesc& block = p->desc().Block(0);
        for (size_t i = 0; i < block.OpSize(); ++i) {
          const OpDesc& op = block.Op(i);
          const OpInfo* info = OpRegistry::Global().Find(op.type);
          ASSERT_NE(info, nullptr) << op.type;
          if (!info->host_side() && !HasGpuKernel(*info)) missing.push_back(op.type);
        }
      }
      EXPECT_TRUE(missing.empty()) << "no GPU kernel: " << absl::StrJoin(missing, ", ");
    }
  }
}

}  // namespace
}  // namespace oar
