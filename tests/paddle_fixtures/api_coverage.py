#!/usr/bin/env python3
"""Writes the API coverage fixtures (issue 48, item 4): for each entry of the
reference's API list (api_list.txt) in the sections paddle, paddle.nn,
paddle.nn.functional and fluid.layers, a tiny static program built with
PaddlePaddle 2.6.2 as its users call the API (api_cases_*.py), and what
Paddle computes for it on random inputs.

Into tests/testdata/paddle_api/:
  cases.txt            one line per list entry: section, name, and either
                       `case <dir>`, `skip <why>` or `paddle-fails <why>`
  <dir>/main.pb        the forward, a loss (sum of each float output
                       squared) and append_backward's gradient ops
  <dir>/startup.pb     its startup program
  <dir>/params         the persistables after startup (one combined file)
  <dir>/data           the fed inputs, then Paddle's fetched values, as
                       LoDTensors one after another, in meta.txt's order
  <dir>/meta.txt       `feed NAME`, `fetch NAME fwd|grad|shape` lines

Oar's api_coverage_test replays every case and writes the table
docs/paddle-api-coverage.md (scripts/api-coverage.sh). Run this where
paddlepaddle 2.6.2 is importable (see make_fixtures.py); the outputs are
committed, so the tests need no Paddle.
"""
import zlib, gzip  # noqa: F401,E401  libpaddle exports its own zlib: import ours first
import io
import os
import shutil
import sys
import tempfile
import traceback

import numpy as np
import paddle
import paddle.distributed.io as dio
from paddle.base import core

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import api_case  # noqa: E402
import api_cases_paddle  # noqa: E402,F401
import api_cases_nn  # noqa: E402,F401
import api_cases_fluid  # noqa: E402,F401
import api_cases_schedule  # noqa: E402,F401
import api_cases_control  # noqa: E402,F401

OUT = os.path.join(HERE, "..", "testdata", "paddle_api")
SECTIONS = ("paddle", "paddle.nn", "paddle.nn.functional", "fluid.layers")
FLOATS = (paddle.float32, paddle.float64)


def flatten(x):
    if isinstance(x, (list, tuple)):
        return [y for e in x for y in flatten(e)]
    return [x] if x is not None else []


def lod_tensor(value, lod):
    t = core.LoDTensor()
    t.set(value, paddle.CPUPlace())
    if lod:
        t.set_lod([lod])
    return t


def append_tensor(out, t):
    with tempfile.NamedTemporaryFile(delete=False) as f:
        path = f.name
    core.save_lod_tensor(t, path)
    with open(path, "rb") as f:
        out.write(f.read())
    os.unlink(path)


def build(c):
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        ins = []
        for i, t in enumerate(c.ins):
            v = paddle.static.data(f"in{i}", t.shape, t.dtype, lod_level=1 if t.lod else 0)
            if t.dtype in ("float32", "float64") and t.grad and c.grad and not c.random:
                v.stop_gradient = False
            ins.append(v)
        outs = flatten(c.fn(*ins))
        grads = []
        float_outs = [o for o in outs if o.dtype in FLOATS]
        if c.grad and not c.random and float_outs:
            loss = None
            for o in float_outs:
                term = paddle.sum(o * o)
                loss = term if loss is None else loss + term
            paddle.static.append_backward(loss)
            block = main.global_block()
            wrt = [v for v in ins if not v.stop_gradient] + list(main.all_parameters())
            grads = [v.name + "@GRAD" for v in wrt if block.has_var(v.name + "@GRAD")]
    return main, startup, ins, outs, grads


def write_case(c, d):
    paddle.seed(c.seed() % (1 << 31))
    rng = np.random.default_rng(c.seed())
    main, startup, ins, outs, grads = build(c)
    exe = paddle.static.Executor(paddle.CPUPlace())
    scope = paddle.static.Scope()
    with paddle.static.scope_guard(scope):
        exe.run(startup)
        os.makedirs(d)
        if any(v.persistable for v in main.list_vars()):
            dio.save_persistables(exe, d, main, filename="params")
        feeds = {}
        for v, t in zip(ins, c.ins):
            feeds[v.name] = lod_tensor(t.draw(rng), t.lod)
        # Recorded before the run: a loop may write its result into a fed
        # variable (while_loop's state), and Paddle's feed shares its memory.
        fed = io.BytesIO()
        for name in feeds:
            append_tensor(fed, feeds[name])
        fetch = [o.name for o in outs] + grads
        got = exe.run(main, feed=feeds, fetch_list=fetch, return_numpy=False)
    for prog, name in ((main, "main.pb"), (startup, "startup.pb")):
        for block in prog.blocks:  # the Python stack of each op: 90% of the bytes, no meaning
            for o in block.ops:
                o.desc.remove_attr("op_callstack")
        with open(os.path.join(d, name), "wb") as f:
            f.write(prog.desc.serialize_to_string())
    kind = "shape" if c.random else "fwd"
    with open(os.path.join(d, "meta.txt"), "w") as m, open(os.path.join(d, "data"), "wb") as data:
        for name in feeds:
            m.write(f"feed {name}\n")
        data.write(fed.getvalue())
        for i, (name, t) in enumerate(zip(fetch, got)):
            m.write(f"fetch {name} {kind if i < len(outs) else 'grad'}\n")
            append_tensor(data, t)


def main():
    entries = []
    with open(os.path.join(HERE, "api_list.txt")) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            section, name = line.rstrip("\n").split("\t")
            if section in SECTIONS:
                entries.append((section, name))
    missing = [f"{s}\t{n}" for s, n in entries
               if f"{s}\t{n}" not in api_case.CASES and f"{s}\t{n}" not in api_case.SKIPS]
    stray = [k for k in list(api_case.CASES) + list(api_case.SKIPS) if tuple(k.split("\t")) not in entries]
    if stray:
        sys.exit("cases for entries not in api_list.txt: " + ", ".join(stray))
    only = set(sys.argv[1:])
    if not only:
        shutil.rmtree(OUT, ignore_errors=True)
        os.makedirs(OUT)
    lines = []
    for section, name in entries:
        key = f"{section}\t{name}"
        if only and name not in only:
            continue
        if key in api_case.SKIPS or key in missing:
            lines.append(f"{key}\tskip\t{api_case.SKIPS.get(key, api_case.NO_CASE)}")
            continue
        c = api_case.CASES[key]
        d = f"{section}.{name}"
        shutil.rmtree(os.path.join(OUT, d), ignore_errors=True)
        try:
            write_case(c, os.path.join(OUT, d))
            lines.append(f"{key}\tcase\t{d}")
        except Exception as e:  # Paddle itself cannot build or run it on CPU
            shutil.rmtree(os.path.join(OUT, d), ignore_errors=True)
            msg = " ".join(str(e).split())
            for marker in ("InvalidArgument", "Unimplemented", "NotFound", "PreconditionNotMet", "Error"):
                if marker in msg:
                    msg = msg[msg.index(marker):]
                    break
            lines.append(f"{key}\tpaddle-fails\t{type(e).__name__}: {msg[:160]}")
            if os.environ.get("API_COVERAGE_DEBUG"):
                traceback.print_exc()
    if not only:
        with open(os.path.join(OUT, "cases.txt"), "w") as f:
            f.write(f"# paddle {paddle.__version__}; written by tests/paddle_fixtures/api_coverage.py\n")
            f.write("\n".join(lines) + "\n")
    for l in lines:
        if "\tpaddle-fails\t" in l:
            print(l)
    print(sum("\tcase\t" in l for l in lines), "cases,", sum("\tskip\t" in l for l in lines), "skipped,",
          sum("\tpaddle-fails\t" in l for l in lines), "fail in Paddle")


if __name__ == "__main__":
    paddle.enable_static()
    main()
