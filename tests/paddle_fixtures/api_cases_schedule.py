"""API coverage cases: Fluid 1.x's learning-rate schedules (fluid.layers),
written op for op as Fluid 1.3-1.8's learning_rate_scheduler.py wrote them:
a persistable int64 step counter that an `increment` prepended to the main
program advances, cast to float32, then scalar arithmetic as Fluid's
Variable operators wrote it (`scale` for + - * / by a Python number,
fill_constant + elementwise_* otherwise) and Switch (conditional_block) for
the piecewise ones.

The counter starts where a job resumed from a checkpoint would have it
(step 7 rather than 0), so a schedule is checked past its first step.
"""
import math

import paddle
from paddle.static.nn.control_flow import Switch

from api_case import case, op

FL = "fluid.layers"
STEP = 7  # the counter's value in the run the case records


def counter(name="@LR_DECAY_COUNTER@", begin=STEP):
    """fluid.layers.autoincreased_step_counter: int64 [1], persistable,
    initialised to begin - 1 in startup; `increment` first in main."""
    c = paddle.static.create_global_var([1], begin - 1, "int64", persistable=True, force_cpu=True, name=name)
    c.stop_gradient = True
    paddle.static.default_main_program().global_block()._prepend_op(
        type="increment", inputs={"X": [c]}, outputs={"Out": [c]}, attrs={"step": 1.0})
    return c


def step_f(begin=STEP):
    """_decay_step_counter: the counter cast to float32."""
    return op("cast", {"X": counter(begin=begin)}, {"in_dtype": 3, "out_dtype": 5})


def scale(x, s=1.0, b=0.0):
    return op("scale", {"X": x}, {"scale": float(s), "bias": float(b), "bias_after_scale": True})


def const(v):
    return op("fill_constant", {}, {"shape": [1], "dtype": 5, "value": float(v), "force_cpu": False})


def ew(kind, x, y):
    return op("elementwise_" + kind, {"X": x, "Y": y}, {"axis": -1})


def unary(kind, x):
    return op(kind, {"X": x})


def exponential_decay(lr=0.1, decay_steps=3, rate=0.5, staircase=True):
    div = scale(step_f(), 1.0 / decay_steps)
    if staircase:
        div = unary("floor", div)
    return scale(ew("pow", const(rate), div), lr)


def natural_exp_decay(lr=0.1, decay_steps=3, rate=0.5, staircase=False):
    div = scale(step_f(), 1.0 / decay_steps)
    if staircase:
        div = unary("floor", div)
    return scale(unary("exp", scale(div, -1 * rate)), lr)


def inverse_time_decay(lr=0.1, decay_steps=3, rate=0.5, staircase=True):
    div = scale(step_f(), 1.0 / decay_steps)
    if staircase:
        div = unary("floor", div)
    return ew("div", const(lr), scale(scale(div, rate), 1.0, 1.0))


def noam_decay(d_model=64, warmup_steps=10, lr=1.0):
    g = step_f()
    a = ew("pow", g, const(-0.5))
    b = scale(g, warmup_steps ** -1.5)
    return scale(ew("min", a, b), lr * d_model ** -0.5)


def polynomial_decay(lr=0.1, decay_steps=5, end_lr=0.001, power=2.0, cycle=True):
    g = step_f()
    if cycle:
        div = unary("ceil", scale(g, 1.0 / decay_steps))
        zero, one = const(0.0), const(1.0)
        with Switch() as sw:
            with sw.case(op("equal", {"X": g, "Y": zero}, {"axis": -1}, dtype="bool")):
                paddle.assign(one, div)
        steps = scale(div, decay_steps)
    else:
        steps = const(decay_steps)
        g = ew("min", g, steps)
    frac = ew("div", g, steps) if cycle else scale(g, 1.0 / decay_steps)
    return scale(scale(ew("pow", scale(frac, -1.0, 1.0), const(power)), lr - end_lr), 1.0, end_lr)


def cosine_decay(lr=0.1, step_each_epoch=2, epochs=10):
    epoch = unary("floor", scale(step_f(), 1.0 / step_each_epoch))
    return scale(scale(unary("cos", scale(epoch, math.pi / epochs)), 1.0, 1.0), lr * 0.5)


def piecewise_decay(boundaries=(3, 6, 9), values=(1.0, 0.5, 0.1, 0.05)):
    g = step_f()
    lr = paddle.static.create_global_var([1], 0.0, "float32", persistable=True, name="learning_rate")
    with Switch() as sw:
        for b, v in zip(boundaries, values):
            bound = op("fill_constant", {}, {"shape": [1], "dtype": 5, "value": float(b), "force_cpu": True})
            value = const(v)
            with sw.case(op("less_than", {"X": g, "Y": bound}, {"axis": -1, "force_cpu": False}, dtype="bool")):
                paddle.assign(value, lr)
        last = const(values[-1])
        with sw.default():
            paddle.assign(last, lr)
    return lr


def linear_lr_warmup(lr=0.1, warmup_steps=10, start_lr=0.0, end_lr=0.1):
    out = paddle.static.create_global_var([1], 0.0, "float32", persistable=True, name="learning_rate_warmup")
    g = step_f()
    with Switch() as sw:
        with sw.case(op("less_than", {"X": g, "Y": const(warmup_steps)}, {"axis": -1, "force_cpu": False},
                        dtype="bool")):
            paddle.assign(scale(scale(scale(g, 1.0 / warmup_steps), end_lr - start_lr), 1.0, start_lr), out)
        with sw.default():
            paddle.assign(const(lr), out)
    return out


for name, fn in [("exponential_decay", exponential_decay), ("natural_exp_decay", natural_exp_decay),
                 ("inverse_time_decay", inverse_time_decay), ("noam_decay", noam_decay),
                 ("polynomial_decay", polynomial_decay), ("cosine_decay", cosine_decay),
                 ("piecewise_decay", piecewise_decay), ("linear_lr_warmup", linear_lr_warmup)]:
    case(FL, name, [], fn, grad=False, note="a learning-rate schedule: nothing to differentiate")
case(FL, "autoincreased_step_counter", [], lambda: counter(name="@STEP_COUNTER@"), grad=False)
