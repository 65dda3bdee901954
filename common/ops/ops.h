// Entry points of the built-in op libraries. Each adds its ops (forward and
// grad) with CPU kernels to a registry; OpRegistry::Global() calls
// RegisterAllOps once.
//
// Thread-safety: call before the registry is shared.
#pragma once

namespace oar {

class OpRegistry;

void RegisterMathOps(OpRegistry* r);              // mul, matmul
void RegisterElementwiseOps(OpRegistry* r);       // elementwise_add/sub/mul/div
void RegisterActivationOps(OpRegistry* r);        // relu, sigmoid, tanh, square
void RegisterSoftmaxOps(OpRegistry* r);           // softmax, log_softmax, softmax_with_cross_entropy
void RegisterLossOps(OpRegistry* r);              // cross_entropy, mean
void RegisterCrossEntropy2Ops(OpRegistry* r);     // cross_entropy2 (Fluid 1.6+)
void RegisterMetricOps(OpRegistry* r);            // accuracy, top_k
void RegisterAucOp(OpRegistry* r);                // auc (Fluid 1.x streaming ROC AUC)
void RegisterTensorOps(OpRegistry* r);            // fill_constant, random, scale, feed, fetch
void RegisterSumOp(OpRegistry* r);                // sum (dense and sparse inputs)
void RegisterOptimizerOps(OpRegistry* r);         // sgd, momentum, adam (+ the ones below)
void RegisterMoreOptimizerOps(OpRegistry* r);     // adagrad, decayed_adagrad, adamax, rmsprop, ftrl, lars_momentum
void RegisterEmbeddingOps(OpRegistry* r);         // lookup_table, merge_selected_rows
void RegisterDistributedTableOps(OpRegistry* r);  // split_ids, merge_ids, lookup_sparse_table

void RegisterShapeOps(OpRegistry* r);           // reshape2, transpose2, flatten2, squeeze2, unsqueeze2
void RegisterConcatSplitOps(OpRegistry* r);     // concat, split
void RegisterConvOps(OpRegistry* r);            // conv2d
void RegisterPoolOps(OpRegistry* r);            // pool2d
void RegisterBatchNormOps(OpRegistry* r);       // batch_norm
void RegisterDropoutOps(OpRegistry* r);         // dropout
void RegisterReduceClipOps(OpRegistry* r);      // reduce_sum, reduce_mean, clip, clip_by_norm
void RegisterControlOps(OpRegistry* r);         // cast, increment, less_than, logical_*, assign, conditional_block
void RegisterIoOps(OpRegistry* r);              // save, load, save_combine, load_combine
void RegisterSequenceOps(OpRegistry* r);        // sequence_pool
void RegisterFusedOps(OpRegistry* r);           // fused_elemwise_activation (+ grad)
void RegisterActivationMoreOps(OpRegistry* r);  // sin, erf, log2, softshrink, selu, floor, round, ...
void RegisterActivationAttrOps(OpRegistry* r);
void RegisterLossMoreOps(OpRegistry* r);       // kldiv, bce, nll, log, huber, bpr, rank losses
void RegisterPoolNdOps(OpRegistry* r);         // pool3d, max_pool{2,3}d_with_index
void RegisterPadOps(OpRegistry* r);            // pad, pad3d
void RegisterInterpOps(OpRegistry* r);         // {bilinear,nearest,trilinear}_interp[_v2], linear_interp_v2
void RegisterConvTransposeOps(OpRegistry* r);  // conv2d_transpose
void RegisterScatterOps(OpRegistry* r);        // scatter, scatter_nd_add, gather_nd
void RegisterStridedSliceOp(OpRegistry* r);
void RegisterUniqueOps(OpRegistry* r);   // unique, unique_with_counts
void RegisterHsigmoidOp(OpRegistry* r);  // hierarchical_sigmoid
void RegisterChannelOps(
    OpRegistry* r);  // pixel_shuffle, shuffle_channel, temporal_shift, maxout, prelu, affine_channel
void RegisterNormMoreOps(OpRegistry* r);        // p_norm, norm, instance_norm, group_norm
void RegisterLinalgOps(OpRegistry* r);          // bmm, mv, dot, addmm, kron, cross
void RegisterMatrixFuncOps(OpRegistry* r);      // trace, inverse, cholesky, logsumexp, dist
void RegisterSelectOps(OpRegistry* r);          // masked_select, index_select, index_sample, multiplex, meshgrid
void RegisterMiscValueOps(OpRegistry* r);       // histogram, shard_index, allclose, gather_tree, crop, cvm, ...
void RegisterSequenceShapeOps(OpRegistry* r);   // sequence_softmax/expand/expand_as/mask/pad/unpad/reverse/concat
void RegisterSequenceWindowOps(OpRegistry* r);  // sequence_conv/enumerate/reshape/scatter/slice, lod_reset
void RegisterLstmOp(OpRegistry* r);             // lstm (Fluid 1.x dynamic_lstm)
void RegisterGruOps(OpRegistry* r);             // gru, gru_unit
void RegisterRandomMoreOps(OpRegistry* r);      // bernoulli, multinomial, randint, randperm, sampling_id
void RegisterLrnOp(OpRegistry* r);
void RegisterAssignValueOp(OpRegistry* r);
void RegisterPatchOps(OpRegistry* r);        // unfold, im2sequence, fsp, bilinear_tensor_product
void RegisterImageSampleOps(OpRegistry* r);  // affine_grid, grid_sampler
void RegisterConv3dOps(OpRegistry* r);       // conv3d, conv3d_transpose
void RegisterSortOps(OpRegistry* r);         // argsort, top_k grads
void RegisterMatrixShapeOps(OpRegistry* r);  // eye, empty, linspace, size, tril_triu, diag_v2, flip, roll, unbind
void RegisterPredicateOps(OpRegistry* r);    // isnan/isinf/isfinite (v1, v2), where_index  // gelu, leaky_relu, elu,
                                             // relu6, softplus, silu, swish, log, ...
void RegisterLayerNormOps(OpRegistry* r);    // layer_norm
void RegisterSigmoidCrossEntropyOps(OpRegistry* r);  // sigmoid_cross_entropy_with_logits
void RegisterSliceOps(OpRegistry* r);                // shape, range, slice, fill_any_like, fill_zeros_like
void RegisterSquaredL2NormOps(OpRegistry* r);        // squared_l2_norm
void RegisterRnnOps(OpRegistry* r);                  // rnn (LSTM, GRU, simple RNN)
void RegisterCoalesceTensorOp(OpRegistry* r);        // coalesce_tensor
void RegisterLambOp(OpRegistry* r);                  // lamb
void RegisterGatherStackOps(OpRegistry* r);          // gather, stack, expand_v2, tile, where
void RegisterScanEncodeOps(OpRegistry* r);           // cumsum, arg_max/min, one_hot_v2, label_smooth
void RegisterTensorArrayOps(
    OpRegistry* r);                    // write_to_array, read_from_array, lod_array_length, tensor_array_to_tensor
void RegisterWhileOps(OpRegistry* r);  // while, while_grad
void RegisterConditionalBlockOps(OpRegistry* r);   // conditional_block(_grad), select_input/output
void RegisterSequenceDecodeOps(OpRegistry* r);     // edit_distance, ctc_align
void RegisterTeacherStudentLossOp(OpRegistry* r);  // teacher_student_sigmoid_loss
void RegisterBoxOps(OpRegistry* r);                // iou_similarity, box_clip, polygon_box_transform
void RegisterWarpCtcOps(OpRegistry* r);            // warpctc
void RegisterHashOp(OpRegistry* r);                // hash (xxHash64)
void RegisterNceOp(OpRegistry* r);                 // nce

// The GPU kernels (common/ops/*_cuda.cc, *.cu) beside the CPU ones; CUDA
// builds only.
void RegisterCudaKernels(OpRegistry* r);
void RegisterAllOps(OpRegistry* r);

}  // namespace oar
