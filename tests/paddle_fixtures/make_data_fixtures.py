#!/usr/bin/env python3
"""A user's own data for two Paddle-written fixtures (issue 21's tests).

The fixtures under tests/testdata/paddle/ hold the batches PaddlePaddle
2.6.2 trained on (saved with core.save_lod_tensor) and the losses it
recorded, step i on batch i % 4. This script writes the same examples as a
user would bring them, under tests/testdata/paddle_data/<fixture>/:

  mlp:              npy/x.npy, npy/label.npy (np.save) and arrays.npz
                    (np.savez_compressed): the four batches, in order;
  fluid18_ctr_dnn:  data.desc (a DataFeedDesc, as Fluid's
                    DatasetBase.set_use_var writes it for the program's feed
                    variables) and part-0, part-1 (MultiSlot text lines:
                    batches 0-1, then 2-3), floats written exactly.

Trained in order with the fixture's batch size, four steps per epoch, Oar
must record Paddle's losses. Run with the paddle venv's python:

  python3 tests/paddle_fixtures/make_data_fixtures.py
"""
import os

import numpy as np
from paddle.base import core

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "testdata", "paddle")
OUT = os.path.join(ROOT, "testdata", "paddle_data")
BATCHES = 4


def batch(model, i, feed):
    t = core.LoDTensor()
    core.load_lod_tensor(t, os.path.join(SRC, model, "batch_%d.%s" % (i, feed)))
    lod = t.lod()
    return np.array(t), (lod[0] if lod else None)


def mlp():
    out = os.path.join(OUT, "mlp")
    os.makedirs(os.path.join(out, "npy"), exist_ok=True)
    arrays = {}
    for feed in ("x", "label"):
        arrays[feed] = np.concatenate([batch("mlp", i, feed)[0] for i in range(BATCHES)])
        np.save(os.path.join(out, "npy", feed + ".npy"), arrays[feed])
    np.savez_compressed(os.path.join(out, "arrays.npz"), **arrays)
    print("mlp: %d examples, batch %d" % (arrays["x"].shape[0], arrays["x"].shape[0] // BATCHES))


def ctr():
    model = "fluid18_ctr_dnn"
    out = os.path.join(OUT, model)
    os.makedirs(out, exist_ok=True)
    slots = ["slot0", "slot1", "slot2", "slot3"]
    lines = []
    for i in range(BATCHES):
        cols = {s: batch(model, i, s) for s in slots + ["dense", "label"]}
        n = cols["label"][0].shape[0]
        for e in range(n):
            parts = []
            for s in slots:
                values, lod = cols[s]
                ids = values[lod[e]:lod[e + 1]].reshape(-1)
                parts.append("%d %s" % (len(ids), " ".join(str(int(v)) for v in ids)))
            dense = cols["dense"][0][e].reshape(-1)
            parts.append("%d %s" % (len(dense), " ".join(repr(float(v)) for v in dense)))
            parts.append("1 %d" % int(cols["label"][0][e].reshape(-1)[0]))
            lines.append(" ".join(parts))
        if i == 1 or i == BATCHES - 1:
            with open(os.path.join(out, "part-%d" % (i // 2)), "w") as f:
                f.write("\n".join(lines) + "\n")
            lines = []
    dense_width = cols["dense"][0].shape[1]
    desc = ['name: "MultiSlotDataFeed"', "batch_size: %d" % n, "multi_slot_desc {"]
    for s in slots:
        desc += ["  slots {", '    name: "%s"' % s, '    type: "uint64"', "    is_dense: false",
                 "    is_used: true", "  }"]
    desc += ["  slots {", '    name: "dense"', '    type: "float"', "    is_dense: true", "    is_used: true",
             "    shape: -1", "    shape: %d" % dense_width, "  }"]
    desc += ["  slots {", '    name: "label"', '    type: "uint64"', "    is_dense: true", "    is_used: true",
             "    shape: -1", "    shape: 1", "  }", "}"]
    with open(os.path.join(out, "data.desc"), "w") as f:
        f.write("\n".join(desc) + "\n")
    print("%s: batch %d, 2 files" % (model, n))


if __name__ == "__main__":
    mlp()
    ctr()
