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


MODELS = {"resnet18": resnet18, "bert": bert, "wide_deep": wide_deep, "lstm": lstm, "gru": gru}
