#!/usr/bin/env python3
"""The cost model of a training step in docs/scaling.md, for a dense model.

One formula per mode, in seconds per trainer step (N trainers, k pservers,
S bytes of parameters, B bytes/s per host and direction, a seconds per round
trip, C seconds of compute per step, o seconds of pserver merge+optimize per
byte of gradient it receives, K = GEO-SGD's need_push_nums):

  sync pserver   C + 2 (S/B) max(1, N/k) + 4a + o N S/k
  async pserver  trainer: C + 2 S/B + 2a, and the pservers serve at most
                 min(k B/S, k/(o S)) trainer steps per second
  GEO-SGD        trainer: C + (2 S/B + 2a)/K, the pservers at most
                 K min(k B/S, k/(o S)) trainer steps per second
  nccl2 ring     C + 2 (N-1)/N S/B + 2 (N-1) a

`scaling_model.py predict` prints one figure (examples/s of the job);
`scaling_model.py table` the predictions for 4..64 trainers at the given
link rates. Used by bench/scaling_bench.sh to validate on rate-limited veth
links; the figures in docs/scaling.md come from here.
"""
import argparse
import sys

MODES = ("sync", "async", "geo", "ring")


def steps_per_second(mode, n, k, s, b, a, c, o, geo_k):
    """Trainer steps per second of the whole job (all N trainers)."""
    if mode == "sync":
        t = c + 2 * (s / b) * max(1.0, n / k) + 4 * a + o * n * s / k
        return n / t
    if mode == "ring":
        t = c + 2 * (n - 1) / n * s / b + 2 * (n - 1) * a
        return n / t
    serve = min(k * b / s, k / (o * s) if o > 0 else float("inf"))  # pserver-bound trainer steps/s
    if mode == "async":
        return min(n / (c + 2 * s / b + 2 * a), serve)
    if mode == "geo":
        return min(n / (c + (2 * s / b + 2 * a) / geo_k), geo_k * serve)
    raise ValueError(mode)


def add_common(p):
    p.add_argument("--param_bytes", type=float, required=True, help="S: bytes of dense parameters")
    p.add_argument("--compute_ms", type=float, required=True, help="C: a trainer's compute per step, ms")
    p.add_argument("--rtt_us", type=float, default=100.0, help="a: one round trip, microseconds")
    p.add_argument("--optimize_ns_per_byte", type=float, default=0.0,
                   help="o: pserver merge+optimize time per gradient byte received, ns")
    p.add_argument("--batch", type=int, default=128, help="examples per trainer step")
    p.add_argument("--geo_push_nums", type=int, default=20, help="K: GEO-SGD's need_push_nums")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    pr = sub.add_parser("predict", help="one job's examples/s")
    add_common(pr)
    pr.add_argument("--mode", choices=MODES, required=True)
    pr.add_argument("--trainers", type=int, required=True)
    pr.add_argument("--pservers", type=int, default=1)
    pr.add_argument("--gbps", type=float, required=True, help="B: link rate, Gb/s")
    tb = sub.add_parser("table", help="predictions for 4..64 trainers")
    add_common(tb)
    tb.add_argument("--gbps", type=float, nargs="+", default=[10.0, 25.0])
    tb.add_argument("--efficiency", type=float, default=0.9,
                    help="payload rate / line rate (TCP/IP headers, pacing); 0.9 for 1500-byte frames")
    tb.add_argument("--trainers_per_pserver", type=int, default=2, help="k = N / this")
    args = ap.parse_args(argv)
    common = dict(s=args.param_bytes, a=args.rtt_us * 1e-6, c=args.compute_ms * 1e-3,
                  o=args.optimize_ns_per_byte * 1e-9, geo_k=args.geo_push_nums)
    if args.cmd == "predict":
        sps = steps_per_second(args.mode, args.trainers, args.pservers, b=args.gbps * 1e9 / 8, **common)
        print(f"{sps * args.batch:.0f}")
        return 0
    one = args.batch / (args.compute_ms * 1e-3)  # one process, the same compute
    print(f"examples/s (x one trainer's {one:.0f}); S={args.param_bytes / 1e6:.2f} MB, C={args.compute_ms} ms, "
          f"a={args.rtt_us} us, o={args.optimize_ns_per_byte} ns/B, K={args.geo_push_nums}, "
          f"k=N/{args.trainers_per_pserver}, payload {args.efficiency:.0%} of the line")
    for gbps in args.gbps:
        b = gbps * args.efficiency * 1e9 / 8
        print(f"\n{gbps:g} Gb/s     " + "".join(f"{m:>20}" for m in MODES))
        for n in (4, 8, 16, 32, 64):
            k = max(1, n // args.trainers_per_pserver)
            cells = []
            for m in MODES:
                eps = steps_per_second(m, n, k, b=b, **common) * args.batch
                cells.append(f"{eps:>11.0f} ({eps / one:5.1f}x)")
            print(f"N={n:<3} k={k:<3}   " + "".join(f"{c:>20}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
