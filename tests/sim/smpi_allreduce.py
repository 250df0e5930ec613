#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The baseline at its best in SimGrid: the project's own mpi-allreduce-perf
(tests/bench/mpi_allreduce_perf.c) built with smpicc and run by smpirun, one
rank per host, with SMPI's ring (lr), Rabenseifner (rab1, rab2, rab_rdb) and
recursive doubling (rdb); per size every algorithm's time and the fastest.
Links: RATE x 1448/1538 (TCP's payload), LATENCY a cable.

Usage: tests/sim/smpi_allreduce.py [--build build] [--hosts 4] [--rate 200e6]
         [--latency 11e-6] [--tiers 1] [--min 4096] [--max 16777216]
"""
import argparse
import sys

import simlib


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--rate", type=float, default=200e6)
    ap.add_argument("--latency", type=float, default=11e-6)
    ap.add_argument("--tiers", type=int, default=1, choices=[1, 2, 3])
    ap.add_argument("--min", type=int, default=4096)
    ap.add_argument("--max", type=int, default=16 << 20)
    a = ap.parse_args()
    sizes = []
    s = a.min
    while s <= a.max:
        sizes.append(s)
        s *= 2
    res = simlib.smpi_allreduce(a.build, a.hosts, a.rate, a.latency, sizes, tiers=a.tiers)
    if not res:
        print("smpi_allreduce.py: no algorithm ran", file=sys.stderr)
        return 1
    algos = sorted(res)
    print("# %d hosts, %.3g bit/s, %.3g s a cable, %d tier(s): time (us)"
          % (a.hosts, a.rate, a.latency, a.tiers))
    print("%12s " % "bytes" + " ".join("%12s" % x for x in algos) + " %12s %8s" % ("best", "algo"))
    for size in sizes:
        t, algo = simlib.best(res, size)
        print("%12d " % size + " ".join("%12s" % ("%.1f" % res[x][size] if size in res[x] else "-")
                                        for x in algos) +
              " %12s %8s" % ("%.1f" % t if t else "-", algo or "-"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
