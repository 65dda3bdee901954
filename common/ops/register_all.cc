// The full built-in op set, and OpRegistry::Global() that installs it: the
// registry is the framework's (common/framework/op_registry.h), the set of ops
// this target's, so Global() is defined here and the framework names no op.
#include "common/config.h"
#include "common/framework/op_registry.h"
#include "common/ops/ops.h"

#include <set>

#include "absl/synchronization/mutex.h"

namespace oar {

void RegisterAllOps(OpRegistry* r) {
  RegisterMathOps(r);
  RegisterElementwiseOps(r);
  RegisterActivationOps(r);
  RegisterSoftmaxOps(r);
  RegisterLossOps(r);
  RegisterCrossEntropy2Ops(r);
  RegisterMetricOps(r);
  RegisterAucOp(r);
  RegisterTensorOps(r);
  RegisterSumOp(r);
  RegisterOptimizerOps(r);
  RegisterShapeOps(r);
  RegisterConcatSplitOps(r);
  RegisterConvOps(r);
  RegisterPoolOps(r);
  RegisterBatchNormOps(r);
  RegisterDropoutOps(r);
  RegisterEmbeddingOps(r);
  RegisterDistributedTableOps(r);
  RegisterReduceClipOps(r);
  RegisterControlOps(r);
  RegisterIoOps(r);
  RegisterSequenceOps(r);
  RegisterFusedOps(r);
  RegisterActivationAttrOps(r);
  RegisterActivationMoreOps(r);
  RegisterSortOps(r);
  RegisterConv3dOps(r);
  RegisterImageSampleOps(r);
  RegisterPatchOps(r);
  RegisterAssignValueOp(r);
  RegisterLrnOp(r);
  RegisterRandomMoreOps(r);
  RegisterLstmOp(r);
  RegisterGruOps(r);
  RegisterSequenceShapeOps(r);
  RegisterSequenceWindowOps(r);
  RegisterMiscValueOps(r);
  RegisterSelectOps(r);
  RegisterLinalgOps(r);
  RegisterMatrixFuncOps(r);
  RegisterNormMoreOps(r);
  RegisterChannelOps(r);
  RegisterHsigmoidOp(r);
  RegisterScatterOps(r);
  RegisterStridedSliceOp(r);
  RegisterUniqueOps(r);
  RegisterConvTransposeOps(r);
  RegisterInterpOps(r);
  RegisterPadOps(r);
  RegisterPoolNdOps(r);
  RegisterLossMoreOps(r);
  RegisterMatrixShapeOps(r);
  RegisterPredicateOps(r);
  RegisterLayerNormOps(r);
  RegisterSigmoidCrossEntropyOps(r);
  RegisterSliceOps(r);
  RegisterSquaredL2NormOps(r);
  RegisterRnnOps(r);
  RegisterCoalesceTensorOp(r);
  RegisterLambOp(r);
  RegisterGatherStackOps(r);
  RegisterScanEncodeOps(r);
  RegisterTensorArrayOps(r);
  RegisterWhileOps(r);
  RegisterConditionalBlockOps(r);
  RegisterSequenceDecodeOps(r);
  RegisterTeacherStudentLossOp(r);
  RegisterBoxOps(r);
  RegisterWarpCtcOps(r);
  RegisterHashOp(r);
  RegisterNceOp(r);
#if OAR_HAVE_CUDA
  RegisterCudaKernels(r);
#endif
}

void OpRegistry::ExtendGlobal(void (*registrar)(OpRegistry*)) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* applied = new std::set<void (*)(OpRegistry*)>();
  absl::MutexLock l(&mu);
  if (!applied->insert(registrar).second) return;
  registrar(const_cast<OpRegistry*>(&Global()));
}

const OpRegistry& OpRegistry::Global() {
  static const OpRegistry* global = [] {
    auto* r = new OpRegistry();
    RegisterAllOps(r);
    return r;
  }();
  return *global;
}

}  // namespace oar
