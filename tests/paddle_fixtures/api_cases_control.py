"""API coverage cases: fluid.layers' control flow and tensor arrays —
While, while_loop, cond, Switch, the array ops and `rnn` with Fluid 1.8's
cells — built with Paddle 2.6's static API, which writes the same ops
(`while`, `conditional_block`, `write_to_array`, ...) and their gradients.

The cells are written op for op as Fluid 1.8's BasicGRUUnit and
BasicLSTMUnit computed them (concat, matmul, elementwise_add, split,
sigmoid/tanh), and unrolled by `rnn` (Paddle 2.6's paddle.nn.layer.rnn.rnn,
the same while loop over a tensor array as Fluid 1.8's layers.rnn).
"""
import paddle
from paddle.nn.layer.rnn import rnn as unroll
from paddle.static.nn.control_flow import Switch, While

from api_case import T, case, skip

FL = "fluid.layers"
X34 = T([3, 4], "h")

skip(FL, "IfElse DynamicRNN StaticRNN", "no case yet: Paddle 2.6 removed the layer (split_lod_tensor, recurrent ops)")


def count(n):
    return paddle.full([1], 0, "int64"), paddle.full([1], n, "int64")


def while_layer(x):
    i, n = count(3)
    cond = paddle.less_than(i, n)
    h = paddle.assign(x)
    loop = While(cond)
    with loop.block():
        paddle.assign(paddle.static.nn.fc(h, 4, activation="tanh"), h)
        paddle.increment(i, 1.0)
        paddle.assign(paddle.less_than(i, n), cond)
    return h


def while_loop(x):
    i, n = count(3)
    w = paddle.create_parameter([4, 4], "float32")
    _, h = paddle.static.nn.while_loop(lambda i, h: paddle.less_than(i, n),
                                       lambda i, h: [i + 1, paddle.tanh(paddle.matmul(h, w) + 0.1)], [i, x])
    return h


def arrays(x):
    arr = paddle.tensor.create_array("float32")
    i0, i1 = count(1)
    paddle.tensor.array_write(x, i0, array=arr)
    paddle.tensor.array_write(paddle.tanh(x) * 2.0, i1, array=arr)
    return paddle.tensor.array_read(arr, i1), paddle.tensor.array_read(arr, i0), paddle.tensor.array_length(arr)


def array_to_tensor(a, b, c):
    arr = paddle.tensor.create_array("float32")
    for k, t in enumerate((a, b, c)):
        paddle.tensor.array_write(t, paddle.full([1], k, "int64"), array=arr)
    out, _ = paddle.tensor.manipulation.tensor_array_to_tensor(arr, axis=1, use_stack=False)
    return out


def cond(x, p):
    return paddle.static.nn.cond(paddle.less_than(p, paddle.full([1], 0.0, "float32")),
                                 lambda: x * 2.0, lambda: paddle.tanh(x))


def switch(x, p):
    out = paddle.tensor.create_tensor("float32")
    with Switch() as sw:
        with sw.case(paddle.less_than(p, paddle.full([1], -0.5, "float32"))):
            paddle.assign(x * 3.0, out)
        with sw.case(paddle.less_than(p, paddle.full([1], 0.5, "float32"))):
            paddle.assign(paddle.tanh(x), out)
        with sw.default():
            paddle.assign(x - 1.0, out)
    return out


def create_tensor(x):
    t = paddle.tensor.create_tensor("float32")
    paddle.assign(x * 2.0, t)
    return t


class GRUCell:
    """Fluid 1.8's GRUCell (BasicGRUUnit)."""

    def __init__(self, in_size, hidden):
        self.gw = paddle.create_parameter([in_size + hidden, 2 * hidden], "float32")
        self.gb = paddle.create_parameter([2 * hidden], "float32", is_bias=True)
        self.cw = paddle.create_parameter([in_size + hidden, hidden], "float32")
        self.cb = paddle.create_parameter([hidden], "float32", is_bias=True)

    def __call__(self, x, h):
        g = paddle.nn.functional.sigmoid(paddle.matmul(paddle.concat([x, h], 1), self.gw) + self.gb)
        r, u = paddle.split(g, 2, axis=1)
        c = paddle.tanh(paddle.matmul(paddle.concat([x, r * h], 1), self.cw) + self.cb)
        nh = u * h + (1.0 - u) * c
        return nh, nh


class LSTMCell:
    """Fluid 1.8's LSTMCell (BasicLSTMUnit, forget_bias 1.0)."""

    def __init__(self, in_size, hidden):
        self.w = paddle.create_parameter([in_size + hidden, 4 * hidden], "float32")
        self.b = paddle.create_parameter([4 * hidden], "float32", is_bias=True)

    def __call__(self, x, states):
        h, c = states
        sig = paddle.nn.functional.sigmoid
        i, j, f, o = paddle.split(paddle.matmul(paddle.concat([x, h], 1), self.w) + self.b, 4, axis=-1)
        nc = c * sig(f + paddle.full([1], 1.0, "float32")) + sig(i) * paddle.tanh(j)
        nh = paddle.tanh(nc) * sig(o)
        return nh, [nh, nc]


class TanhCell:
    """A user's RNNCell subclass: h' = tanh(x W + h U + b)."""

    def __init__(self, in_size, hidden):
        self.w = paddle.create_parameter([in_size, hidden], "float32")
        self.u = paddle.create_parameter([hidden, hidden], "float32")
        self.b = paddle.create_parameter([hidden], "float32", is_bias=True)

    def __call__(self, x, h):
        nh = paddle.tanh(paddle.matmul(x, self.w) + paddle.matmul(h, self.u) + self.b)
        return nh, nh


def run_cell(cell_type, lstm=False):
    def fn(x):  # x: [batch 2, time 3, 4]
        cell = cell_type(4, 5)
        h0 = paddle.zeros([2, 5], "float32")
        init = [h0, paddle.zeros([2, 5], "float32")] if lstm else h0
        out, last = unroll(cell, x, initial_states=init)
        return out, last
    return fn


case(FL, "While", [X34], while_layer)
case(FL, "while_loop", [X34], while_loop)
for name in ("array_write", "array_read", "array_length", "create_array"):
    case(FL, name, [X34], arrays)
case(FL, "tensor_array_to_tensor", [T([2, 3]), T([2, 1]), T([2, 2])], array_to_tensor)
case(FL, "cond", [X34, T([1], "u", grad=False)], cond)
case(FL, "Switch", [X34, T([1], "u", grad=False)], switch)
case(FL, "create_tensor", [X34], create_tensor)
case(FL, "rnn", [T([2, 3, 4], "h")], run_cell(GRUCell))
case(FL, "GRUCell", [T([2, 3, 4], "h")], run_cell(GRUCell))
case(FL, "LSTMCell", [T([2, 3, 4], "h")], run_cell(LSTMCell, lstm=True))
case(FL, "RNNCell", [T([2, 3, 4], "h")], run_cell(TanhCell))
