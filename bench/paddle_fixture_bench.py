#!/usr/bin/env python3
"""Oar vs PaddlePaddle 2.6.2 on the whole-model fixtures (issue 20, item 7).

For each fixture under tests/testdata/paddle/ (programs written by Paddle,
Paddle's initial values, fixed batches), trains the very same program files
from the same values on the same batches, each tiled --repeat times, for
--steps steps after 3 warm-up steps, one thread each: PaddlePaddle's static
Executor in this process, Oar through bench/fixture_train_bench. Prints each
side's examples/s (median of --rounds alternating rounds) and the ratio
(target: Oar >= 2.0x). Where paddle is not importable, Oar alone runs.

  python3 bench/paddle_fixture_bench.py [--bin build/bench/fixture_train_bench]
      [--models resnet18,bert,...] [--repeat 8] [--steps 40] [--rounds 3]
"""
import os

for _v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_v] = "1"  # one thread each side: before numpy or paddle load a BLAS

import zlib, gzip  # noqa: F401,E401,E402  libpaddle exports its own zlib: import ours first
import argparse  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "testdata", "paddle")
MODELS = ("resnet18", "bert", "wide_deep", "lstm", "gru", "word2vec_nce", "word2vec_hsigmoid",
          "fluid18_ctr_dnn", "fluid18_word2vec")  # Paddle 2.6 runs Fluid 1.8 layouts, not older ones


def meta(model):
    with open(os.path.join(FIXTURES, model, "meta.txt")) as f:
        return dict(line.rstrip("\n").split(" ", 1) for line in f if " " in line)


def tile(core, paddle, t, r):
    import numpy as np
    v = np.array(t)
    out = core.LoDTensor()
    out.set(np.concatenate([v] * r, axis=0), paddle.CPUPlace())
    lod = t.lod()
    if lod:
        off, rows, level = lod[0], v.shape[0], [0]
        for k in range(r):
            level.extend(o + k * rows for o in off[1:])
        out.set_lod([level])
    return out


def paddle_rate(paddle, model, repeat, steps):
    from paddle.base import core
    import paddle.distributed.io as dio
    import numpy as np
    d = os.path.join(FIXTURES, model)
    m = meta(model)
    main = paddle.static.Program.parse_from_string(open(os.path.join(d, "main.pb"), "rb").read())
    startup = paddle.static.Program.parse_from_string(open(os.path.join(d, "startup.pb"), "rb").read())
    exe = paddle.static.Executor(paddle.CPUPlace())
    scope = paddle.static.Scope()
    feeds = m["feeds"].split(",")
    with paddle.static.scope_guard(scope):
        exe.run(startup)
        if m["params"] == "dir":
            dio.load_persistables(exe, os.path.join(d, "params"), main)
        else:
            dio.load_persistables(exe, d, main, filename="params")
        batches, examples = [], 0
        for b in range(int(m["batches"])):
            batch = {}
            for f in feeds:
                t = core.LoDTensor()
                core.load_lod_tensor(t, os.path.join(d, "batch_%d.%s" % (b, f)))
                batch[f] = tile(core, paddle, t, repeat)
                if b == 0 and not examples and not t.lod():
                    examples = np.array(batch[f]).shape[0]
            batches.append(batch)
        for s in range(3):
            exe.run(main, feed=batches[s % len(batches)], fetch_list=[m["loss"]])
        start = time.perf_counter()
        for s in range(steps):
            exe.run(main, feed=batches[s % len(batches)], fetch_list=[m["loss"]])
        return examples * steps / (time.perf_counter() - start)


def oar_rate(binary, model, repeat, steps):
    out = subprocess.run([binary, "--dir", os.path.join(FIXTURES, model), "--repeat", str(repeat),
                          "--steps", str(steps)], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("%s: %s" % (model, out.stderr.strip()))
    return float(out.stdout.split()[2])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bench", "fixture_train_bench"))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--repeat", type=int, default=8, help="times each fixture batch is tiled")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    try:
        import paddle
        paddle.enable_static()
        paddle.set_flags({"FLAGS_use_mkldnn": False})
    except ImportError:
        paddle = None
        print("paddle is not importable: Oar alone (pip install paddlepaddle==2.6.2 \"numpy<2\")")
    print("%-18s %12s %12s %7s" % ("model", "paddle ex/s", "oar ex/s", "ratio"))
    worst = None
    for model in args.models.split(","):
        p_rates, o_rates = [], []
        for _ in range(args.rounds):
            if paddle is not None:
                p_rates.append(paddle_rate(paddle, model, args.repeat, args.steps))
            o_rates.append(oar_rate(args.bin, model, args.repeat, args.steps))
        o = statistics.median(o_rates)
        if paddle is None:
            print("%-18s %12s %12.1f %7s" % (model, "-", o, "-"))
            continue
        p = statistics.median(p_rates)
        worst = o / p if worst is None else min(worst, o / p)
        print("%-18s %12.1f %12.1f %6.2fx" % (model, p, o, o / p), flush=True)
    if worst is not None:
        print("lowest ratio %.2fx (target >= 2.0x): %s" % (worst, "met" if worst >= 2.0 else "NOT met"))


if __name__ == "__main__":
    main()
