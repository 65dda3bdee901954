"""The vocabulary of the API coverage cases (api_coverage.py).

A case is one API of the reference list built the way a user calls it, in a
tiny static program: `ins` are its inputs (fed, fixed shapes), `fn` builds
the API's output(s) from them. api_coverage.py feeds random inputs, runs the
forward, adds a loss (the sum of each float output squared) and its
backward, and records Paddle's outputs and gradients.

  case("paddle", "abs", [T([3, 4], "u")], paddle.abs)
  case("paddle", "bernoulli", [T([3, 4], "prob")], paddle.bernoulli, random=True)
  raw("fluid.layers", "elementwise_add", "elementwise_add", {"X": T([2, 3]), "Y": T([3])},
      attrs={"axis": 1})    # the op exactly as Fluid 1.x's layer wrote it
  skip("paddle", "CPUPlace", NOT_OP)
"""
import zlib

import numpy as np
import paddle
from paddle.base.layer_helper import LayerHelper

# Why an entry of the list has no case: it builds no op (excluded from the
# measure), or nobody has written its case yet (counted as not covered).
NOT_OP = "not an op: a place, mode switch, container, helper or Python-side object"
CONTROL_FLOW = "no case yet: control flow / decoding built from Python loops"
NO_CASE = "no case yet"


class T:
    """An input: shape, how its values are drawn, dtype; `lod` offsets
    make it a LoD tensor (level 1); grad=False keeps a float input out of
    the gradients checked (indices, running statistics)."""

    def __init__(self, shape, kind="n", dtype=None, lod=None, grad=True):
        self.shape, self.kind, self.lod, self.grad = list(shape), kind, lod, grad
        if dtype is None:
            dtype = "int64" if kind.startswith("i") or kind.startswith("perm") else (
                "bool" if kind == "b" else "float32")
        self.dtype = dtype

    def draw(self, rng):
        k, shape = self.kind, self.shape
        if k == "n":
            v = rng.standard_normal(shape)
        elif k == "u":
            v = rng.uniform(-1, 1, shape)
        elif k == "h":
            v = rng.uniform(-0.9, 0.9, shape)
        elif k == "p":
            v = rng.uniform(0.5, 2, shape)
        elif k == "prob":
            v = rng.uniform(0.05, 0.95, shape)
        elif k == "pm1":
            v = rng.choice([-1.0, 1.0], shape)
        elif k == "01":
            v = rng.integers(0, 2, shape).astype("float64")
        elif k == "dist":  # distinct values: no ties for sort, max, pooling
            v = (rng.permutation(int(np.prod(shape))) / 7.0 - 3.0).reshape(shape)
        elif k == "spd":  # symmetric positive definite, well conditioned
            a = rng.standard_normal(shape)
            v = a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])
        elif k == "box":  # [.., 4] boxes xmin, ymin, xmax, ymax in [0, 1]
            lo = rng.uniform(0, 0.5, shape[:-1] + [2])
            v = np.concatenate([lo, lo + rng.uniform(0.1, 0.5, shape[:-1] + [2])], axis=-1)
        elif k == "pbox":  # pixel boxes reaching past a ~100-pixel image
            lo = rng.uniform(-20, 90, shape[:-1] + [2])
            v = np.concatenate([lo, lo + rng.uniform(5, 60, shape[:-1] + [2])], axis=-1)
        elif k == "hws":  # rows of image height, width, scale
            v = np.stack([rng.integers(50, 100, shape[0]), rng.integers(50, 100, shape[0]),
                          rng.choice([1.0, 1.5], shape[0])], axis=1)
        elif k == "tslabel":  # teacher-student labels: -2, -1, or click + teacher score
            v = rng.choice([-2.0, -1.0, 0.0, 1.0], shape) + np.where(rng.random(shape) < 0.5, 0, rng.random(shape))
            v = np.where(v < 0, np.round(v), v)
        elif k == "b":
            v = rng.integers(0, 2, shape).astype(bool)
        elif k.startswith("perm"):  # distinct ints below N: perm<N>
            n = int(k[4:])
            v = rng.permutation(n)[: int(np.prod(shape))].reshape(shape)
        elif k.startswith("i1-"):  # ints in [1, N]
            v = rng.integers(1, int(k[3:]) + 1, shape)
        elif k.startswith("i"):  # ints in [0, N)
            v = rng.integers(0, int(k[1:]), shape)
        else:
            raise ValueError(k)
        return np.asarray(v).astype(self.dtype)


class Case:
    def __init__(self, section, name, ins, fn, random=False, grad=True, note=""):
        self.section, self.name, self.ins, self.fn = section, name, ins, fn
        self.random, self.grad, self.note = random, grad, note

    @property
    def key(self):
        return f"{self.section}\t{self.name}"

    def seed(self):
        return zlib.crc32(self.key.encode())


CASES = {}
SKIPS = {}


def case(section, name, ins, fn, **kw):
    c = Case(section, name, ins, fn, **kw)
    assert c.key not in CASES, c.key
    CASES[c.key] = c
    return c


def skip(section, names, why):
    for n in names.split():
        SKIPS[f"{section}\t{n}"] = why


def op(type, inputs, attrs=None, outs=("Out",), dtype="float32", extra_outs=()):
    """Appends one op as a Fluid 1.x layer wrote it; returns its output
    variables (one per slot in `outs`; `extra_outs` are bound but not
    returned, e.g. an op's intermediate outputs)."""
    h = LayerHelper(type)
    outputs, ret = {}, []
    for slot in list(outs) + list(extra_outs):
        dt = dtype[slot] if isinstance(dtype, dict) else dtype
        v = h.create_variable_for_type_inference(dt if slot in outs else "float32")
        outputs[slot] = [v]
        if slot in outs:
            ret.append(v)
    h.append_op(type=type, inputs={k: (v if isinstance(v, list) else [v]) for k, v in inputs.items()},
                outputs=outputs, attrs=attrs or {})
    return ret[0] if len(ret) == 1 else tuple(ret)


def raw(section, name, type, ins, attrs=None, outs=("Out",), dtype="float32", extra_outs=(), **kw):
    """A case that is one raw op with named input slots `ins` (slot -> T or
    [T, ...])."""
    slots = list(ins.items())
    flat = []
    for _, t in slots:
        flat.extend(t if isinstance(t, list) else [t])

    def fn(*vs):
        it = iter(vs)
        inputs = {}
        for slot, t in slots:
            inputs[slot] = [next(it) for _ in t] if isinstance(t, list) else next(it)
        return op(type, inputs, attrs, outs, dtype, extra_outs)

    return case(section, name, flat, fn, **kw)


F = paddle.nn.functional
