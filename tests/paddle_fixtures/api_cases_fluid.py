"""API coverage cases: `fluid.layers` of the reference list. Fluid 1.x does
not install here, so each case writes the op(s) exactly as the Fluid 1.x
layer wrote them (op type, slots, attributes, from Fluid's public source),
through Paddle 2.6's LayerHelper; Paddle 2.6 runs them where it still has
the op's CPU kernel (see api_case.py)."""
import paddle

from api_case import CONTROL_FLOW, NO_CASE, NOT_OP, T, case, op, raw, skip

FL = "fluid.layers"
X34, P34, D34 = T([3, 4]), T([3, 4], "p"), T([3, 4], "dist")
IMG, DIMG = T([2, 3, 6, 6]), T([2, 3, 6, 6], "dist")
XS = {"extra_outs": ("XShape",)}

skip(FL, "Categorical MultivariateNormalDiag Normal Uniform DecodeHelper Decoder GreedyEmbeddingHelper "
     "SampleEmbeddingHelper TrainingHelper BasicDecoder create_py_reader_by_data py_reader double_buffer "
     "read_file data", NOT_OP)
skip(FL, "beam_search beam_search_decode", CONTROL_FLOW)
skip(FL, "anchor_generator bipartite_match box_coder box_decoder_and_assign collect_fpn_proposals "
     "density_prior_box detection_output distribute_fpn_proposals generate_mask_labels generate_proposal_labels "
     "generate_proposals locality_aware_nms matrix_nms multiclass_nms "
     "prior_box prroi_pool psroi_pool retinanet_detection_output retinanet_target_assign roi_align "
     "roi_perspective_transform roi_pool rpn_target_assign ssd_loss target_assign yolo_box yolov3_loss "
     "deformable_conv deformable_roi_pooling", NO_CASE + " (detection)")
skip(FL, "reorder_lod_tensor_by_rank get_tensor_from_selected_rows merge_selected_rows",
     NO_CASE + " (tensor arrays, selected rows)")
skip(FL, "filter_by_instag similarity_focus inplace_abn center_loss linear_chain_crf dynamic_lstmp "
     "sampled_softmax_with_cross_entropy", NO_CASE)

# Elementwise with Fluid's `axis` broadcast (Y aligned at axis 1).
for t in ("add", "sub"):
    raw(FL, f"elementwise_{t}", f"elementwise_{t}", {"X": T([2, 3, 4], "dist"), "Y": T([3], "dist")}, {"axis": 1})
for t in ("max", "min"):  # Paddle 2.6 broadcasts these numpy-style only
    raw(FL, f"elementwise_{t}", f"elementwise_{t}", {"X": T([2, 3, 4], "dist"), "Y": T([3, 4], "dist")}, {"axis": -1})
raw(FL, "elementwise_div", "elementwise_div", {"X": T([2, 3, 4]), "Y": T([3], "p")}, {"axis": 1})
raw(FL, "elementwise_pow", "elementwise_pow", {"X": T([2, 3], "p"), "Y": T([2, 3], "u")}, {"axis": -1})
for t in ("floordiv", "mod"):
    raw(FL, f"elementwise_{t}", f"elementwise_{t}", {"X": T([2, 3], "i20"), "Y": T([2, 3], "i1-5")},
        {"axis": -1}, dtype="int64")
for t in ("equal", "not_equal", "less_than", "less_equal", "greater_than", "greater_equal"):
    raw(FL, t, t, {"X": T([3, 4], "i4"), "Y": T([3, 4], "i4")}, {"axis": -1, "force_cpu": False}, dtype="bool")

# Activations as Fluid wrote them.
for name, t, attrs in [("relu", X34, {}), ("tanh", X34, {}), ("relu6", X34, {"threshold": 6.0}),
                       ("elu", X34, {"alpha": 1.0}), ("leaky_relu", X34, {"alpha": 0.02}),
                       ("softplus", X34, {}), ("softshrink", X34, {"lambda": 0.5}),
                       ("hard_shrink", X34, {"threshold": 0.5}), ("hard_sigmoid", X34, {"slope": 0.2, "offset": 0.5}),
                       ("swish", X34, {"beta": 1.0}), ("logsigmoid", X34, {}), ("tanh_shrink", X34, {}),
                       ("thresholded_relu", X34, {"threshold": 0.5}), ("brelu", X34, {"t_min": -0.5, "t_max": 0.5}),
                       ("soft_relu", X34, {"threshold": 40.0}), ("selu", X34, {}),
                       ("gelu", X34, {"approximate": False}), ("hard_swish", X34, {}), ("sign", X34, {}),
                       ("softsign", X34, {})]:
    raw(FL, name, name, {"X": t}, attrs)
raw(FL, "pow", "pow", {"X": P34}, {"factor": 2.5})
raw(FL, "softmax", "softmax", {"X": X34}, {"axis": -1, "use_cudnn": False})
raw(FL, "mean", "mean", {"X": X34})
raw(FL, "mul", "mul", {"X": T([3, 2, 2]), "Y": T([4, 5])}, {"x_num_col_dims": 1, "y_num_col_dims": 1})
raw(FL, "matmul", "matmul", {"X": T([2, 4, 3]), "Y": T([2, 4, 5])},
    {"transpose_X": True, "transpose_Y": False, "alpha": 0.5})
for r in ("sum", "mean", "max", "min", "prod"):
    raw(FL, f"reduce_{r}", f"reduce_{r}", {"X": T([2, 3, 4], "dist")}, {"dim": [1], "keep_dim": True, "reduce_all": False})
for r in ("all", "any"):
    raw(FL, f"reduce_{r}", f"reduce_{r}", {"X": T([3, 4], "b")}, {"dim": [1], "keep_dim": False, "reduce_all": False},
        dtype="bool")

# Shape and indexing ops.
raw(FL, "reshape", "reshape2", {"X": T([2, 6])}, {"shape": [3, -1]}, **XS)
raw(FL, "squeeze", "squeeze2", {"X": T([3, 1, 4])}, {"axes": [1]}, **XS)
raw(FL, "unsqueeze", "unsqueeze2", {"X": X34}, {"axes": [1]}, **XS)
raw(FL, "flatten", "flatten2", {"X": T([2, 3, 4])}, {"axis": 2}, **XS)
raw(FL, "expand", "expand", {"X": T([1, 4])}, {"expand_times": [3, 2]})
raw(FL, "expand_as", "expand_as", {"X": T([1, 4]), "target_tensor": T([3, 4], grad=False)})
raw(FL, "concat", "concat", {"X": [T([2, 4]), X34]}, {"axis": 0})
case(FL, "split", [T([3, 6])], lambda x: paddle.split(x, 3, axis=1))
raw(FL, "stack", "stack", {"X": [X34, X34]}, {"axis": 0}, outs=("Y",))
case(FL, "unbind", [X34], lambda x: paddle.unbind(x, axis=1))
raw(FL, "gather", "gather", {"X": T([5, 3]), "Index": T([4], "i5")}, {"overwrite": True})
raw(FL, "gather_nd", "gather_nd", {"X": T([3, 4]), "Index": T([2, 2], "i3")})
raw(FL, "scatter", "scatter", {"X": T([5, 3]), "Ids": T([2], "perm5"), "Updates": T([2, 3])}, {"overwrite": True})
raw(FL, "embedding", "lookup_table", {"W": T([10, 4]), "Ids": T([5, 1], "i10")},
    {"is_sparse": False, "padding_idx": -1})
raw(FL, "one_hot", "one_hot", {"X": T([4, 1], "i5")}, {"depth": 5})
raw(FL, "topk", "top_k", {"X": D34}, {"k": 2}, outs=("Out", "Indices"), dtype={"Out": "float32", "Indices": "int64"})
raw(FL, "argsort", "argsort", {"X": D34}, {"axis": -1}, outs=("Out", "Indices"),
    dtype={"Out": "float32", "Indices": "int64"})
raw(FL, "argmax", "arg_max", {"X": D34}, {"axis": 1}, dtype="int64")
raw(FL, "argmin", "arg_min", {"X": D34}, {"axis": 0}, dtype="int64")
raw(FL, "cumsum", "cumsum", {"X": X34}, {"axis": 1, "exclusive": True, "reverse": False})
raw(FL, "reverse", "reverse", {"X": X34}, {"axis": [0]})
raw(FL, "strided_slice", "strided_slice", {"Input": T([3, 5])},
    {"axes": [1], "starts": [0], "ends": [5], "strides": [2], "infer_flags": [1]})
raw(FL, "crop", "crop", {"X": T([3, 5])}, {"shape": [2, 3], "offsets": [1, 1]})
raw(FL, "crop_tensor", "crop_tensor", {"X": T([3, 5])}, {"shape": [2, 3], "offsets": [0, 2]})
raw(FL, "pad", "pad", {"X": X34}, {"paddings": [1, 0, 0, 2], "pad_value": 0.5})
raw(FL, "pad2d", "pad2d", {"X": IMG}, {"paddings": [1, 0, 0, 2], "mode": "reflect", "pad_value": 0.0,
                                        "data_format": "NCHW"})
raw(FL, "pad_constant_like", "pad_constant_like", {"X": T([3, 5], grad=False), "Y": X34}, {"pad_value": 0.5})
raw(FL, "clip", "clip", {"X": T([3, 4], "u")}, {"min": -0.5, "max": 0.5})
raw(FL, "clip_by_norm", "clip_by_norm", {"X": X34}, {"max_norm": 1.0})
raw(FL, "where", "where_index", {"Condition": T([3, 4], "b")}, dtype="int64")
raw(FL, "size", "size", {"Input": T([2, 3])}, dtype="int64")
raw(FL, "isfinite", "isfinite", {"X": X34}, dtype="bool")
raw(FL, "has_inf", "isinf", {"X": X34}, dtype="bool")
raw(FL, "has_nan", "isnan", {"X": X34}, dtype="bool")
raw(FL, "sums", "sum", {"X": [X34, X34, X34]})
raw(FL, "sum", "sum", {"X": [X34, X34]})
raw(FL, "assign", "assign", {"X": X34})
raw(FL, "increment", "increment", {"X": T([1])}, {"step": 1.0})
raw(FL, "diag", "diag", {"Diagonal": T([4])})
raw(FL, "eye", "eye", {}, {"num_rows": 3, "num_columns": 4, "dtype": 5})
raw(FL, "fill_constant", "fill_constant", {}, {"shape": [2, 3], "value": 1.5, "dtype": 5})
raw(FL, "zeros", "fill_constant", {}, {"shape": [2, 3], "value": 0.0, "dtype": 5})
raw(FL, "ones", "fill_constant", {}, {"shape": [2, 3], "value": 1.0, "dtype": 5})
raw(FL, "zeros_like", "fill_zeros_like", {"X": X34})
raw(FL, "ones_like", "fill_any_like", {"X": X34}, {"value": 1.0, "dtype": -1})
case(FL, "range", [], lambda: op("range", {"Start": paddle.full([1], 0.5), "End": paddle.full([1], 5.0),
                                           "Step": paddle.full([1], 1.5)}))
raw(FL, "gaussian_random", "gaussian_random", {}, {"shape": [2, 3], "mean": 0.0, "std": 1.0, "seed": 0, "dtype": 5},
    random=True)
raw(FL, "uniform_random", "uniform_random", {}, {"shape": [2, 3], "min": -1.0, "max": 1.0, "seed": 0, "dtype": 5},
    random=True)
raw(FL, "dropout", "dropout", {"X": X34}, {"dropout_prob": 0.5, "is_test": False,
                                           "dropout_implementation": "downgrade_in_infer"},
    extra_outs=("Mask",), random=True)
raw(FL, "random_crop", "random_crop", {"X": T([2, 5, 5]), "Seed": T([1], "i9")}, {"shape": [3, 3]},
    extra_outs=("SeedOut",), random=True)
raw(FL, "sampling_id", "sampling_id", {"X": T([3, 4], "prob")}, {"min": 0.0, "max": 1.0, "seed": 0}, dtype="int64",
    random=True)
raw(FL, "unique", "unique", {"X": T([8], "i4")}, {"dtype": 3}, outs=("Out", "Index"), dtype="int64")
raw(FL, "unique_with_counts", "unique_with_counts", {"X": T([8], "i4")}, {"dtype": 3},
    outs=("Out", "Index", "Count"), dtype="int64")
raw(FL, "hash", "hash", {"X": T([4, 1], "i100")}, {"num_hash": 2, "mod_by": 1000}, dtype="int64")
raw(FL, "continuous_value_model", "cvm", {"X": T([3, 4], "p"), "CVM": T([3, 2], "p", grad=False)},
    {"use_cvm": True}, outs=("Y",))

# Convolution, pooling, normalization, images.
raw(FL, "pool2d", "pool2d", {"X": DIMG}, {"pooling_type": "max", "ksize": [2, 2], "strides": [2, 2],
                                         "paddings": [0, 0], "global_pooling": False, "ceil_mode": False,
                                         "exclusive": True, "adaptive": False})
raw(FL, "adaptive_pool2d", "pool2d", {"X": IMG}, {"pooling_type": "avg", "ksize": [4, 4], "adaptive": True,
                                                  "strides": [1, 1], "paddings": [0, 0]})
raw(FL, "pool3d", "pool3d", {"X": T([1, 2, 4, 4, 4])}, {"pooling_type": "avg", "ksize": [2, 2, 2],
                                                        "strides": [2, 2, 2], "paddings": [0, 0, 0]})
raw(FL, "adaptive_pool3d", "pool3d", {"X": T([1, 2, 4, 4, 4], "dist")},
    {"pooling_type": "max", "ksize": [3, 3, 3], "adaptive": True, "strides": [1, 1, 1], "paddings": [0, 0, 0]})
raw(FL, "lrn", "lrn", {"X": T([1, 4, 3, 3])}, {"n": 3, "k": 1.0, "alpha": 1e-4, "beta": 0.75}, extra_outs=("MidOut",))
raw(FL, "l2_normalize", "norm", {"X": X34}, {"axis": 1, "epsilon": 1e-10}, extra_outs=("Norm",))
raw(FL, "maxout", "maxout", {"X": T([1, 4, 3, 3], "dist")}, {"groups": 2})
raw(FL, "pixel_shuffle", "pixel_shuffle", {"X": T([1, 4, 2, 2])}, {"upscale_factor": 2})
raw(FL, "space_to_depth", "space_to_depth", {"X": T([1, 2, 4, 4])}, {"blocksize": 2})
raw(FL, "shuffle_channel", "shuffle_channel", {"X": T([1, 4, 2, 2])}, {"group": 2})
raw(FL, "affine_channel", "affine_channel", {"X": IMG, "Scale": T([3]), "Bias": T([3])}, {"data_layout": "NCHW"})
raw(FL, "affine_grid", "affine_grid", {"Theta": T([2, 2, 3])}, {"output_shape": [2, 1, 3, 4]}, outs=("Output",))
raw(FL, "grid_sampler", "grid_sampler", {"X": T([1, 2, 4, 4]), "Grid": T([1, 3, 3, 2], "h")}, outs=("Output",))
for name, op_type in [("resize_bilinear", "bilinear_interp"), ("image_resize", "bilinear_interp"),
                      ("image_resize_short", "bilinear_interp"), ("resize_nearest", "nearest_interp")]:
    raw(FL, name, op_type, {"X": T([1, 2, 3, 3])}, {"out_h": 5, "out_w": 4, "interp_method": op_type.split("_")[0],
                                                     "align_corners": True, "align_mode": 1})
raw(FL, "resize_trilinear", "trilinear_interp", {"X": T([1, 1, 2, 3, 3])},
    {"out_d": 3, "out_h": 4, "out_w": 4, "interp_method": "trilinear", "align_corners": False, "align_mode": 1})
raw(FL, "im2sequence", "im2sequence", {"X": T([1, 2, 4, 4])}, {"kernels": [2, 2], "strides": [2, 2],
                                                               "paddings": [0, 0, 0, 0]})
raw(FL, "fsp_matrix", "fsp", {"X": T([2, 3, 4, 4]), "Y": T([2, 2, 4, 4])})
raw(FL, "add_position_encoding", "add_position_encoding", {"X": T([2, 3, 4])}, {"alpha": 1.0, "beta": 1.0})
raw(FL, "label_smooth", "label_smooth", {"X": T([3, 4], "prob")}, {"epsilon": 0.1})


def fc(x):
    w = paddle.create_parameter([4, 5], "float32")
    b = paddle.create_parameter([5], "float32", is_bias=True)
    h = op("mul", {"X": x, "Y": w}, {"x_num_col_dims": 1, "y_num_col_dims": 1})
    h = op("elementwise_add", {"X": h, "Y": b}, {"axis": 1})
    return op("relu", {"X": h})


case(FL, "fc", [X34], fc)
raw(FL, "hsigmoid", "hierarchical_sigmoid", {"X": X34, "W": T([5, 4]), "Label": T([3, 1], "i6"), "Bias": T([5, 1])},
    {"num_classes": 6}, extra_outs=("PreOut", "W_Out"))

# Losses.
raw(FL, "cross_entropy", "cross_entropy2", {"X": T([4, 5], "prob"), "Label": T([4, 1], "i5")}, {"ignore_index": -100},
    outs=("Y",), extra_outs=("MatchX", "XShape"))
raw(FL, "sigmoid_cross_entropy_with_logits", "sigmoid_cross_entropy_with_logits",
    {"X": X34, "Label": T([3, 4], "prob", grad=False)}, {"ignore_index": -100, "normalize": False})
raw(FL, "huber_loss", "huber_loss", {"X": T([3, 1]), "Y": T([3, 1])}, {"delta": 0.5}, extra_outs=("Residual",))
raw(FL, "smooth_l1", "smooth_l1_loss", {"X": X34, "Y": X34}, {"sigma": 1.0}, extra_outs=("Diff",))
raw(FL, "kldiv_loss", "kldiv_loss", {"X": X34, "Target": T([3, 4], "prob", grad=False)}, {"reduction": "mean"},
    outs=("Loss",))
case(FL, "mse_loss", [X34, X34], lambda x, y: paddle.mean(paddle.square(x - y)))
raw(FL, "rank_loss", "rank_loss", {"Label": T([4, 1], "01", grad=False), "Left": T([4, 1]), "Right": T([4, 1])})
raw(FL, "margin_rank_loss", "margin_rank_loss",
    {"Label": T([4, 1], "pm1", grad=False), "X1": T([4, 1]), "X2": T([4, 1])}, {"margin": 0.1},
    extra_outs=("Activated",))
raw(FL, "bpr_loss", "bpr_loss", {"X": T([4, 5]), "Label": T([4, 1], "i5")}, outs=("Y",))
raw(FL, "teacher_student_sigmoid_loss", "teacher_student_sigmoid_loss",
    {"X": T([8, 1]), "Label": T([8, 1], "tslabel", grad=False)}, {"soft_max_up_bound": 15.0, "soft_max_lower_bound": -15.0},
    outs=("Y",))
raw(FL, "sigmoid_focal_loss", "sigmoid_focal_loss",
    {"X": X34, "Label": T([3, 1], "i5", dtype="int32"), "FgNum": T([1], "i1-3", dtype="int32")},
    {"gamma": 2.0, "alpha": 0.25})
raw(FL, "warpctc", "warpctc", {"Logits": T([5, 4], lod=[0, 2, 5]), "Label": T([3, 1], "i1-3", dtype="int32", lod=[0, 1, 3])},
    {"blank": 0, "norm_by_times": False}, outs=("Loss",), extra_outs=("WarpCTCGrad",))

# Recurrent units and LoD sequence ops (level-1 LoD over 5 rows: [0, 2, 5]).
LOD = [0, 2, 5]
raw(FL, "dynamic_lstm", "lstm", {"Input": T([5, 8], lod=LOD), "Weight": T([2, 8]), "Bias": T([1, 8])},
    {"use_peepholes": False, "is_reverse": False, "gate_activation": "sigmoid", "cell_activation": "tanh",
     "candidate_activation": "tanh"}, outs=("Hidden", "Cell"), extra_outs=("BatchGate", "BatchCellPreAct"))
raw(FL, "dynamic_gru", "gru", {"Input": T([5, 6], lod=LOD), "Weight": T([2, 6]), "Bias": T([1, 6])},
    {"activation": "tanh", "gate_activation": "sigmoid", "is_reverse": False, "origin_mode": False},
    outs=("Hidden",), extra_outs=("BatchGate", "BatchResetHiddenPrev", "BatchHidden"))
raw(FL, "gru_unit", "gru_unit", {"Input": T([3, 6]), "HiddenPrev": T([3, 2]), "Weight": T([2, 6]), "Bias": T([1, 6])},
    {"activation": 2, "gate_activation": 1, "origin_mode": False}, outs=("Hidden",),
    extra_outs=("Gate", "ResetHiddenPrev"))
raw(FL, "lstm_unit", "lstm_unit", {"X": T([3, 8]), "C_prev": T([3, 2])}, {"forget_bias": 0.0}, outs=("H", "C"))
raw(FL, "sequence_softmax", "sequence_softmax", {"X": T([5, 1], lod=LOD)})
raw(FL, "sequence_pool", "sequence_pool", {"X": T([5, 3], lod=LOD)}, {"pooltype": "SQRT", "pad_value": 0.0},
    extra_outs=("MaxIndex",))
raw(FL, "sequence_first_step", "sequence_pool", {"X": T([5, 3], lod=LOD)}, {"pooltype": "FIRST", "pad_value": 0.0},
    extra_outs=("MaxIndex",))
raw(FL, "sequence_last_step", "sequence_pool", {"X": T([5, 3], lod=LOD)}, {"pooltype": "LAST", "pad_value": 0.0},
    extra_outs=("MaxIndex",))
raw(FL, "sequence_expand", "sequence_expand", {"X": T([2, 3]), "Y": T([5, 1], lod=LOD, grad=False)}, {"ref_level": 0})
raw(FL, "sequence_expand_as", "sequence_expand_as", {"X": T([2, 3]), "Y": T([5, 1], lod=LOD, grad=False)})
raw(FL, "sequence_conv", "sequence_conv", {"X": T([5, 3], lod=LOD), "Filter": T([9, 4])},
    {"contextLength": 3, "contextStart": -1, "contextStride": 1, "paddingTrainable": False})
raw(FL, "sequence_mask", "sequence_mask", {"X": T([3], "i1-4")}, {"maxlen": 5, "out_dtype": 5}, outs=("Y",))
raw(FL, "sequence_pad", "sequence_pad", {"X": T([5, 3], lod=LOD), "PadValue": T([1], grad=False)},
    {"padded_length": 4}, outs=("Out", "Length"), dtype={"Out": "float32", "Length": "int64"})
raw(FL, "sequence_unpad", "sequence_unpad", {"X": T([2, 4, 3]), "Length": T([2], "i1-4")})
raw(FL, "sequence_reverse", "sequence_reverse", {"X": T([5, 3], lod=LOD)}, outs=("Y",))
raw(FL, "sequence_concat", "sequence_concat", {"X": [T([5, 3], lod=LOD), T([5, 3], lod=LOD)]})
raw(FL, "sequence_enumerate", "sequence_enumerate", {"X": T([5, 1], "i9", lod=LOD)}, {"win_size": 2, "pad_value": 0},
    dtype="int64")
raw(FL, "sequence_reshape", "sequence_reshape", {"X": T([6, 2], lod=[0, 2, 6])}, {"new_dim": 4})
raw(FL, "sequence_scatter", "sequence_scatter",
    {"X": T([2, 6]), "Ids": T([5, 1], "i6", lod=LOD), "Updates": T([5, 1], lod=LOD)})
raw(FL, "sequence_slice", "sequence_slice",
    {"X": T([5, 3], lod=LOD), "Offset": T([2, 1], "i1-1"), "Length": T([2, 1], "i1-1")})
raw(FL, "lod_reset", "lod_reset", {"X": T([5, 3])}, {"target_lod": [0, 1, 5]})
raw(FL, "lod_append", "lod_reset", {"X": T([5, 3], lod=LOD)}, {"target_lod": [0, 1, 2, 3, 4, 5], "append": True})


# Decoding, metrics and box geometry: no gradients.
def ctc_greedy_decoder(x):  # Fluid 1.x: top_k (k=1), then ctc_align on the indices
    _, ids = op("top_k", {"X": x}, {"k": 1}, outs=("Out", "Indices"), dtype={"Out": "float32", "Indices": "int64"})
    return op("ctc_align", {"Input": ids}, {"merge_repeated": True, "blank": 0}, outs=("Output",), dtype="int64")


case(FL, "ctc_greedy_decoder", [T([7, 4], "dist", lod=[0, 3, 7])], ctc_greedy_decoder, grad=False)
raw(FL, "edit_distance", "edit_distance",
    {"Hyps": T([7, 1], "i3", lod=[0, 3, 3, 7]), "Refs": T([6, 1], "i3", lod=[0, 2, 4, 6])}, {"normalized": True},
    outs=("Out", "SequenceNum"), dtype="int64", grad=False)  # Fluid declares Out int64; it holds float32
raw(FL, "iou_similarity", "iou_similarity", {"X": T([3, 4], "box"), "Y": T([5, 4], "box")},
    {"box_normalized": True}, grad=False)
raw(FL, "box_clip", "box_clip", {"Input": T([5, 4], "pbox", lod=[0, 2, 5]), "ImInfo": T([2, 3], "hws")},
    outs=("Output",), grad=False)
raw(FL, "polygon_box_transform", "polygon_box_transform", {"Input": T([2, 4, 3, 5])}, outs=("Output",), grad=False)
