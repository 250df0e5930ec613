#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The model of the lab against the lab: 4 and 8 hosts on one switch, 200
Mbit/s and 1 Gbit/s, 4 KiB to 16 MiB, against the times run-allreduce.sh
measured (docs/performance/pinned-period/run1/allreduce.csv: inca-udp and
openmpi-ring, every rank on CPU 0, the switch's worker alone on CPU 1),
and their periods (cpus.csv: a rank's calls back to back, the rate they go
at). Prints the error of every point; nothing is run on the real system.

The lab as modelled (tests/bench/run-allreduce.sh, docs/performance.md):
* one inca-switch, one worker core, costs from the committed inca-bench-switch
  output; window 64, 248 floats a packet in 1114 bytes on the wire;
* every cable one way a quarter of the measured host-to-host ping
  (the run's floor.csv: a ping crosses four cables); the switch's
  egress ports shaped to the rate by a token bucket of 1 ms (its shaper,
  dp_qos.c: burst()), a host's way up, a veth into the switch, not shaped
  (UP_RATE);
* the calls back to back as run-allreduce.sh times them (calls(), the
  warm-ups not timed), the median of each call's slowest rank, and the
  period (inca-sim's period_us);
* the ranks share one core (2 cores, the switch's worker busy-polling the
  other: run-allreduce.sh --rank-cpus 0 puts them there), which runs one
  burst of a rank's work at a time in the order
  they became ready, each packet (ring: each byte) costing a rank the CPU
  it measured on calls of that size (in-network: its share of CPU 0's busy
  time, the CSV's core_s_per_GB where the run has it, else getrusage's
  cpu_s_per_GB, at the rate modelled, less what libinca spent polling for
  results (cpus.csv's spin_us), the call's CPU spread over its packets;
  Open MPI: getrusage's at 1 Gbit/s, RING_CPU_RATE), overlapping the
  wire; a ring's next block
  comes into a rank while it is busy (TCP fills its buffers);
* in-network, a fixed cost per call fitted to the 8-byte calls (the median
  over the run's latency rounds, else the sweep's 8-byte row; outside the
  range judged); the rings none.
The CPU is an input at every size: where the lab is CPU-bound its time is
close to its ranks' CPU on one core, and agreement there checks how the
model shares the core, not a prediction of the CPU.
In-network: inca-sim. Open MPI: SMPI's ring (lr, what the lab's rules pick
from 4 KiB) on links at the rate x 1448/1538, network only ('smpi'), and
inca-sim's own ring with the measured CPU per byte on the shared core
('ring+cpu').

Usage: tests/sim/calibrate.py [--build build] [--csv OUT.csv] [--lab DIR]
"""
import argparse
import csv
import math
import os
import statistics
import sys

import simlib

SIZES = [4096 << i for i in range(13)]            # 4 KiB .. 16 MiB
RATES = {"200mbit": 200e6, "1gbit": 1e9}
RANKS = [4, 8]
LIMIT = 0.15
# the lab's host side of a cable, a veth into the switch: not shaped (the
# switch shapes its egress ports, dp_qos.c); what limits it is the CPU,
# counted apart. 10 Gbit/s is the speed a veth reports.
UP_RATE = 10e9
# The CPU a rank spends, per size (in-network: core_per_gb(), CPU 0's busy
# time where the run has it, else getrusage's cpu_s_per_GB; Open MPI:
# getrusage): libinca's at the rate modelled (its ranks sleep while they
# wait, after polling for up to 50 us, bound as they are: the polls, which
# libinca counts, are taken out, host_ns()); Open MPI's at 1 Gbit/s, where
# the CPU is what limits (its
# ranks poll while they wait, and oversubscribed they yield the core to the
# others as they poll: at 200 Mbit/s getrusage counts that polling too).
RING_CPU_RATE = "1gbit"
# floats a packet (IB MTU 1024), and the bytes a packet carries besides them
# on the wire (inca-sim's --elems and --header)
ELEMS = 248
PAYLOAD = ELEMS * 4
WIRE_HEADER = 122


def burst(rate):
    """The switch's shaper: a token bucket of 1 ms at the rate, at least two
    jumbo frames (dp_qos.c)."""
    return max(rate / 8 / 1000, 2 * 9018)


WARMUP = 3


def calls(size):
    """The calls run-allreduce.sh runs back to back at this size: WARMUP to
    warm up (inca-sim --warmup: not timed), then 200 up to 64 KiB and 20
    above (-w 3 -N 200 -n 20)."""
    return WARMUP + (200 if size <= 65536 else 20)


PERF = os.path.join(simlib.ROOT, "docs", "performance")
# The lab as run-allreduce.sh runs it with every rank of both sides on CPU
# 0 and the switch's worker alone on CPU 1, as the model has them
# (--rank-cpus 0), the hosts' TCP cubic asking for ECN (deploy/testbed
# --tcp, the default since 2026-11-29): --ranks "4 8" --repeat 2
# --rank-cpus 0 of 2026-11-29 (twenty-first session, with the periods and
# libinca's polls counted: cpus.csv), its runs in run1/, run2/; the same
# command's runs of the session before (no cpus.csv) in pinned-cal/
LAB = os.path.join(PERF, "pinned-period", "run1")
LAB_RUN2 = os.path.join(PERF, "pinned-period", "run2")
# The same with the ranks left to the scheduler, some on the worker's CPU
# (a job's small calls then sit on one of two levels: docs/performance.md),
# the same day
LAB_UNPINNED = os.path.join(PERF, "cubic-full", "run1")
LAB_UNPINNED_RUN2 = os.path.join(PERF, "cubic-full", "run2")
# The ranks left to the scheduler with Open MPI's eager limit at 1 MiB
# (OMPI_EAGER_LIMIT=1048576, deploy/jobs.sh), the same day
LAB_EAGER = os.path.join(PERF, "eager")
# The runs of 2026-11-23 (--repeat 2), the hosts on the kernel's BBR, which
# ignores the switch's ECN marks, lost frames in its lossy queues and held
# Open MPI's ring back; the lab under loss (calibrate_loss.py) was fitted to
# their shapes
LAB_BBR = PERF
LAB_BBR_RUN2 = os.path.join(PERF, "run2")


# floor's key for the median of libinca's 8-byte calls over the latency rounds
ROUNDS_8B = "inca-udp 8 B, rounds"


def load_lab(lab=LAB):
    """run-allreduce.sh's allreduce.csv and floor.csv in the folder lab; and,
    where it ran latency rounds (latency.csv), the median of libinca's
    8-byte calls over them, in floor as ROUNDS_8B; where it wrote cpus.csv,
    each row's period (rank 0's calls back to back) as its period_us and
    libinca's polling for results as spin_us (CPU a call, a rank)."""
    rows, floor = {}, {}
    with open(os.path.join(lab, "allreduce.csv")) as f:
        for r in csv.DictReader(f):
            rows[(r["rate"], r["tool"], int(r["ranks"]), int(r["bytes"]))] = r
    if os.path.exists(os.path.join(lab, "cpus.csv")):
        with open(os.path.join(lab, "cpus.csv")) as f:
            for r in csv.DictReader(f):
                k = (r["rate"], r["tool"], int(r["ranks"]), int(r["bytes"]))
                if k in rows:
                    rows[k]["period_us"] = r["period_us"]
                    rows[k]["spin_us"] = r.get("spin_us")
    with open(os.path.join(lab, "floor.csv")) as f:
        for r in csv.DictReader(f):
            floor[(r["rate"], int(r["ranks"]), r["what"])] = float(r["median_us"])
    rounds = {}
    if os.path.exists(os.path.join(lab, "latency.csv")):
        with open(os.path.join(lab, "latency.csv")) as f:
            for r in csv.DictReader(f):
                if r["tool"] == "inca-udp" and int(r["bytes"]) == 8:
                    rounds.setdefault((r["rate"], int(r["ranks"])), []).append(
                        float(r["time_us"]))
    for (rate, n), t in rounds.items():
        floor[(rate, n, ROUNDS_8B)] = statistics.median(t)
    return rows, floor


def cpu_per_gb(rows, tool, n, size, rate):
    """CPU-s a GB a rank spent on calls of this size at this rate (getrusage)."""
    return float(rows[(rate, tool, n, size)]["cpu_s_per_GB"])


def core_per_gb(rows, n, size, rate):
    """In-network: the busy seconds a GB of the ranks' CPU 0, a rank's share
    (the CSV's core_s_per_GB: CPU 0's wall time less its idle residency,
    over the ranks), where the run measured it; else getrusage's CPU. The
    two differ by what runs on CPU 0 without being charged to the ranks."""
    r = rows[(rate, "inca-udp", n, size)]
    core = r.get("core_s_per_GB")
    if core and core != "-":
        return float(core)
    return cpu_per_gb(rows, "inca-udp", n, size, rate)


def host_ns(rows, n, size, rate):
    """In-network: the CPU a rank spent a packet on calls of this size (its
    share of CPU 0's busy time where the run measured it, core_per_gb),
    less what it spent polling for results not there yet where the run
    counted it (spin_us: libinca's spin_cpu_us; the polls yield the core to
    any rank ready to work, so they are waiting, not work). The CSV's
    figure is per byte reduced, and inca-sim charges it per packet, a last
    one partly filled (4 KiB: 5 packets of up to 992 bytes) the same as a
    full one: the call's bytes over its packets."""
    call_ns = core_per_gb(rows, n, size, rate) * size
    spin = rows[(rate, "inca-udp", n, size)].get("spin_us")
    if spin:
        call_ns -= float(spin) * 1e3
    if call_ns < 0:
        # defensive: the polls are part of the CPU measured, never more
        print("# %s, %d ranks, %d B: the spin (%s us) exceeds the CPU: taken as 0"
              % (rate, n, size, spin), file=sys.stderr)
        call_ns = 0.0
    return call_ns / math.ceil(size / PAYLOAD)


def spin_share(rows, n, size, rate):
    """The share of a rank's CPU on calls of this size that polled for
    results not there yet (None where the run did not count it)."""
    spin = rows[(rate, "inca-udp", n, size)].get("spin_us")
    if not spin:
        return None
    return float(spin) * 1e3 / (core_per_gb(rows, n, size, rate) * size)


def wire_bytes(size):
    """A host's results of a call of this size on the wire (inca-sim's
    wire_bytes)."""
    return size + math.ceil(size / PAYLOAD) * WIRE_HEADER


def err(model, measured):
    return (model - measured) / measured


def summary(name, errs):
    """How many of the errors (model / lab - 1) are within LIMIT."""
    e = [abs(x) for x in errs]
    return "%s: %d of %d points within %d%%, largest %.1f%%, median %.1f%%" % (
        name, sum(x <= LIMIT for x in e), len(e), 100 * LIMIT, 100 * max(e),
        100 * statistics.median(e))


def lab_shape(build, rows, floor, rate_name, n, shaper=True):
    """The lab at rate_name with n ranks as inca-sim options: the shape, and
    the fixed cost per call fitted to the 8-byte row as call_overhead (the
    CPU a packet, host_ns(), is the caller's: it depends on the size).
    shaper False: no token bucket, the cable at the rate (the fit then
    without it too)."""
    lat = floor[(rate_name, n, "ping-host")] / 4 * 1e-6
    lab = dict(hosts=n, rate=RATES[rate_name], up_rate=UP_RATE, latency=lat, shared_cpu=1,
               cores=1, window=64, elems=ELEMS)
    if shaper:
        lab["burst"] = burst(RATES[rate_name])
    inca_cpu = host_ns(rows, n, 8, rate_name)   # the one packet of the 8-byte call
    # the fixed cost per call, from the 8-byte calls: the median over the
    # latency rounds where the run had them (the sweep's 8-byte row is its
    # first, and moved from 112 to 360 us between two runs of the same
    # shape), else that row. The model is linear in it (0 and 10 us)
    t8 = floor.get((rate_name, n, ROUNDS_8B),
                   float(rows[(rate_name, "inca-udp", n, 8)]["time_us"]))
    m0 = float(simlib.inca_sim(build, bytes=8, host_ns=inca_cpu, **lab)["time_us"])
    m1 = float(simlib.inca_sim(build, bytes=8, host_ns=inca_cpu, call_overhead=1e-5,
                               **lab)["time_us"])
    call = max(0.0, (t8 - m0) / (m1 - m0) * 1e-5)
    return dict(lab, call_overhead=call)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--csv", help="write every point here")
    ap.add_argument("--lab", default=LAB, help="the lab's run: a folder with run-allreduce.sh's "
                    "allreduce.csv and floor.csv, and cpus.csv where it has them (default "
                    "docs/performance/pinned-period/run1; its second run: "
                    "docs/performance/pinned-period/run2; the session before's: "
                    "docs/performance/pinned-cal/run1 and run2; the ranks left to the "
                    "scheduler: docs/performance/cubic-full/run1 and run2; with Open MPI's "
                    "eager limit at 1 MiB: docs/performance/eager; the runs with the hosts' "
                    "TCP on BBR: docs/performance and docs/performance/run2)")
    a = ap.parse_args()
    rows, floor = load_lab(a.lab)
    out = []
    for rate_name, rate in RATES.items():
        for n in RANKS:
            lab = lab_shape(a.build, rows, floor, rate_name, n)
            call, lat = lab.pop("call_overhead"), lab["latency"]
            inca_cpu = [host_ns(rows, n, s, rate_name) for s in SIZES]
            ring_cpu = [cpu_per_gb(rows, "openmpi-ring", n, s, RING_CPU_RATE) for s in SIZES]   # ns a byte
            smpi = simlib.smpi_allreduce(a.build, n, rate, lat, SIZES, algos=["lr"])
            spin = [spin_share(rows, n, s, rate_name) for s in SIZES]
            print("# %s, %d ranks: cable %.1f us, in-network %.0f-%.0f ns CPU a packet%s, ring "
                  "%.2f-%.2f ns a byte, %.1f us a call" % (
                      rate_name, n, lat * 1e6, min(inca_cpu), max(inca_cpu),
                      " (less the polls for results not there yet: %.0f-%.0f%% of the CPU)"
                      % (100 * min(spin), 100 * max(spin)) if None not in spin else "",
                      min(ring_cpu), max(ring_cpu), call * 1e6), flush=True)
            for s, ic, rc in zip(SIZES, inca_cpu, ring_cpu):
                mi = simlib.inca_sim(a.build, bytes=s, host_ns=ic, call_overhead=call,
                                     calls=calls(s), warmup=WARMUP, **lab)
                mr = simlib.inca_sim(a.build, bytes=s, ring=True, ring_ns_per_byte=rc,
                                     calls=calls(s), warmup=WARMUP, **lab)
                ms = smpi.get("lr", {}).get(s)
                ri = rows[(rate_name, "inca-udp", n, s)]
                ro = rows[(rate_name, "openmpi-ring", n, s)]
                li, lo = float(ri["time_us"]), float(ro["time_us"])
                # the periods: the rate calls go at (the lab's where it
                # wrote them, cpus.csv)
                pi, po = ri.get("period_us"), ro.get("period_us")
                mpi, mpr = float(mi["period_us"]), float(mr["period_us"])
                out.append(dict(rate=rate_name, ranks=n, bytes=s, inca_lab_us=li,
                                inca_model_us=float(mi["time_us"]),
                                inca_err=err(float(mi["time_us"]), li), ompi_lab_us=lo,
                                smpi_ring_us=ms, smpi_err=err(ms, lo) if ms else None,
                                ring_cpu_us=float(mr["time_us"]),
                                ring_cpu_err=err(float(mr["time_us"]), lo),
                                inca_lab_period_us=float(pi) if pi else None,
                                inca_model_period_us=mpi,
                                inca_period_err=err(mpi, float(pi)) if pi else None,
                                ompi_lab_period_us=float(po) if po else None,
                                ring_cpu_period_us=mpr,
                                ring_cpu_period_err=err(mpr, float(po)) if po else None))
    print("%-7s %5s %9s | %11s %11s %7s | %11s %11s %7s %11s %7s" % (
        "rate", "ranks", "bytes", "inca lab", "inca model", "err", "ompi lab", "smpi ring",
        "err", "ring+cpu", "err"))
    for o in out:
        print("%-7s %5d %9d | %11.1f %11.1f %+6.1f%% | %11.1f %11s %7s %11.1f %+6.1f%%" % (
            o["rate"], o["ranks"], o["bytes"], o["inca_lab_us"], o["inca_model_us"],
            100 * o["inca_err"], o["ompi_lab_us"],
            "%.1f" % o["smpi_ring_us"] if o["smpi_ring_us"] else "-",
            "%+.1f%%" % (100 * o["smpi_err"]) if o["smpi_err"] is not None else "-",
            o["ring_cpu_us"], 100 * o["ring_cpu_err"]))
    def cell(v, f):
        return f % v if v is not None else "-"
    if any(o["inca_period_err"] is not None for o in out):
        print("# the periods (calls back to back, the rate they go at): lab and model")
        print("%-7s %5s %9s | %11s %11s %7s | %11s %11s %7s" % (
            "rate", "ranks", "bytes", "inca lab", "inca model", "err", "ompi lab", "ring+cpu",
            "err"))
        for o in out:
            print("%-7s %5d %9d | %11s %11.1f %7s | %11s %11.1f %7s" % (
                o["rate"], o["ranks"], o["bytes"], cell(o["inca_lab_period_us"], "%.1f"),
                o["inca_model_period_us"], cell(o["inca_period_err"] and
                                                100 * o["inca_period_err"], "%+.1f%%"),
                cell(o["ompi_lab_period_us"], "%.1f"), o["ring_cpu_period_us"],
                cell(o["ring_cpu_period_err"] and 100 * o["ring_cpu_period_err"],
                     "%+.1f%%")))
    for rate_name in RATES:
        for key, what in (("inca_err", "in-network"), ("smpi_err", "Open MPI, smpi ring"),
                          ("ring_cpu_err", "Open MPI, ring+cpu"),
                          ("inca_period_err", "in-network, period"),
                          ("ring_cpu_period_err", "Open MPI, ring+cpu, period")):
            e = [o[key] for o in out if o["rate"] == rate_name and o[key] is not None]
            if e:
                print("# " + summary("%s %s" % (rate_name, what), e))
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(out[0]))
            w.writeheader()
            w.writerows(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
