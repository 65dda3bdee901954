#!/usr/bin/env python3
"""Writes the Paddle-written fixtures Oar's tests train (issue 17).

For each model, with PaddlePaddle 2.6's static-graph API exactly as a user
writes it, into tests/testdata/paddle/<model>/:
  main.pb, startup.pb   program.desc.serialize_to_string()
  params/ or params     the initial persistables after the startup program,
                        as paddle.distributed.io.save_persistables writes them
                        (per-variable files, or one combined file)
  batch_<i>.<feed>      the fixed input batches, LoDTensor files
                        (core.save_lod_tensor); step s feeds batch s % BATCHES
  losses.txt            Paddle's own loss after each of STEPS steps
  meta.txt              feed names, loss name, steps, batches
(fashion_mlp: the programs and its parameters after three steps on random
data only, for the README's `oar train --program` example on Fashion-MNIST;
the same parameters also as paddle.static.save's model.pdparams/.pdopt.)

Run where paddlepaddle is importable (pip install paddlepaddle==2.6.2
"numpy<2" "protobuf>=4.25,<5"); the outputs are committed, so the tests
need no Paddle.
"""
import zlib, gzip  # noqa: F401,E401  libpaddle exports its own zlib: import ours first
import functools
import os
import shutil
import sys

import numpy as np
import paddle
import paddle.distributed.io as dio
from paddle.base import core

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_zoo  # noqa: E402
import fluid1x_zoo  # noqa: E402

STEPS, BATCHES = 20, 4
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata", "paddle")


def mlp():
    x = paddle.static.data("x", [-1, 64], "float32")
    label = paddle.static.data("label", [-1, 1], "int64")
    h = paddle.static.nn.fc(x, 32, activation="relu")
    logits = paddle.static.nn.fc(h, 10)
    loss = paddle.mean(paddle.nn.functional.cross_entropy(logits, label))
    paddle.static.accuracy(paddle.nn.functional.softmax(logits), label)
    paddle.optimizer.Adam(0.01).minimize(loss)
    rng = np.random.default_rng(1)
    batches = [{"x": rng.standard_normal((16, 64)).astype("float32"),
                "label": rng.integers(0, 10, (16, 1)).astype("int64")} for _ in range(BATCHES)]
    return loss, batches, "dir"


def cnn():
    img = paddle.static.data("img", [-1, 1, 12, 12], "float32")
    label = paddle.static.data("label", [-1, 1], "int64")
    conv = paddle.static.nn.conv2d(img, num_filters=4, filter_size=3, padding=1, act="relu")
    pool = paddle.nn.functional.max_pool2d(conv, kernel_size=2, stride=2)
    flat = paddle.flatten(pool, start_axis=1)
    logits = paddle.static.nn.fc(flat, 10)
    loss = paddle.mean(paddle.nn.functional.cross_entropy(logits, label))
    paddle.static.accuracy(paddle.nn.functional.softmax(logits), label)
    paddle.optimizer.Momentum(0.05, momentum=0.9).minimize(loss)
    rng = np.random.default_rng(2)
    batches = [{"img": rng.standard_normal((8, 1, 12, 12)).astype("float32"),
                "label": rng.integers(0, 10, (8, 1)).astype("int64")} for _ in range(BATCHES)]
    return loss, batches, "combined"


def embedding():
    ids = paddle.static.data("ids", [-1, 4], "int64")
    label = paddle.static.data("label", [-1, 1], "int64")
    emb = paddle.static.nn.embedding(ids, size=[100, 8], is_sparse=True)
    pooled = paddle.mean(emb, axis=1)
    logits = paddle.static.nn.fc(pooled, 2)
    loss = paddle.mean(paddle.nn.functional.cross_entropy(logits, label))
    paddle.optimizer.SGD(0.5).minimize(loss)
    rng = np.random.default_rng(3)
    batches = [{"ids": rng.integers(0, 100, (16, 4)).astype("int64"),
                "label": rng.integers(0, 2, (16, 1)).astype("int64")} for _ in range(BATCHES)]
    return loss, batches, "dir"


def zoo():
    """The rest of the ops paddle.static's standard API emits, in one network."""
    img = paddle.static.data("img", [-1, 2, 6, 6], "float32")
    label = paddle.static.data("label", [-1, 1], "int64")
    conv = paddle.static.nn.conv2d(img, num_filters=3, filter_size=3, padding=1, bias_attr=False)
    bn = paddle.static.nn.batch_norm(conv, act="relu")
    pool = paddle.nn.functional.avg_pool2d(bn, kernel_size=2, stride=2)
    drop = paddle.nn.functional.dropout(pool, p=0.0)
    t = paddle.transpose(drop, perm=[0, 2, 3, 1])
    flat = paddle.reshape(t, [-1, 27])
    w = paddle.static.create_parameter([27, 5], "float32", name="zoo_w")
    b = paddle.static.create_parameter([5], "float32", name="zoo_b", is_bias=True)
    logits = paddle.add(paddle.matmul(flat, w), b)
    scale = paddle.full([1], 0.5, "float32")
    logits = paddle.multiply(logits, scale)
    ce = paddle.nn.functional.cross_entropy(logits, label, reduction="none")
    loss = paddle.sum(ce) / 8.0
    paddle.optimizer.Adam(0.01).minimize(loss)
    rng = np.random.default_rng(4)
    batches = [{"img": rng.standard_normal((8, 2, 6, 6)).astype("float32"),
                "label": rng.integers(0, 5, (8, 1)).astype("int64")} for _ in range(BATCHES)]
    return loss, batches, "dir"


def probs():
    """cross_entropy over probabilities (use_softmax=False) and dropout, as paddle.static writes them."""
    x = paddle.static.data("x", [-1, 10], "float32")
    label = paddle.static.data("label", [-1, 1], "int64")
    h = paddle.static.nn.fc(x, 12, activation="tanh")
    h = paddle.nn.functional.dropout(h, p=0.3, training=False)
    h = paddle.nn.functional.dropout(h, p=0.2, training=False, mode="downscale_in_infer")
    p = paddle.nn.functional.softmax(paddle.static.nn.fc(h, 4))
    loss = paddle.mean(paddle.nn.functional.cross_entropy(p, label, use_softmax=False))
    paddle.optimizer.SGD(0.5).minimize(loss)
    rng = np.random.default_rng(5)
    batches = [{"x": rng.standard_normal((16, 10)).astype("float32"),
                "label": rng.integers(0, 4, (16, 1)).astype("int64")} for _ in range(BATCHES)]
    return loss, batches, "dir"


def fluid16():
    """Ops that Fluid 1.6-2.0's fluid.layers wrote and paddle.static no longer does
    (cross_entropy2), appended with Paddle's own block.append_op; Paddle's kernels
    compute the recorded losses."""
    x = paddle.static.data("x", [-1, 10], "float32")
    label = paddle.static.data("label", [-1, 1], "int64")
    p = paddle.nn.functional.softmax(paddle.static.nn.fc(x, 4))
    block = paddle.static.default_main_program().global_block()
    y = block.create_var(name="ce2.y", dtype="float32")
    xshape = block.create_var(name="ce2.xshape", dtype="float32")
    match = block.create_var(name="ce2.match_x", dtype="float32")
    block.append_op(type="cross_entropy2", inputs={"X": [p], "Label": [label]},
                    outputs={"Y": [y], "XShape": [xshape], "MatchX": [match]}, attrs={"ignore_index": -100})
    loss = paddle.mean(y)
    paddle.optimizer.SGD(0.5).minimize(loss)
    rng = np.random.default_rng(6)
    batches = [{"x": rng.standard_normal((16, 10)).astype("float32"),
                "label": rng.integers(0, 4, (16, 1)).astype("int64")} for _ in range(BATCHES)]
    return loss, batches, "dir"


def adaptive():
    """Adagrad on the first layer and RMSProp (centered, momentum) on the second:
    each optimizer minimizes the loss over its own parameters."""
    x = paddle.static.data("x", [-1, 12], "float32")
    label = paddle.static.data("label", [-1, 1], "int64")
    h = paddle.static.nn.fc(x, 16, activation="relu", name="first")
    logits = paddle.static.nn.fc(h, 3, name="second")
    loss = paddle.mean(paddle.nn.functional.cross_entropy(logits, label))
    params = paddle.static.default_main_program().global_block().all_parameters()
    first = [p for p in params if p.name.startswith("first")]
    second = [p for p in params if p.name.startswith("second")]
    grads = paddle.static.append_backward(loss, parameter_list=first + second)
    grads = dict((p.name, (p, g)) for p, g in grads)
    paddle.optimizer.Adagrad(0.1).apply_gradients([grads[p.name] for p in first])
    paddle.optimizer.RMSProp(0.01, momentum=0.5, centered=True).apply_gradients([grads[p.name] for p in second])
    rng = np.random.default_rng(8)
    batches = [{"x": rng.standard_normal((16, 12)).astype("float32"),
                "label": rng.integers(0, 3, (16, 1)).astype("int64")} for _ in range(BATCHES)]
    return loss, batches, "dir"


def axis():
    """Softmax cross-entropy over a middle axis (axis=1, classes on it) and
    matmul_v2 with 1-D operands on either side."""
    x = paddle.static.data("x", [-1, 4, 6], "float32")
    label = paddle.static.data("label", [-1, 1, 6], "int64")
    w = paddle.static.create_parameter([6, 6], "float32", name="axis_w")
    v = paddle.static.create_parameter([6], "float32", name="axis_v")
    h = paddle.tanh(paddle.matmul(x, w))  # [-1, 4, 6]: 4 classes on axis 1
    ce = paddle.nn.functional.cross_entropy(h, label, axis=1)
    row = paddle.matmul(h, v)  # [-1, 4]: Y a vector
    col = paddle.matmul(v, w)  # [6]: X a vector
    loss = ce + 0.1 * paddle.mean(row) + 0.1 * paddle.mean(col)
    paddle.optimizer.SGD(0.5).minimize(loss)
    rng = np.random.default_rng(10)
    batches = [{"x": rng.standard_normal((8, 4, 6)).astype("float32"),
                "label": rng.integers(0, 4, (8, 1, 6)).astype("int64")} for _ in range(BATCHES)]
    return loss, batches, "dir"


def fashion_mlp():
    """For `oar train --program` on Fashion-MNIST (README); programs and initial params only."""
    x = paddle.static.data("x", [-1, 784], "float32")
    label = paddle.static.data("label", [-1, 1], "int64")
    h = paddle.static.nn.fc(x, 32, activation="relu")
    logits = paddle.static.nn.fc(h, 10)
    loss = paddle.mean(paddle.nn.functional.cross_entropy(logits, label))
    paddle.static.accuracy(paddle.nn.functional.softmax(logits), label)
    paddle.optimizer.Momentum(0.05, momentum=0.9).minimize(loss)  # an accumulator per parameter
    return loss, None, "combined"


def write(name, build, reference=None):
    """reference: rewrites the serialized main program into the one whose
    losses Paddle records (the program saved stays Paddle's own)."""
    out = os.path.join(OUT, name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    main, startup = paddle.static.Program(), paddle.static.Program()
    main.random_seed = startup.random_seed = 7
    with paddle.static.program_guard(main, startup):
        loss, batches, params = build()
    run_main = main
    if reference is not None:
        run_main = paddle.static.Program.parse_from_string(reference(main.desc.serialize_to_string()))
    with open(os.path.join(out, "main.pb"), "wb") as f:
        f.write(main.desc.serialize_to_string())
    with open(os.path.join(out, "startup.pb"), "wb") as f:
        f.write(startup.desc.serialize_to_string())
    exe = paddle.static.Executor(paddle.CPUPlace())
    scope = paddle.static.Scope()
    with paddle.static.scope_guard(scope):
        exe.run(startup)
        if batches is None:
            # Three steps on random data first, so the saved parameters differ
            # from anything a startup program draws (a test that loads them
            # then shows that they were loaded).
            rng = np.random.default_rng(9)
            for _ in range(3):
                exe.run(main, feed={"x": rng.standard_normal((32, 784)).astype("float32"),
                                    "label": rng.integers(0, 10, (32, 1)).astype("int64")})
        if params == "dir":
            dio.save_persistables(exe, os.path.join(out, "params"), main)
        else:
            dio.save_persistables(exe, out, main, filename="params")
        if batches is None:
            # The same values as paddle.static.save writes them (pickled
            # .pdparams/.pdopt), for scripts/pdparams_to_fluid.py's test.
            paddle.static.save(main, os.path.join(out, "model"))
            os.remove(os.path.join(out, "model.pdmodel"))  # main.pb already
            with open(os.path.join(out, "meta.txt"), "w") as f:
                f.write("loss %s\nparams %s\npaddle %s\n" % (loss.name, params, paddle.__version__))
            print("%s: %d ops (programs and params after 3 steps)" % (name, len(main.global_block().ops)))
            return
        feeds = list(batches[0].keys())
        fed = []
        for i, batch in enumerate(batches):
            fed.append({})
            for feed, value in batch.items():
                t = core.LoDTensor()
                lod = None
                if isinstance(value, tuple):  # (values, level-1 offsets): a LoD feed
                    value, lod = value
                t.set(value, paddle.CPUPlace())
                if lod is not None:
                    t.set_lod([lod])
                core.save_lod_tensor(t, os.path.join(out, "batch_%d.%s" % (i, feed)))
                fed[-1][feed] = t
        losses = []
        for step in range(STEPS):
            (v,) = exe.run(run_main, feed=fed[step % BATCHES], fetch_list=[loss.name])
            losses.append(float(np.asarray(v).reshape(-1)[0]))
    with open(os.path.join(out, "losses.txt"), "w") as f:
        f.write("".join("%.9g\n" % v for v in losses))
    with open(os.path.join(out, "meta.txt"), "w") as f:
        f.write("feeds %s\nloss %s\nsteps %d\nbatches %d\nparams %s\npaddle %s\n"
                % (",".join(feeds), loss.name, STEPS, BATCHES, params, paddle.__version__))
    print("%s: %d ops; losses %.4f -> %.4f" % (name, len(main.global_block().ops), losses[0], losses[-1]))


def write_two_trainer_losses(name, build):
    """losses_2trainers.txt for fixture `name`: what 2 sync trainers, each
    on half of every batch, record (the mean of their losses), computed by
    Paddle with `build`'s program from the fixture's saved parameters."""
    out = os.path.join(OUT, name)
    main, startup = paddle.static.Program(), paddle.static.Program()
    main.random_seed = startup.random_seed = 7
    with paddle.static.program_guard(main, startup):
        loss = build()
    exe = paddle.static.Executor(paddle.CPUPlace())
    scope = paddle.static.Scope()
    feeds, batches = [], []
    for i in range(BATCHES):
        b = {}
        for f in ("center", "context"):
            t = core.LoDTensor()
            core.load_lod_tensor(t, os.path.join(out, "batch_%d.%s" % (i, f)))
            v = np.array(t)
            half = v.shape[0] // 2
            b[f + "_a"], b[f + "_b"] = v[:half], v[half:]
        batches.append(b)
    with paddle.static.scope_guard(scope):
        exe.run(startup)
        paddle.static.io.load_vars(exe, os.path.join(out, "params"), main, vars=main.all_parameters())
        losses = [float(np.asarray(exe.run(main, feed=batches[s % BATCHES], fetch_list=[loss])[0]).reshape(-1)[0])
                  for s in range(STEPS)]
    with open(os.path.join(out, "losses_2trainers.txt"), "w") as f:
        f.write("".join("%.9g\n" % v for v in losses))
    print("%s: 2-trainer losses %.4f -> %.4f" % (name, losses[0], losses[-1]))


def main():
    paddle.enable_static()
    paddle.set_flags({"FLAGS_use_mkldnn": False})
    models = {"mlp": mlp, "cnn": cnn, "embedding": embedding, "zoo": zoo, "probs": probs, "fluid16": fluid16, "adaptive": adaptive, "axis": axis, "fashion_mlp": fashion_mlp}
    models.update(model_zoo.MODELS)  # whole models (issue 20)
    for r in fluid1x_zoo.RELEASES:  # Fluid 1.x layouts (issue 20, item 5)
        for net in ("ctr_dnn", "word2vec"):
            models["fluid%s_%s" % (r.replace(".", ""), net)] = functools.partial(getattr(fluid1x_zoo, net), r)
    for name in sys.argv[1:] or models:
        fluid1x = name.startswith("fluid1") and "_" in name
        release = name[5] + "." + name[6] if fluid1x else None
        # Fluid 1.3-1.6's Adam (scale ops, no aliased beta powers): the losses
        # recorded are those of its semantics, run by Paddle 2.6's kernels.
        old_adam = fluid1x and release in ("1.3", "1.5", "1.6")
        write(name, models[name], fluid1x_zoo.fluid16_adam_reference if old_adam else None)
        if fluid1x:
            changed = fluid1x_zoo.as_release(os.path.join(OUT, name), release)
            print("%s: %d ops rewritten to Fluid %s's layout" % (name, changed, release))
        if name == "word2vec_nce":
            write_two_trainer_losses(name, model_zoo.word2vec_nce_two_trainers)


if __name__ == "__main__":
    main()
