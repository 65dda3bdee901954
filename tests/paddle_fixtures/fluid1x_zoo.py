"""Training programs laid out as Fluid 1.3, 1.5, 1.6 and 1.8 wrote them
(issue 20, item 5): Fluid's CTR DNN (ctr_dnn of Fluid's models: sparse
slots through one shared embedding table, sequence_pool, concat with dense
features, three fc layers, cross_entropy; Adam) and the word2vec of Fluid's
book (an N-gram model: four context words through a shared embedding,
concat, fc with sigmoid, fc with softmax, cross_entropy; SGD).

Fluid 1.x does not install on this Python. So each net is built with Paddle
2.6 from the ops Fluid 1.x's layers wrote (lookup_table, sequence_pool,
mul + elementwise_add + activation for fc, cross_entropy or
cross_entropy2), Paddle 2.6 appends the backward and the optimizer and
records the losses, and `as_release` then rewrites the program desc into the
layout that release's grad makers and optimizers wrote (from their public
source; docs/fluid-grad-slots.md has the grad slots by release). Paddle 2.6
cannot run the rewritten programs; Oar must, to the same losses.
"""
import os

import numpy as np
import paddle
from paddle.base.proto import framework_pb2

from api_case import op

RELEASES = ("1.3", "1.5", "1.6", "1.8")
RNG = np.random.default_rng(13)
EMPTY = "@EMPTY@"


def _release_tuple(release):
    return tuple(int(v) for v in release.split("."))


def _param(name, shape, init):
    return paddle.static.create_parameter(shape, "float32", name=name, default_initializer=init)


def _fc(x, size, act, name):
    """fluid.layers.fc: mul, elementwise_add (axis 1), the activation."""
    w = _param(name + ".w_0", [x.shape[1], size], paddle.nn.initializer.XavierUniform())
    b = _param(name + ".b_0", [size], paddle.nn.initializer.Constant(0.0))
    h = op("mul", {"X": x, "Y": w}, {"x_num_col_dims": 1, "y_num_col_dims": 1})
    h = op("elementwise_add", {"X": h, "Y": b}, {"axis": 1})
    return op(act, {"X": h}) if act else h


def _embedding(ids, table):
    return op("lookup_table", {"W": table, "Ids": ids},
              {"is_sparse": True, "is_distributed": False, "padding_idx": -1, "remote_prefetch": True})  # is_sparse and not is_distributed


def _cross_entropy(prob, label, release):
    """fluid.layers.cross_entropy: cross_entropy before 1.4, cross_entropy2 from 1.4."""
    if _release_tuple(release) < (1, 4):
        return op("cross_entropy", {"X": prob, "Label": label}, {"soft_label": False, "ignore_index": -100},
                  outs=("Y",))
    return op("cross_entropy2", {"X": prob, "Label": label}, {"ignore_index": -100}, outs=("Y",),
              extra_outs=("XShape", "MatchX"))


def ctr_dnn(release, slots=4, dim=8, dense=4, batch=16):
    # 1.5's table (2100 x 8) is large enough to be cut into two blocks over
    # two pservers; the others' (1100 x 8) stay whole.
    vocab = 2100 if release == "1.5" else 1100
    ids = [paddle.static.data("slot%d" % i, [-1, 1], "int64", lod_level=1) for i in range(slots)]
    dense_x = paddle.static.data("dense", [-1, dense], "float32")
    label = paddle.static.data("label", [-1, 1], "int64")
    table = _param("SparseFeatFactors", [vocab, dim], paddle.nn.initializer.Uniform(-0.1, 0.1))
    pooled = [op("sequence_pool", {"X": _embedding(i, table)}, {"pooltype": "AVERAGE", "is_test": False},
                 extra_outs=("MaxIndex",)) for i in ids]
    h = op("concat", {"X": pooled + [dense_x]}, {"axis": 1})
    for k in range(3):
        h = _fc(h, 16, "relu", "fc_%d" % k)
    prob = _fc(h, 2, "softmax", "fc_3")
    loss = op("mean", {"X": _cross_entropy(prob, label, release)})
    # Lazy, as Fluid's CTR models ran it (and Paddle 2.6's non-lazy sparse
    # Adam reads past its row list: its numbers vary from run to run).
    paddle.optimizer.Adam(0.01, lazy_mode=True).minimize(loss)
    batches = []
    for _ in range(4):
        b = {}
        for i in range(slots):
            lens = RNG.integers(1, 4, batch)
            b["slot%d" % i] = (RNG.integers(0, vocab, (int(lens.sum()), 1)).astype("int64"),
                               [0] + np.cumsum(lens).tolist())
        b["dense"] = RNG.standard_normal((batch, dense)).astype("float32")
        b["label"] = RNG.integers(0, 2, (batch, 1)).astype("int64")
        batches.append(b)
    return loss, batches, "dir"


def word2vec(release, vocab=64, dim=8, hidden=16, batch=16):
    words = [paddle.static.data(n, [-1, 1], "int64") for n in ("firstw", "secondw", "thirdw", "forthw")]
    nextw = paddle.static.data("nextw", [-1, 1], "int64")
    table = _param("shared_w", [vocab, dim], paddle.nn.initializer.Uniform(-0.5, 0.5))
    h = op("concat", {"X": [_embedding(w, table) for w in words]}, {"axis": 1})
    h = _fc(h, hidden, "sigmoid", "fc_0")
    prob = _fc(h, vocab, "softmax", "fc_1")
    loss = op("mean", {"X": _cross_entropy(prob, nextw, release)})
    paddle.optimizer.SGD(0.5).minimize(loss)
    p = 1.0 / np.arange(1, vocab + 1)
    corpus = RNG.choice(vocab, 1000, p=p / p.sum())
    batches = []
    for _ in range(4):
        at = RNG.integers(0, len(corpus) - 5, batch)
        grams = np.stack([corpus[a:a + 5] for a in at]).astype("int64")
        b = {n: grams[:, k:k + 1].copy() for k, n in enumerate(("firstw", "secondw", "thirdw", "forthw", "nextw"))}
        batches.append(b)
    return loss, batches, "dir"


# ---- the release's layout ----

def _slot(slots, name):
    for s in slots:
        if s.parameter == name:
            return s
    return None


def _set_slot(slots, name, args):
    s = _slot(slots, name)
    if s is None:
        s = slots.add()
        s.parameter = name
    del s.arguments[:]
    s.arguments.extend(args)


def _drop_slot(slots, name):
    for i, s in enumerate(slots):
        if s.parameter == name:
            del slots[i]
            return


INPLACE_ACTS = ("relu", "sigmoid", "tanh", "exp")  # 1.3's fc wrote these in place


def _rename(prog, old, new):
    for block in prog.blocks:
        for o in block.ops:
            for slots in (o.inputs, o.outputs):
                for sl in slots:
                    args = [new if a == old else a for a in sl.arguments]
                    del sl.arguments[:]
                    sl.arguments.extend(args)
        for v in block.vars:
            if v.name == old:
                v.name = new


def _drop_var(block, name):
    for i, v in enumerate(block.vars):
        if v.name == name:
            del block.vars[i]
            return


def _attr(o, name):
    for a in o.attrs:
        if a.name == name:
            return a
    return None


def _adam_as_fluid16(block, keep_outputs=False):
    """Fluid 1.3-1.6's Adam: the adam op does not advance the beta powers;
    _finish_update appends, after every adam op, a scale of each parameter's
    beta1 and beta2 power accumulators (op_role Optimize, op_role_var
    [param, grad]). keep_outputs: Beta1PowOut/Beta2PowOut go to scratch
    variables instead (for Paddle 2.6, which requires them, to run it)."""
    scales = []
    for o in block.ops:
        if o.type != "adam":
            continue
        for out in ("Beta1PowOut", "Beta2PowOut"):
            if not keep_outputs:
                _drop_slot(o.outputs, out)
                continue
            scratch = _slot(o.outputs, out).arguments[0] + "@SCRATCH"
            _set_slot(o.outputs, out, [scratch])
            v = block.vars.add()
            v.name = scratch
            v.type.type = framework_pb2.VarType.LOD_TENSOR
            v.type.lod_tensor.tensor.data_type = framework_pb2.VarType.FP32
            v.type.lod_tensor.tensor.dims.extend([1])
        for pow_slot, beta in (("Beta1Pow", "beta1"), ("Beta2Pow", "beta2")):
            acc = _slot(o.inputs, pow_slot).arguments[0]
            sc = framework_pb2.OpDesc()
            sc.type = "scale"
            _set_slot(sc.inputs, "X", [acc])
            _set_slot(sc.outputs, "Out", [acc])
            for name, kind, value in (("scale", framework_pb2.FLOAT, _attr(o, beta).f),
                                      ("bias", framework_pb2.FLOAT, 0.0),
                                      ("bias_after_scale", framework_pb2.BOOLEAN, True),
                                      ("op_role", framework_pb2.INT, 2)):
                a = sc.attrs.add()
                a.name, a.type = name, kind
                if kind == framework_pb2.FLOAT:
                    a.f = value
                elif kind == framework_pb2.BOOLEAN:
                    a.b = value
                else:
                    a.i = value
            a = sc.attrs.add()
            a.name, a.type = "op_role_var", framework_pb2.STRINGS
            a.strings.extend([_slot(o.inputs, "Param").arguments[0], _slot(o.inputs, "Grad").arguments[0]])
            scales.append(sc)
    for sc in scales:
        block.ops.add().CopyFrom(sc)
    return len(scales)


def fluid16_adam_reference(main_pb):
    """The main program with Fluid 1.3-1.6's Adam semantics that Paddle 2.6
    can run: each adam reads the beta powers its step uses (Paddle 2.6's
    sparse adam, its outputs bound to its inputs, steps with the next
    powers; Fluid 1.x's kernel did not) and scale ops advance them."""
    prog = framework_pb2.ProgramDesc()
    prog.ParseFromString(main_pb)
    _adam_as_fluid16(prog.blocks[0], keep_outputs=True)
    return prog.SerializeToString()


def as_release(fixture_dir, release):
    """Rewrites a fixture's Paddle 2.6 programs (main.pb, startup.pb) and
    saved persistables into `release`'s layout; returns the ops changed."""
    r = _release_tuple(release)
    progs = {}
    for name in ("main.pb", "startup.pb"):
        progs[name] = framework_pb2.ProgramDesc()
        with open(os.path.join(fixture_dir, name), "rb") as f:
            progs[name].ParseFromString(f.read())
    prog = progs["main.pb"]
    block = prog.blocks[0]
    changed = 0
    if r < (1, 4):  # fc's activation in place: Out is X, and so are their gradients
        for o in list(block.ops):
            if o.type in INPLACE_ACTS:
                x, out = _slot(o.inputs, "X").arguments[0], _slot(o.outputs, "Out").arguments[0]
                _rename(prog, out, x)
                _rename(prog, out + "@GRAD", x + "@GRAD")
                _drop_var(block, out)
                _drop_var(block, out + "@GRAD")
                changed += 1
    fwd_out = {}  # (forward type, first input) -> first output, for grad ops that read it
    for o in block.ops:
        for a in list(o.attrs):  # Paddle 2.x's; op_callstack (a Python stack) carries no meaning
            if a.name in ("with_quant_attr", "op_callstack") or (a.name == "op_device" and r < (1, 8)) or \
                    (a.name == "pad_value" and o.type.startswith("sequence_pool") and r < (1, 5)):
                o.attrs.remove(a)
        if o.type in ("lookup_table", "cross_entropy", "concat"):
            key = "Ids" if o.type == "lookup_table" else "X"
            out = "Y" if o.type == "cross_entropy" else "Out"
            fwd_out[(o.type, _slot(o.inputs, key).arguments[0])] = _slot(o.outputs, out).arguments[0]
        if o.type == "elementwise_add_grad" and r <= (1, 6):
            _drop_slot(o.inputs, "X")
            changed += 1
        elif o.type == "lookup_table_grad" and r <= (1, 4):
            ids = _slot(o.inputs, "Ids").arguments[0]
            _set_slot(o.inputs, "Out", [fwd_out[("lookup_table", ids)]])
            _set_slot(o.outputs, "Ids@GRAD", [EMPTY])
            changed += 1
        elif o.type == "cross_entropy_grad" and r <= (1, 3):
            x = _slot(o.inputs, "X").arguments[0]
            _set_slot(o.inputs, "Y", [fwd_out[("cross_entropy", x)]])
            _set_slot(o.outputs, "Label@GRAD", [EMPTY])
            changed += 1
        elif o.type == "concat_grad" and r <= (1, 3):
            x = _slot(o.inputs, "X").arguments[0]
            _set_slot(o.inputs, "Out", [fwd_out[("concat", x)]])
            changed += 1
        elif o.type == "sequence_pool_grad":
            pooltype = _attr(o, "pooltype").s
            if pooltype != "MAX" and _slot(o.inputs, "MaxIndex") is not None:
                _drop_slot(o.inputs, "MaxIndex")
                changed += 1
    if r < (1, 7):
        changed += _adam_as_fluid16(block)
    if r < (1, 4):  # accumulators named without their parameter: moment1_0, beta1_pow_acc_0, ...
        count = {}
        for o in list(block.ops):
            if o.type != "adam":
                continue
            for slot in ("Moment1", "Moment2", "Beta1Pow", "Beta2Pow"):
                old = _slot(o.inputs, slot).arguments[0]
                param = _slot(o.inputs, "Param").arguments[0]
                base = old[len(param) + 1:].rsplit("_", 1)[0]  # moment1, beta1_pow_acc, ...
                new = "%s_%d" % (base, count.get(base, 0))
                count[base] = count.get(base, 0) + 1
                for p in progs.values():
                    _rename(p, old, new)
                os.rename(os.path.join(fixture_dir, "params", old), os.path.join(fixture_dir, "params", new))
    for name, p in progs.items():
        with open(os.path.join(fixture_dir, name), "wb") as f:
            f.write(p.SerializeToString())
    return changed
