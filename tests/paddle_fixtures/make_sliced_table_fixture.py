#!/usr/bin/env python3
"""A Paddle-written program with an embedding big enough to be sliced.

PaddlePaddle 2.6.2's static graph, as a user writes it: int64 ids -> an
is_sparse embedding of 20000 x 8 (160 000 floats: the DistributeTranspiler
cuts it into a block per pserver) -> fc(1) -> square error -> mean, SGD
0.5. Writes tests/testdata/paddle/sliced_table/ (main.pb, startup.pb, the
initial parameters as save_persistables files via paddle.static.save and
scripts/pdparams_to_fluid.py, Paddle's 20 losses, step i on batch i % 4 of
16, also as batch_<i>.<feed> LoDTensor files) and the examples under tests/testdata/paddle_data/sliced_table/npy/.
Not run by CI. Run with the paddle venv's python:

  python3 tests/paddle_fixtures/make_sliced_table_fixture.py
"""
import gzip  # noqa: F401 -- before paddle: its libpaddle exports its own zlib
import os
import subprocess
import sys
import tempfile

import numpy as np
import paddle
from paddle.base import core

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
out = os.path.join(root, "tests/testdata/paddle/sliced_table")
data = os.path.join(root, "tests/testdata/paddle_data/sliced_table/npy")
os.makedirs(out, exist_ok=True)
os.makedirs(data, exist_ok=True)

paddle.enable_static()
main, startup = paddle.static.Program(), paddle.static.Program()
main.random_seed = startup.random_seed = 7
with paddle.static.program_guard(main, startup):
    ids = paddle.static.data("ids", [-1, 1], "int64")
    label = paddle.static.data("label", [-1, 1], "float32")
    emb = paddle.reshape(paddle.static.nn.embedding(ids, size=[20000, 8], is_sparse=True), [-1, 8])
    pred = paddle.static.nn.fc(emb, 1)
    loss = paddle.mean(paddle.nn.functional.square_error_cost(pred, label))
    paddle.optimizer.SGD(0.5).minimize(loss)
with open(os.path.join(out, "main.pb"), "wb") as f:
    f.write(main.desc.serialize_to_string())
with open(os.path.join(out, "startup.pb"), "wb") as f:
    f.write(startup.desc.serialize_to_string())
exe = paddle.static.Executor(paddle.CPUPlace())
exe.run(startup)
with tempfile.TemporaryDirectory() as tmp:
    paddle.static.save(main, os.path.join(tmp, "model"))
    subprocess.check_call([sys.executable, os.path.join(root, "scripts/pdparams_to_fluid.py"),
                           os.path.join(tmp, "model"), "--out", os.path.join(out, "params")])

rng = np.random.RandomState(3)
x = rng.randint(0, 20000, size=(64, 1)).astype("int64")
x[::4] = rng.randint(9990, 10010, size=(16, 1))  # repeated rows on both sides of the blocks' cut
y = rng.rand(64, 1).astype("float32")
np.save(os.path.join(data, "ids.npy"), x)
np.save(os.path.join(data, "label.npy"), y)
for b in range(4):  # the batches as the other fixtures hold them (core.save_lod_tensor)
    for feed, arr in (("ids", x), ("label", y)):
        t = core.LoDTensor()
        t.set(arr[b * 16:(b + 1) * 16], core.CPUPlace())
        core.save_lod_tensor(t, os.path.join(out, "batch_%d.%s" % (b, feed)))
losses = []
for step in range(20):
    b = step % 4
    (l,) = exe.run(main, feed={"ids": x[b * 16:(b + 1) * 16], "label": y[b * 16:(b + 1) * 16]}, fetch_list=[loss])
    losses.append(float(np.array(l).reshape(-1)[0]))
with open(os.path.join(out, "losses.txt"), "w") as f:
    f.write("".join("%.9g\n" % v for v in losses))
with open(os.path.join(out, "meta.txt"), "w") as f:
    f.write("feeds ids,label\nloss %s\nsteps 20\nbatches 4\nparams dir\npaddle %s\n" % (loss.name, paddle.__version__))
print(loss.name, losses)
