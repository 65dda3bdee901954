"""API coverage cases: `paddle.nn` layers and `paddle.nn.functional`, each
called as a Paddle 2.x user calls it (see api_case.py). Layers make their
parameters in the startup program; their gradients are checked too."""
import paddle

from api_case import CONTROL_FLOW, NOT_OP, F, T, case, skip

N, FN = "paddle.nn", "paddle.nn.functional"
nn = paddle.nn
X34 = T([3, 4])
IMG = T([2, 3, 6, 6])
SEQ = T([2, 3, 8])
VOL = T([1, 2, 4, 4, 4])
DIMG, DSEQ, DVOL = T([2, 3, 6, 6], "dist"), T([2, 3, 8], "dist"), T([1, 2, 4, 4, 4], "dist")


def layer(name, ins, make, **kw):
    case(N, name, ins, lambda *xs: make()(*xs), **kw)


def fn(name, ins, f, **kw):
    case(FN, name, ins, f, **kw)


skip(N, "Layer LayerList ParameterList Sequential RNNCellBase", NOT_OP)
skip(N, "BeamSearchDecoder dynamic_decode", CONTROL_FLOW)

# Activations: the layer and the function write the same op.
for layer_name, fn_name, t in [
        ("ELU", "elu", X34), ("GELU", "gelu", X34), ("Hardshrink", "hardshrink", X34),
        ("Hardsigmoid", "hardsigmoid", T([3, 4], "n")), ("Hardswish", "hardswish", X34),
        ("Hardtanh", "hardtanh", T([3, 4], "n")), ("LeakyReLU", "leaky_relu", X34),
        ("LogSigmoid", "log_sigmoid", X34), ("ReLU", "relu", X34), ("ReLU6", "relu6", T([3, 4], "p")),
        ("SELU", "selu", X34), ("Sigmoid", "sigmoid", X34), ("Softplus", "softplus", X34),
        ("Softshrink", "softshrink", X34), ("Softsign", "softsign", X34), ("Swish", "swish", X34),
        ("Tanh", None, X34), ("Tanhshrink", "tanhshrink", X34), ("ThresholdedReLU", "thresholded_relu", X34),
        ("LogSoftmax", "log_softmax", X34), ("Softmax", "softmax", X34)]:
    layer(layer_name, [t], getattr(nn, layer_name))
    if fn_name:
        fn(fn_name, [t], getattr(F, fn_name))
fn("elu_", [X34], lambda x: F.elu_(paddle.assign(x)))
fn("relu_", [X34], lambda x: F.relu_(paddle.assign(x)))
fn("softmax_", [X34], lambda x: F.softmax_(paddle.assign(x)))
layer("PReLU", [T([2, 3, 4])], lambda: nn.PReLU(3, 0.2))
fn("prelu", [T([2, 3, 4]), T([3], "p")], F.prelu)
layer("Maxout", [T([1, 4, 3, 3], "dist")], lambda: nn.Maxout(2))
fn("maxout", [T([1, 4, 3, 3], "dist")], lambda x: F.maxout(x, 2))

# Pooling.
for dims, t, dt in [("1D", SEQ, DSEQ), ("2D", IMG, DIMG), ("3D", VOL, DVOL)]:
    d = dims.lower()
    layer(f"AdaptiveAvgPool{dims}", [t], lambda d=dims: getattr(nn, f"AdaptiveAvgPool{d}")(2))
    layer(f"AdaptiveMaxPool{dims}", [dt], lambda d=dims: getattr(nn, f"AdaptiveMaxPool{d}")(2))
    layer(f"AvgPool{dims}", [t], lambda d=dims: getattr(nn, f"AvgPool{d}")(2, 2))
    layer(f"MaxPool{dims}", [dt], lambda d=dims: getattr(nn, f"MaxPool{d}")(2, 2))
    fn(f"adaptive_avg_pool{d}", [t], lambda x, d=d: getattr(F, f"adaptive_avg_pool{d}")(x, 3))
    fn(f"adaptive_max_pool{d}", [dt], lambda x, d=d: getattr(F, f"adaptive_max_pool{d}")(x, 3))
    fn(f"avg_pool{d}", [t], lambda x, d=d: getattr(F, f"avg_pool{d}")(x, 3, 1, padding=1))
    fn(f"max_pool{d}", [dt], lambda x, d=d: getattr(F, f"max_pool{d}")(x, 2, 2))

# Convolutions: the layer with its parameters; the function with the filter fed.
layer("Conv1D", [SEQ], lambda: nn.Conv1D(3, 4, 3, padding=1))
layer("Conv2D", [IMG], lambda: nn.Conv2D(3, 4, 3, stride=2, padding=1))
layer("Conv3D", [VOL], lambda: nn.Conv3D(2, 3, 3))
layer("Conv1DTranspose", [SEQ], lambda: nn.Conv1DTranspose(3, 2, 3))
layer("Conv2DTranspose", [IMG], lambda: nn.Conv2DTranspose(3, 2, 3, stride=2))
layer("Conv3DTranspose", [VOL], lambda: nn.Conv3DTranspose(2, 2, 2))
fn("conv1d", [SEQ, T([4, 3, 3])], lambda x, w: F.conv1d(x, w, padding=1))
fn("conv2d", [IMG, T([4, 3, 3, 3])], lambda x, w: F.conv2d(x, w, padding=1))
fn("conv3d", [VOL, T([3, 2, 3, 3, 3])], F.conv3d)
fn("conv1d_transpose", [SEQ, T([3, 2, 3])], F.conv1d_transpose)
fn("conv2d_transpose", [IMG, T([3, 2, 3, 3])], lambda x, w: F.conv2d_transpose(x, w, stride=2, padding=1))
fn("conv3d_transpose", [VOL, T([2, 2, 2, 2, 2])], F.conv3d_transpose)

# Normalization.
layer("BatchNorm", [IMG], lambda: nn.BatchNorm(3))
layer("BatchNorm1D", [T([4, 3])], lambda: nn.BatchNorm1D(3))
layer("BatchNorm2D", [IMG], lambda: nn.BatchNorm2D(3))
layer("BatchNorm3D", [VOL], lambda: nn.BatchNorm3D(2))
layer("SyncBatchNorm", [IMG], lambda: nn.SyncBatchNorm(3))
layer("InstanceNorm1D", [SEQ], lambda: nn.InstanceNorm1D(3))
layer("InstanceNorm2D", [IMG], lambda: nn.InstanceNorm2D(3))
layer("InstanceNorm3D", [VOL], lambda: nn.InstanceNorm3D(2))
layer("GroupNorm", [T([2, 4, 3, 3])], lambda: nn.GroupNorm(2, 4))
layer("LayerNorm", [T([2, 3, 4])], lambda: nn.LayerNorm(4))
layer("LocalResponseNorm", [T([1, 4, 3, 3])], lambda: nn.LocalResponseNorm(3))
layer("SpectralNorm", [T([4, 3])], lambda: nn.SpectralNorm([4, 3], power_iters=2))
fn("batch_norm", [IMG, T([3], grad=False), T([3], "p", grad=False), T([3]), T([3])],
   lambda x, m, v, w, b: F.batch_norm(x, m, v, w, b, training=True))
fn("instance_norm", [IMG], F.instance_norm)
fn("layer_norm", [T([2, 3, 4]), T([4]), T([4])], lambda x, w, b: F.layer_norm(x, [4], w, b))
fn("local_response_norm", [T([1, 4, 3, 3])], lambda x: F.local_response_norm(x, 3))
fn("normalize", [X34], lambda x: F.normalize(x, axis=1))

# Dropout: Paddle's random stream cannot be matched; shapes only.
for name, t in [("Dropout", X34), ("Dropout2D", IMG), ("Dropout3D", VOL), ("AlphaDropout", X34)]:
    layer(name, [t], lambda name=name: getattr(nn, name)(0.5), random=True)
for name, t in [("dropout", X34), ("dropout2d", IMG), ("dropout3d", VOL), ("alpha_dropout", X34)]:
    fn(name, [t], lambda x, name=name: getattr(F, name)(x, 0.5, training=True), random=True)

# Linear, embedding, shape layers.
layer("Linear", [X34], lambda: nn.Linear(4, 5))
layer("Bilinear", [X34, T([3, 5])], lambda: nn.Bilinear(4, 5, 6))
layer("Embedding", [T([3, 2], "i10")], lambda: nn.Embedding(10, 4, padding_idx=0))
layer("Flatten", [T([2, 3, 4])], nn.Flatten)
layer("PixelShuffle", [T([1, 4, 2, 2])], lambda: nn.PixelShuffle(2))
layer("Pad1D", [SEQ], lambda: nn.Pad1D([1, 2], mode="reflect"))
layer("Pad2D", [IMG], lambda: nn.Pad2D([1, 0, 1, 2]))
layer("Pad3D", [VOL], lambda: nn.Pad3D(1, mode="replicate"))
layer("Upsample", [T([1, 2, 3, 3])], lambda: nn.Upsample(scale_factor=2, mode="nearest"))
layer("UpsamplingBilinear2D", [T([1, 2, 3, 3])], lambda: nn.UpsamplingBilinear2D(size=[5, 5]))
layer("UpsamplingNearest2D", [T([1, 2, 3, 3])], lambda: nn.UpsamplingNearest2D(scale_factor=2))
layer("CosineSimilarity", [X34, X34], lambda: nn.CosineSimilarity(axis=1))
layer("PairwiseDistance", [X34, X34], nn.PairwiseDistance)
fn("linear", [X34, T([4, 5]), T([5])], F.linear)
fn("bilinear", [X34, T([3, 5]), T([6, 4, 5]), T([1, 6])], F.bilinear)
fn("embedding", [T([3, 2], "i10"), T([10, 4])], F.embedding)
fn("one_hot", [T([4], "i5")], lambda x: F.one_hot(x, 5))
fn("pad", [IMG], lambda x: F.pad(x, [1, 1, 1, 1], value=0.5))
fn("pixel_shuffle", [T([1, 4, 2, 2])], lambda x: F.pixel_shuffle(x, 2))
fn("interpolate", [T([1, 2, 3, 3])], lambda x: F.interpolate(x, size=[5, 4], mode="bilinear", align_corners=True))
fn("upsample", [T([1, 2, 3, 3])], lambda x: F.upsample(x, scale_factor=2, mode="nearest"))
fn("cosine_similarity", [X34, X34], F.cosine_similarity)
fn("diag_embed", [T([2, 3])], F.diag_embed)
fn("unfold", [T([1, 2, 4, 4])], lambda x: F.unfold(x, 2))
fn("temporal_shift", [T([4, 4, 2, 2])], lambda x: F.temporal_shift(x, 2))
fn("affine_grid", [T([2, 2, 3])], lambda t: F.affine_grid(t, [2, 1, 3, 4], align_corners=False))
fn("grid_sample", [T([1, 2, 4, 4]), T([1, 3, 3, 2], "h")], F.grid_sample)
fn("label_smooth", [T([3, 4], "prob")], lambda x: F.label_smooth(x, epsilon=0.1))
fn("gather_tree", [T([3, 2, 2], "i5"), T([3, 2, 2], "i2")], F.gather_tree)

# Losses.
L, LBL = T([4, 5]), T([4, 1], "i5", grad=False)
PR, PL = T([3, 4], "prob"), T([3, 4], "prob", grad=False)
layer("BCELoss", [PR, PL], nn.BCELoss)
layer("BCEWithLogitsLoss", [X34, PL], nn.BCEWithLogitsLoss)
layer("CrossEntropyLoss", [L, LBL], nn.CrossEntropyLoss)
layer("KLDivLoss", [X34, PL], lambda: nn.KLDivLoss("mean"))
layer("L1Loss", [X34, X34], nn.L1Loss)
layer("MSELoss", [X34, X34], nn.MSELoss)
layer("SmoothL1Loss", [X34, X34], nn.SmoothL1Loss)
layer("MarginRankingLoss", [T([4, 1]), T([4, 1]), T([4, 1], "pm1", grad=False)], lambda: nn.MarginRankingLoss(0.1))
layer("NLLLoss", [L, T([4], "i5")], nn.NLLLoss)
layer("HSigmoidLoss", [X34, T([3, 1], "i6")], lambda: nn.HSigmoidLoss(4, 6))
CTC = [T([5, 2, 4]), T([2, 2], "i1-3", dtype="int32"), T([2], "i1-2")]
layer("CTCLoss", CTC, lambda: (lambda lg, lb, ll: nn.CTCLoss()(lg, lb, paddle.full([2], 5, "int64"), ll)))
fn("binary_cross_entropy", [PR, PL], F.binary_cross_entropy)
fn("binary_cross_entropy_with_logits", [X34, PL], F.binary_cross_entropy_with_logits)
fn("cross_entropy", [L, LBL], F.cross_entropy)
fn("softmax_with_cross_entropy", [L, LBL], F.softmax_with_cross_entropy)
fn("kl_div", [X34, PL], lambda x, y: F.kl_div(x, y, "batchmean"))
fn("l1_loss", [X34, X34], F.l1_loss)
fn("mse_loss", [X34, X34], F.mse_loss)
fn("square_error_cost", [X34, X34], F.square_error_cost)
fn("smooth_l1_loss", [X34, X34], F.smooth_l1_loss)
fn("log_loss", [T([3, 1], "prob"), T([3, 1], "01", grad=False)], F.log_loss)
fn("margin_ranking_loss", [T([4, 1]), T([4, 1]), T([4, 1], "pm1", grad=False)], F.margin_ranking_loss)
fn("nll_loss", [L, T([4], "i5")], F.nll_loss)
fn("npair_loss", [X34, X34, T([3], "i2", dtype="float32", grad=False)], F.npair_loss)
fn("dice_loss", [T([3, 4], "prob"), T([3, 1], "i4")], F.dice_loss)
fn("sigmoid_focal_loss", [X34, T([3, 4], "01", grad=False)], F.sigmoid_focal_loss)
fn("hsigmoid_loss", [X34, T([3, 1], "i6"), T([5, 4]), T([5, 1])], lambda x, l, w, b: F.hsigmoid_loss(x, l, 6, w, b))
fn("ctc_loss", CTC, lambda lg, lb, ll: F.ctc_loss(lg, lb, paddle.full([2], 5, "int64"), ll))

# Recurrent and attention layers (dropout 0, so they are deterministic).
layer("SimpleRNN", [T([2, 3, 4])], lambda: nn.SimpleRNN(4, 5))
layer("LSTM", [T([2, 3, 4])], lambda: nn.LSTM(4, 5, num_layers=2))
layer("GRU", [T([2, 3, 4])], lambda: nn.GRU(4, 5, direction="bidirect"))
layer("SimpleRNNCell", [X34, T([3, 5])], lambda: nn.SimpleRNNCell(4, 5))
layer("LSTMCell", [X34], lambda: nn.LSTMCell(4, 5))
layer("GRUCell", [X34, T([3, 5])], lambda: nn.GRUCell(4, 5))
layer("RNN", [T([2, 3, 4])], lambda: nn.RNN(nn.SimpleRNNCell(4, 5)))
layer("BiRNN", [T([2, 3, 4])], lambda: nn.BiRNN(nn.GRUCell(4, 5), nn.GRUCell(4, 5)))
layer("MultiHeadAttention", [T([2, 3, 8])], lambda: (lambda m: lambda x: m(x, x, x))(nn.MultiHeadAttention(8, 2)))
layer("TransformerEncoderLayer", [T([2, 3, 8])], lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0))
layer("TransformerEncoder", [T([2, 3, 8])],
      lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), 2))
layer("TransformerDecoderLayer", [T([2, 3, 8]), T([2, 4, 8])], lambda: nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0))
layer("TransformerDecoder", [T([2, 3, 8]), T([2, 4, 8])],
      lambda: nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0), 2))
layer("Transformer", [T([2, 3, 8]), T([2, 4, 8])],
      lambda: nn.Transformer(8, 2, 1, 1, 16, dropout=0.0))


def clipped_step(clip):
    """One SGD step of a small linear model under `clip`: the fetched output
    is the weight after the update."""
    def build(x):
        lin = nn.Linear(4, 3)
        loss = paddle.mean(lin(x) * 10.0)
        paddle.optimizer.SGD(0.1, grad_clip=clip).minimize(loss)
        return lin.weight
    return build


case(N, "ClipGradByGlobalNorm", [X34], clipped_step(nn.ClipGradByGlobalNorm(0.5)), grad=False)
case(N, "ClipGradByNorm", [X34], clipped_step(nn.ClipGradByNorm(0.5)), grad=False)
case(N, "ClipGradByValue", [X34], clipped_step(nn.ClipGradByValue(0.05)), grad=False)
