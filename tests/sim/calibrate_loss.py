#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The model under loss against the lab: the times tests/bench/run-loss.sh
measured (docs/performance/loss.csv: N ranks, one a host, manager mode, 200
Mbit/s, the switch losing each frame on each link with probability P) beside
inca-sim --per-packet --loss P on the lab's shape (calibrate.py's inputs for
that rate and N ranks from the runs of 2026-11-23, calibrate.LAB_BBR, whose
shapes the loss lab's are: 200mbit or 1gbit, 2, 4 or 8 ranks; one call a run,
so without the shaper's bucket, which the lab's calls found spent), the median of
seeds 1-5. Two models: with the RTO
inca-sim takes by default (1 ms, libinca's minimum), and with the RTO
libinca's rank 0 ended the lab's job with (the CSV's rto_us: an input taken
from the run, as the CPU per packet is). Per point the error of the time
(model / lab - 1) and of the slowdown loss brings (model(P)/model(0) against
lab(P)/lab(0)). Prints every point; nothing is run on the real system.

Usage: tests/sim/calibrate_loss.py [--build build] [--csv OUT.csv]
"""
import argparse
import csv
import os
import statistics
import sys

import calibrate
import simlib

SEEDS = range(1, 6)


def load_loss():
    with open(os.path.join(simlib.ROOT, "docs", "performance", "loss.csv")) as f:
        return [dict(r, loss=float(r["loss_pct"]) / 100, ranks=int(r["ranks"]),
                     bytes=int(r["bytes"]), lab_us=float(r["time_us"]),
                     rto_lab_s=float(r["rto_us"]) * 1e-6) for r in csv.DictReader(f)]


def model_us(build, shape, size, loss, rto=None):
    """The median over SEEDS of inca-sim's time, packet by packet."""
    t = [float(simlib.inca_sim(build, bytes=size, per_packet=True, loss=loss or None,
                               seed=s, rto=rto, **shape)["time_us"])
         for s in (SEEDS if loss else [1])]
    return statistics.median(t)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--csv", help="write every point here")
    a = ap.parse_args()
    rows, floor = calibrate.load_lab(calibrate.LAB_BBR)
    lab = load_loss()
    for r in lab:
        if (r["rate"], "inca-udp", r["ranks"], 8) not in rows or \
                (r["rate"], r["ranks"], "ping-host") not in floor:
            print("calibrate_loss.py: docs/performance/loss.csv has %s with %d ranks; the "
                  "lab's calibrated shapes are %s" % (
                      r["rate"], r["ranks"], ", ".join(
                          "%s with %d ranks" % (k[0], k[1]) for k in sorted(floor)
                          if k[2] == "ping-host")), file=sys.stderr)
            return 1
    shapes, lossless, out = {}, {}, []
    base = {(r["rate"], r["ranks"], r["bytes"]): r["lab_us"] for r in lab if r["loss"] == 0}
    for r in lab:
        n, size, key = r["ranks"], r["bytes"], (r["rate"], r["ranks"])
        if key not in shapes:
            # one call each, packet by packet: the shaper's bucket would
            # start full, where the lab's calls (10 a size, back to back)
            # found it spent; without it the cable runs at the rate
            shapes[key] = calibrate.lab_shape(a.build, rows, floor, r["rate"], n, shaper=False)
            print("# %d ranks at %s: cable %.1f us, %.1f us a call" % (
                n, r["rate"], shapes[key]["latency"] * 1e6,
                shapes[key]["call_overhead"] * 1e6), flush=True)
        # the CPU a packet the lab's lossless calls of this size spent
        shape = dict(shapes[key], host_ns=calibrate.host_ns(rows, n, size, r["rate"]))
        if (key, size) not in lossless:
            lossless[(key, size)] = model_us(a.build, shape, size, 0)
        m0 = lossless[(key, size)]
        m1 = model_us(a.build, shape, size, r["loss"]) if r["loss"] else m0
        mr = model_us(a.build, shape, size, r["loss"], r["rto_lab_s"]) if r["loss"] else m0
        o = dict(rate=r["rate"], loss_pct=r["loss_pct"], ranks=n, bytes=size, lab_us=r["lab_us"],
                 retransmissions=r["retransmissions"], rto_lab_us=r["rto_us"],
                 model_us=m1, err=calibrate.err(m1, r["lab_us"]),
                 model_lab_rto_us=mr, err_lab_rto=calibrate.err(mr, r["lab_us"]))
        if (r["rate"], n, size) in base:
            slow = r["lab_us"] / base[(r["rate"], n, size)]
            o.update(lab_slowdown=slow, model_slowdown=m1 / m0,
                     model_lab_rto_slowdown=mr / m0)
        out.append(o)
    print("%6s %5s %9s | %11s %9s | %11s %7s | %11s %7s | %8s %8s %8s" % (
        "loss%", "ranks", "bytes", "lab", "lab rto", "model 1ms", "err", "model rto",
        "err", "lab x", "1ms x", "rto x"))
    for o in out:
        print("%6s %5d %9d | %11.1f %9s | %11.1f %+6.1f%% | %11.1f %+6.1f%% | %8.2f %8.2f %8.2f" % (
            o["loss_pct"], o["ranks"], o["bytes"], o["lab_us"], o["rto_lab_us"], o["model_us"],
            100 * o["err"], o["model_lab_rto_us"], 100 * o["err_lab_rto"],
            o.get("lab_slowdown", 0), o.get("model_slowdown", 0),
            o.get("model_lab_rto_slowdown", 0)))
    lossy = [o for o in out if float(o["loss_pct"]) > 0]
    print("# lossless rows: " + calibrate.summary("the model", [o["err"] for o in out
                                                      if float(o["loss_pct"]) == 0]))
    print("# lossy rows, 1 ms RTO: " + calibrate.summary("time", [o["err"] for o in lossy]))
    print("# lossy rows, the lab's RTO: " + calibrate.summary("time", [o["err_lab_rto"] for o in lossy]))
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(out[0]) + [
                k for k in ("lab_slowdown", "model_slowdown", "model_lab_rto_slowdown")
                if k not in out[0]])
            w.writeheader()
            w.writerows(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
