#!/usr/bin/env python3
"""Converts parameters saved by paddle.static.save into files oar reads.

paddle.static.save(program, "model") writes model.pdparams (the parameters)
and model.pdopt (the optimizer's variables: accumulators, learning rate),
each a pickled dict of variable name -> numpy array. Oar reads Fluid's own
format instead (save_persistables: one LoDTensor file per variable), so:

    python3 scripts/pdparams_to_fluid.py model --out params/
    oar train --program main.pb --startup startup.pb ... --params params/

MODEL is the prefix given to paddle.static.save (model.pdparams and, if
present, model.pdopt are read) or the files themselves. paddle.save's
dygraph state dicts (with their "StructuredToParameterName@@" table) are
converted under the parameter names. Arrays that paddle.static.save split
into slices (protocol 2 and 3, "UnpackBigParamInfor@@") are joined again.

Unpickling runs only numpy's own array reconstruction: any other class in
the file is refused, so a file from elsewhere cannot run code here.
Needs python3 and numpy (Debian: python3-numpy); not Paddle.
"""
import argparse
import collections
import os
import pickle
import struct
import sys

import numpy as np

# Fluid's VarType.Type numbers (proto/framework.proto) for numpy dtypes.
FLUID_DTYPES = {
    np.dtype("bool"): 0, np.dtype("int16"): 1, np.dtype("int32"): 2, np.dtype("int64"): 3,
    np.dtype("float16"): 4, np.dtype("float32"): 5, np.dtype("float64"): 6,
    np.dtype("uint8"): 20, np.dtype("int8"): 21,
}
SPLIT_INFO = "UnpackBigParamInfor@@"
STRUCTURED_NAMES = "StructuredToParameterName@@"

# What numpy arrays (and the dicts holding them) need to unpickle, under the
# module names of numpy 1.x and 2.x.
ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    ("numpy", "ndarray"), ("numpy", "dtype"), ("collections", "OrderedDict"),
}


class ArraysOnly(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) not in ALLOWED:
            raise pickle.UnpicklingError("refusing %s.%s: a .pdparams/.pdopt file holds numpy arrays only"
                                         % (module, name))
        return super().find_class(module, name)


def load(path):
    with open(path, "rb") as f:
        try:
            obj = ArraysOnly(f, encoding="latin1").load()
        except (pickle.UnpicklingError, EOFError, ValueError) as e:
            sys.exit("%s: not a paddle.static.save file: %s" % (path, e))
    if not isinstance(obj, dict):
        sys.exit("%s: holds a %s, expected a dict of name -> array" % (path, type(obj).__name__))
    obj = dict(obj)
    for name, info in obj.pop(SPLIT_INFO, {}).items():
        obj[name] = np.concatenate([obj.pop(part) for part in info["slices"]]).reshape(info["OriginShape"])
    renames = obj.pop(STRUCTURED_NAMES, {})
    return {renames.get(k, k): v for k, v in obj.items()}


def varint(n):
    out = bytearray()
    n &= (1 << 64) - 1  # negative int64s encode as 10 bytes, as protobuf does
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def tensor_desc(dtype_code, shape):
    # VarType.TensorDesc{data_type = 1; repeated int64 dims = 2 (proto2, unpacked)}
    # in protobuf's wire format: key (field << 3 | varint type 0), then the value.
    return varint(1 << 3) + varint(dtype_code) + b"".join(varint(2 << 3) + varint(d) for d in shape)


def lod_tensor_bytes(name, value):
    arr = np.asarray(value)
    code = FLUID_DTYPES.get(arr.dtype.newbyteorder("="))
    if code is None:
        sys.exit("variable '%s': dtype %s has no Fluid type" % (name, arr.dtype))
    desc = tensor_desc(code, arr.shape)
    # LoDTensor stream: uint32 version 0, uint64 LoD levels (0), then the
    # tensor: uint32 version 0, int32 desc size, TensorDesc, raw little-endian data.
    head = struct.pack("<IQIi", 0, 0, 0, len(desc))
    return head + desc + np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).tobytes()


def inputs(args):
    files = []
    for item in args:
        if os.path.isfile(item):
            files.append(item)
            continue
        found = [item + ext for ext in (".pdparams", ".pdopt") if os.path.isfile(item + ext)]
        if not found:
            sys.exit("%s: no such file, nor %s.pdparams" % (item, item))
        files += found
    return files


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="Writes one Fluid LoDTensor file per variable into --out.")
    ap.add_argument("model", nargs="+", help="paddle.static.save prefix, or .pdparams/.pdopt files")
    ap.add_argument("--out", required=True, help="directory for the per-variable files (created)")
    args = ap.parse_args()
    variables = collections.OrderedDict()
    for path in inputs(args.model):
        for name, value in load(path).items():
            if name in variables:
                sys.exit("variable '%s' is in more than one input (%s again)" % (name, path))
            if not name or "/" in name or name in (".", ".."):
                sys.exit("%s: variable name %r cannot be a file name" % (path, name))
            variables[name] = value
    os.makedirs(args.out, exist_ok=True)
    for name, value in variables.items():
        with open(os.path.join(args.out, name), "wb") as f:
            f.write(lod_tensor_bytes(name, value))
    print("wrote %d variables to %s" % (len(variables), args.out))


if __name__ == "__main__":
    main()
