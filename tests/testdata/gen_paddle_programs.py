"""Regenerates paddle262_mlp_{main,startup}.pb: the fashion_mlp-shaped network
(784-256 relu, 256-10 softmax) as PaddlePaddle 2.6.2's static graph builds and
serializes it. Not run by CI; the .pb files are committed fixtures.

    python3 -m venv /tmp/pd && /tmp/pd/bin/pip install paddlepaddle==2.6.2
    /tmp/pd/bin/python tests/testdata/gen_paddle_programs.py
"""
import os

import paddle

paddle.enable_static()
here = os.path.dirname(os.path.abspath(__file__))
main, startup = paddle.static.Program(), paddle.static.Program()
with paddle.static.program_guard(main, startup):
    x = paddle.static.data("x", [-1, 784], "float32")
    label = paddle.static.data("label", [-1, 1], "int64")
    h = paddle.static.nn.fc(x, 256, activation="relu")
    pred = paddle.static.nn.fc(h, 10, activation="softmax")
    loss = paddle.mean(paddle.nn.functional.cross_entropy(pred, label, use_softmax=False))
    paddle.optimizer.SGD(0.01).minimize(loss)
with open(os.path.join(here, "paddle262_mlp_main.pb"), "wb") as f:
    f.write(main.desc.serialize_to_string())
with open(os.path.join(here, "paddle262_mlp_startup.pb"), "wb") as f:
    f.write(startup.desc.serialize_to_string())
