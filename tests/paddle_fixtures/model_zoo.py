"""Whole models as Paddle 2.x users write them (issue 20): the network
builders for make_fixtures.py. Each returns (loss, batches, params) as the
builders there do; batches are fixed numpy inputs, fed in turn.
"""
import os

import numpy as np
import paddle
import paddle.nn as nn
import paddle.nn.functional as F

RNG = np.random.default_rng(20)


def resnet18():
    """ResNet-18 (torchvision's layout: 4 stages of 2 basic blocks) on 3x32x32
    input, narrowed to 8-64 channels; batch norm, adaptive average pool."""

    class Block(nn.Layer):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.c1 = nn.Conv2D(cin, cout, 3, stride, 1, bias_attr=False)
            self.b1 = nn.BatchNorm2D(cout)
            self.c2 = nn.Conv2D(cout, cout, 3, 1, 1, bias_attr=False)
            self.b2 = nn.BatchNorm2D(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2D(cin, cout, 1, stride, bias_attr=False), nn.BatchNorm2D(cout))

        def forward(self, x):
            y = F.relu(self.b1(self.c1(x)))
            y = self.b2(self.c2(y))
            return F.relu(y + (x if self.down is None else self.down(x)))

    class ResNet(nn.Layer):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2D(3, 8, 3, 1, 1, bias_attr=False), nn.BatchNorm2D(8), nn.ReLU(),
                                      nn.MaxPool2D(3, 2, 1))
            chans, layers, cin = [8, 16, 32, 64], [], 8
            for i, c in enumerate(chans):
                layers += [Block(cin, c, 1 if i == 0 else 2), Block(c, c, 1)]
                cin = c
            self.layers = nn.Sequential(*layers)
            self.pool = nn.AdaptiveAvgPool2D(1)
            self.fc = nn.Linear(64, 10)

        def forward(self, x):
            return self.fc(paddle.flatten(self.pool(self.layers(self.stem(x))), 1))

    x = paddle.static.data("x", [-1, 3, 32, 32], "float32")
    label = paddle.static.data("label", [-1, 1], "int64")
    loss = F.cross_entropy(ResNet()(x), label)
    paddle.optimizer.Momentum(0.002, momentum=0.9).minimize(loss)
    batches = [{"x": RNG.random((16, 3, 32, 32)).astype("float32"),  # pixels in [0, 1)
                "label": RNG.integers(0, 10, (16, 1)).astype("int64")} for _ in range(4)]
    return loss, batches, "dir"


def bert():
    """A BERT-style encoder classifier: token + position embeddings, 2
    pre-norm-free TransformerEncoder layers (GELU), [CLS] pooling; AdamW with
    ClipGradByGlobalNorm and a linear warm-up."""
    vocab, seq, d = 100, 16, 32
    ids = paddle.static.data("ids", [-1, seq], "int64")
    label = paddle.static.data("label", [-1, 1], "int64")
    pos = paddle.arange(seq, dtype="int64").unsqueeze(0)
    h = nn.Embedding(vocab, d)(ids) + nn.Embedding(seq, d)(pos)
    h = nn.LayerNorm(d)(h)
    h = nn.Dropout(0.0)(h)
    layer = nn.TransformerEncoderLayer(d, 4, 64, dropout=0.0, activation="gelu")
    h = nn.TransformerEncoder(layer, 2)(h)
    cls = paddle.tanh(nn.Linear(d, d)(h[:, 0]))
    loss = F.cross_entropy(nn.Linear(d, 2)(cls), label)
    lr = paddle.optimizer.lr.LinearWarmup(0.01, 5, 0.0, 0.01)
    paddle.optimizer.AdamW(lr, weight_decay=0.01, grad_clip=nn.ClipGradByGlobalNorm(1.0)).minimize(loss)
    batches = [{"ids": RNG.integers(0, vocab, (8, seq)).astype("int64"),
                "label": RNG.integers(0, 2, (8, 1)).astype("int64")} for _ in range(4)]
    return loss, batches, "dir"


def wide_deep():
    """Wide&Deep CTR: 8 sparse slots (embeddings, concatenated) through a
    DNN, a wide linear part on the same ids, sigmoid cross-entropy; Adam."""
    slots, vocab, d = 8, 1000, 8
    ids = [paddle.static.data("s%d" % i, [-1, 1], "int64") for i in range(slots)]
    dense = paddle.static.data("dense", [-1, 4], "float32")
    label = paddle.static.data("label", [-1, 1], "float32")
    emb = nn.Embedding(vocab, d, sparse=True)
    deep = paddle.concat([paddle.flatten(emb(i), 1) for i in ids] + [dense], axis=1)
    for width in (32, 16):
        deep = F.relu(nn.Linear(deep.shape[1], width)(deep))
    wide_emb = nn.Embedding(vocab, 1, sparse=True)
    wide = paddle.add_n([paddle.flatten(wide_emb(i), 1) for i in ids])
    logit = nn.Linear(16, 1)(deep) + wide
    loss = paddle.mean(F.binary_cross_entropy_with_logits(logit, label))
    paddle.optimizer.Adam(0.01, lazy_mode=True).minimize(loss)  # lazy, as CTR jobs run it
    batches = []
    for _ in range(4):
        b = {"s%d" % i: RNG.integers(0, vocab, (16, 1)).astype("int64") for i in range(slots)}
        b["dense"] = RNG.standard_normal((16, 4)).astype("float32")
        b["label"] = RNG.integers(0, 2, (16, 1)).astype("float32")
        batches.append(b)
    return loss, batches, "dir"


def _text(cell):
    vocab, seq, d = 200, 12, 16
    ids = paddle.static.data("ids", [-1, seq], "int64")
    label = paddle.static.data("label", [-1, 1], "int64")
    h = nn.Embedding(vocab, d)(ids)
    rnn = (nn.LSTM if cell == "lstm" else nn.GRU)(d, 24, num_layers=2, direction="bidirect")
    out, _ = rnn(h)
    loss = F.cross_entropy(nn.Linear(48, 2)(paddle.mean(out, axis=1)), label)
    paddle.optimizer.Adam(0.01).minimize(loss)
    batches = [{"ids": RNG.integers(0, vocab, (8, seq)).astype("int64"),
                "label": RNG.integers(0, 2, (8, 1)).astype("int64")} for _ in range(4)]
    return loss, batches, "dir"


def lstm():
    """Text classifier: embeddings, a 2-layer bidirectional paddle.nn.LSTM, mean pooling; Adam."""
    return _text("lstm")


def gru():
    """As lstm, with paddle.nn.GRU."""
    return _text("gru")


def _skipgram_batches(vocab, n_batches=4, batch=32, window=2):
    """Skip-gram (center, context) pairs from a Zipf-distributed corpus."""
    p = 1.0 / np.arange(1, vocab + 1)
    corpus = RNG.choice(vocab, 2000, p=p / p.sum())
    pairs = [(corpus[i], corpus[i + o]) for i in range(window, len(corpus) - window)
             for o in range(-window, window + 1) if o != 0]
    pick = RNG.choice(len(pairs), n_batches * batch, replace=False)
    out = []
    for b in range(n_batches):
        sel = np.array([pairs[k] for k in pick[b * batch:(b + 1) * batch]], dtype="int64")
        out.append({"center": sel[:, :1].copy(), "context": sel[:, 1:].copy()})
    return out


W2V_VOCAB, W2V_DIM = 64, 16


def _nce_cost(center, context):
    """Skip-gram NCE head; parameters named so the two-trainer reference
    program below shares them."""
    emb = nn.Embedding(W2V_VOCAB, W2V_DIM, sparse=True, weight_attr=paddle.ParamAttr(name="w2v_emb"))
    x = paddle.reshape(emb(center), [-1, W2V_DIM])
    return paddle.static.nn.nce(x, context, num_total_classes=W2V_VOCAB, num_neg_samples=5,
                                param_attr=paddle.ParamAttr(name="w2v_nce_w"),
                                bias_attr=paddle.ParamAttr(name="w2v_nce_b"),
                                sampler="log_uniform", seed=11, is_sparse=True)


def _word2vec(head):
    center = paddle.static.data("center", [-1, 1], "int64")
    context = paddle.static.data("context", [-1, 1], "int64")
    if head == "nce":
        cost = _nce_cost(center, context)
    else:
        emb = paddle.reshape(nn.Embedding(W2V_VOCAB, W2V_DIM, sparse=True)(center), [-1, W2V_DIM])
        cost = nn.HSigmoidLoss(W2V_DIM, W2V_VOCAB, is_sparse=True)(emb, context)
    loss = paddle.mean(cost)
    paddle.optimizer.SGD(0.5).minimize(loss)
    return loss, _skipgram_batches(W2V_VOCAB), "dir"


def word2vec_nce_two_trainers():
    """The reference for word2vec_nce trained by 2 trainers: NCE draws each
    run's negatives afresh from its seed, so a trainer's half batch gets
    other negatives than the same rows in the whole batch. Paddle computes
    here what two trainers do: the NCE head on each half (each drawing as a
    trainer's would), the loss the mean of the halves' means, one SGD step."""
    halves = []
    for h in ("a", "b"):
        c = paddle.static.data("center_" + h, [-1, 1], "int64")
        t = paddle.static.data("context_" + h, [-1, 1], "int64")
        halves.append(paddle.mean(_nce_cost(c, t)))
    loss = (halves[0] + halves[1]) * 0.5
    paddle.optimizer.SGD(0.5).minimize(loss)
    return loss


def word2vec_nce():
    """Skip-gram word2vec: sparse embeddings, NCE (log-uniform negatives, a fixed seed); SGD."""
    return _word2vec("nce")


def word2vec_hsigmoid():
    """Skip-gram word2vec: sparse embeddings, hierarchical sigmoid (sparse W); SGD."""
    return _word2vec("hsigmoid")


MODELS = {"resnet18": resnet18, "bert": bert, "wide_deep": wide_deep, "lstm": lstm, "gru": gru,
          "word2vec_nce": word2vec_nce, "word2vec_hsigmoid": word2vec_hsigmoid}
