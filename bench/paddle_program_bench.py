#!/usr/bin/env python3
"""Oar vs PaddlePaddle on the same Paddle-written program (issue 17's target).

Writes a Fashion-MNIST MLP with paddle.static (784-256relu-128relu-10, softmax
cross-entropy, accuracy, Adam 1e-3: the shape of Oar's fashion_mlp and of
../shared/peers/paddle_ps.py), saves its programs, then in alternating
rounds trains one epoch at batch 128 with Paddle's static Executor (CPU) and
with `oar train --program` on the very same program files, and prints each
side's examples/s (median of the rounds) and the ratio (target: Oar >= 2.0x).

Where paddlepaddle is not importable (pip install paddlepaddle==2.6.2
"numpy<2" "protobuf>=4.25,<5"), Paddle is skipped and Oar alone trains the
committed Paddle-written program tests/testdata/paddle/fashion_mlp.

  python3 bench/paddle_program_bench.py [--oar build/cli/oar] [--rounds 3]
"""
import zlib, gzip  # noqa: F401,E401  libpaddle exports its own zlib: import ours first
import argparse
import os
import re
import statistics
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = "/usr/share/datasets/fashion-mnist"
BATCH = 128


def idx(path):
    import numpy as np
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = struct.unpack(">I", raw[:4])[0] & 0xFF
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def write_program(paddle, out):
    main, startup = paddle.static.Program(), paddle.static.Program()
    main.random_seed = startup.random_seed = 1
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [-1, 784], "float32")
        label = paddle.static.data("label", [-1, 1], "int64")
        h = paddle.static.nn.fc(x, 256, activation="relu")
        h = paddle.static.nn.fc(h, 128, activation="relu")
        logits = paddle.static.nn.fc(h, 10)
        loss = paddle.mean(paddle.nn.functional.cross_entropy(logits, label))
        acc = paddle.static.accuracy(paddle.nn.functional.softmax(logits), label)
        paddle.optimizer.Adam(0.001).minimize(loss)
    for name, prog in (("main.pb", main), ("startup.pb", startup)):
        with open(os.path.join(out, name), "wb") as f:
            f.write(prog.desc.serialize_to_string())
    return loss.name, acc.name


def paddle_epoch(paddle, out, loss_name, xs, ys, threads):
    """One epoch with Paddle's Executor on the saved program, its math
    library on `threads` threads (Paddle's default is 1); examples/s."""
    paddle.base.core.set_num_threads(threads)
    with open(os.path.join(out, "main.pb"), "rb") as f:
        main = paddle.static.Program.parse_from_string(f.read())
    with open(os.path.join(out, "startup.pb"), "rb") as f:
        startup = paddle.static.Program.parse_from_string(f.read())
    exe = paddle.static.Executor(paddle.CPUPlace())
    scope = paddle.static.Scope()
    with paddle.static.scope_guard(scope):
        exe.run(startup)
        nb = len(xs) // BATCH
        t0 = time.perf_counter()
        for b in range(nb):  # the loss fetched on the last batch only, as peers/paddle_ps.py does (Paddle's best case)
            exe.run(main, feed={"x": xs[b * BATCH:(b + 1) * BATCH], "label": ys[b * BATCH:(b + 1) * BATCH]},
                    fetch_list=[loss_name] if b == nb - 1 else [])
        return nb * BATCH / (time.perf_counter() - t0)


def oar_epoch(oar, out, loss_name, acc_name, params=None, threads=None):
    cmd = [oar, "train", "--program", os.path.join(out, "main.pb"), "--startup", os.path.join(out, "startup.pb"),
           "--feed_names", "x,label", "--loss_name", loss_name, "--fetch", acc_name, "--epochs", "1",
           "--batch_size", str(BATCH)]
    if params:
        cmd += ["--params", params]
    # Importing paddle sets OMP_NUM_THREADS=1 in this process's environment;
    # the thread count Oar gets is set here, explicitly, instead.
    env = dict(os.environ)
    env.pop("OMP_NUM_THREADS", None)
    if threads:
        env["OPENBLAS_NUM_THREADS"] = str(threads)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit("oar train failed:\n" + r.stdout + r.stderr)
    m = re.search(r"\(([0-9.]+) examples/s\)", r.stdout)
    acc = re.search(r"test_%s=([0-9.]+)" % re.escape(acc_name), r.stdout)
    return float(m.group(1)), float(acc.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--oar", default=os.path.join(ROOT, "build", "cli", "oar"))
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    try:
        import paddle
    except ImportError:
        paddle = None
    if paddle is None:
        fixture = os.path.join(ROOT, "tests", "testdata", "paddle", "fashion_mlp")
        rates = [oar_epoch(args.oar, fixture, "mean_1.tmp_0", "accuracy_0.tmp_2", os.path.join(fixture, "params"))
                 for _ in range(args.rounds)]
        print("paddle_program_bench: paddlepaddle is not installed: Paddle skipped")
        print("  oar train --program (Paddle-written fashion_mlp fixture, 784-32-10 Momentum): %.0f examples/s"
              % statistics.median([r for r, _ in rates]))
        return
    import numpy as np
    paddle.enable_static()
    xs = (idx(os.path.join(DATA, "train-images-idx3-ubyte.gz")).reshape(-1, 784).astype(np.float32) / 255.0)
    ys = idx(os.path.join(DATA, "train-labels-idx1-ubyte.gz")).astype(np.int64).reshape(-1, 1)
    with tempfile.TemporaryDirectory() as out:
        loss_name, acc_name = write_program(paddle, out)
        print("paddle_program_bench: one Paddle-written program (paddle.static MLP 784-256-128-10, Adam 1e-3), "
              "1 epoch of Fashion-MNIST at batch %d, median of %d alternating rounds" % (BATCH, args.rounds))
        for threads in sorted({1, os.cpu_count() or 1}):
            ours, theirs, accs = [], [], []
            for _ in range(args.rounds):
                theirs.append(paddle_epoch(paddle, out, loss_name, xs, ys, threads))
                rate, acc = oar_epoch(args.oar, out, loss_name, acc_name, threads=threads)
                ours.append(rate)
                accs.append(acc)
            o, p = statistics.median(ours), statistics.median(theirs)
            print(" %d math thread(s) each%s:" % (threads, " (Paddle's default)" if threads == 1 else ""))
            print("  PaddlePaddle %s static Executor (CPU): %.0f examples/s  (rounds: %s)"
                  % (paddle.__version__, p, ", ".join("%.0f" % v for v in theirs)))
            print("  oar train --program, same files:       %.0f examples/s  (rounds: %s; test accuracy %.3f)"
                  % (o, ", ".join("%.0f" % v for v in ours), statistics.median(accs)))
            print("  Oar / Paddle: %.2fx (target >= 2.0x)" % (o / p))


if __name__ == "__main__":
    main()
