#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Writes docs/scale.md: the model's calibration against the lab, how its
coarse unit agrees with packets, and its projections to 8192 hosts (in-network
against the best host algorithm), with what it leaves out.

Steps (each result also kept as CSV under docs/scale/; --reuse takes the
steps 1-4 from there instead of simulating them again, --recalibrate with
it runs step 1 again):
1. calibrate.py: the lab's shapes against the lab as run-allreduce.sh runs
   it with every rank on CPU 0 and the switch's worker alone on CPU 1, as
   the model has them (docs/performance/pinned-period/run1: --rank-cpus 0,
   the hosts' TCP cubic asking for ECN) and its second run (run2), and the
   two runs against each other; the same for the runs with the ranks left
   to the scheduler (docs/performance/cubic-full); against a run with Open
   MPI's eager limit at 1 MiB (docs/performance/eager) and the runs of
   2026-11-23 with BBR (docs/performance);
   calibrate_loss.py: the model under loss against docs/performance/loss.csv;
2. chunks against packets on small fabrics; chunk counts at 1024 hosts;
3. the baseline: SMPI (smpirun, mpi-allreduce-perf built with smpicc) at 64
   hosts (and at 128 and 256 for 8 B and 64 KiB) on a two-level fat-tree,
   against the latency-bandwidth formulas of the ring, Rabenseifner and
   recursive doubling; beyond that the best formula (SMPI's runs of
   thousands of ranks do not fit the time here);
4. in-network (inca-sim) on generated fat-trees, 64..8192 hosts, 100 and 400
   Gbit/s, 8 B .. 1 GiB, every switch node with the cores line rate needs
   (--cores auto) and the window its round trip needs (--window auto);
5. eight ranks a host: libinca's in-host phases (calibrate_host.py: the
   model's in-host inputs fitted to libinca on this host, from
   docs/scale/host-lab.csv) around the network phase of step 4, for the
   leader, rails and the host algorithms' hierarchical form; checked
   against inca-sim --ranks-per-host on 64 hosts;
6. PNG plots of the projections (docs/scale/time.png, speedup.png; with
   python3-matplotlib, which install-deps installs).

Usage: tests/sim/scale.py [--build build] [--reuse [--recalibrate]] [--out docs/scale.md]
"""
import argparse
import csv
import json
import math
import os
import subprocess
import sys
import time

import calibrate
import calibrate_host
import simlib

LATENCY = 1e-6             # a cable, one way
ELEMS = 1024               # floats a packet: 4 KiB payloads (RoCE MTU 4096)
SIZES = [8, 65536, 16 << 20, 1 << 30]
RATES = [100e9, 400e9]
# (tiers, hosts): three tiers from 512 hosts (one pod holds 256)
SHAPES = [(2, 64), (2, 1024), (3, 1024), (3, 8192)]
# each run bounded; fewer chunks from BIG_HOSTS on if a sweep must be
# shorter (off: 16 chunks made 8192 hosts x 1 GiB 30% slower than 64 did,
# which took 94 s here)
BIG_HOSTS, BIG_CHUNKS, RUN_TIMEOUT = 1 << 30, 16, 240
FABRIC = dict(hosts_per_leaf=32, spines=4, leaves_per_pod=8, supers_per_plane=4)
SMPI_HOSTS = 64
SMPI_SIZES = [8, 65536, 16 << 20]
SMPI_RATES = [100e9]
# one of each family (ring, Rabenseifner, recursive doubling): an smpirun of
# 64 ranks and 16 MiB takes about 30 s here
SMPI_CHECK_ALGOS = ["lr", "rab1", "rdb"]
# beyond SMPI_HOSTS, small sizes only: 256 ranks at 8 B and 64 KiB take about
# two minutes here, 16 MiB far longer
SMPI_MORE = [(128, [8, 65536]), (256, [8, 65536])]
LIMIT = 0.15
PER_HOST = 8


def fmt_bytes(b):
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= k:
            return "%d %s" % (b // k, unit)
    return "%d B" % b


def fmt_us(us):
    if us >= 1e6:
        return "%.3f s" % (us / 1e6)
    if us >= 1e3:
        return "%.2f ms" % (us / 1e3)
    return "%.1f us" % us


def step_latency(distance, tiers):
    """One way between hosts `distance` apart in rank order (ranks fill the
    leaves in order): 2 cables within a leaf, 4 within a pod (or two tiers),
    6 across pods."""
    hpl, pod = FABRIC["hosts_per_leaf"], FABRIC["hosts_per_leaf"] * FABRIC["leaves_per_pod"]
    if distance < hpl:
        cables = 2
    elif tiers == 2 or distance < pod:
        cables = 4
    else:
        cables = 6
    return cables * LATENCY


def formulas(n, size, rate, tiers):
    """The host algorithms' times (us) by the latency-bandwidth model, each
    step its bytes over the link's TCP payload rate plus the latency to its
    partner: recursive doubling and Rabenseifner's step k talks to the rank
    2^k away (within a leaf while 2^k < 32); the ring's steps wait for its
    farthest pair (leaf to leaf across the fabric)."""
    beta = 1 / (rate / 8 * simlib.TCP_EFFICIENCY)
    lg = math.ceil(math.log2(n))
    alphas = [step_latency(1 << k, tiers) for k in range(lg)]
    worst = step_latency(n - 1, tiers) if n > 1 else 0
    return {
        "ring": 1e6 * 2 * (n - 1) * (worst + size / n * beta),
        "rabenseifner": 1e6 * (2 * sum(alphas) + 2 * (n - 1) / n * size * beta),
        "recursive doubling": 1e6 * (sum(alphas) + lg * size * beta),
    }


def best_formula(n, size, rate, tiers):
    f = formulas(n, size, rate, tiers)
    algo = min(f, key=f.get)
    return f[algo], algo


def run_script(script, build, path, *args):
    """tests/sim/SCRIPT writing its points to path: those rows, and the
    summary lines it printed ("# ...")."""
    out = subprocess.run(["/usr/bin/python3", os.path.join(simlib.HERE, script),
                          "--build", build, "--csv", path] + list(args), check=True,
                         capture_output=True, text=True).stdout
    notes = [l[2:] for l in out.splitlines() if l.startswith("# ")]
    return list(csv.DictReader(open(path))), notes


def run_calibration(build, outdir, name="calibration.csv", *args):
    rows, notes = run_script("calibrate.py", build, os.path.join(outdir, name), *args)
    return (rows, [l for l in notes if "points" in l], [l for l in notes if "cable" in l])


def lab_repeat(run1, run2):
    """Two runs of the lab against each other: run 2 / run 1 - 1 at every
    point, summed up per rate and side."""
    one, _ = calibrate.load_lab(run1)
    two, _ = calibrate.load_lab(run2)
    repeat = []
    for rate in calibrate.RATES:
        for tool, what in (("inca-udp", "in-network"), ("openmpi-ring", "Open MPI")):
            d = [float(two[k]["time_us"]) / float(one[k]["time_us"]) - 1
                 for k in ((rate, tool, n, size) for n in calibrate.RANKS
                           for size in calibrate.SIZES)]
            repeat.append(calibrate.summary("%s %s, run 2 against run 1" % (rate, what), d))
    return repeat


def run_calibration_run2(build, outdir):
    """The model against the lab's second run (its own inputs), and the two
    runs against each other."""
    _, summary, _ = run_calibration(build, outdir, "calibration-run2.csv", "--lab",
                                    calibrate.LAB_RUN2)
    return summary, lab_repeat(calibrate.LAB, calibrate.LAB_RUN2)


def run_calibration_unpinned(build, outdir):
    """The model against the runs with the ranks left to the scheduler
    (docs/performance/cubic-full, each its own inputs), and those two runs
    against each other."""
    _, s1, _ = run_calibration(build, outdir, "calibration-unpinned.csv", "--lab",
                               calibrate.LAB_UNPINNED)
    _, s2, _ = run_calibration(build, outdir, "calibration-unpinned-run2.csv", "--lab",
                               calibrate.LAB_UNPINNED_RUN2)
    return (["run 1: " + l for l in s1] + ["run 2: " + l for l in s2],
            lab_repeat(calibrate.LAB_UNPINNED, calibrate.LAB_UNPINNED_RUN2))


def run_calibration_bbr(build, outdir):
    """The model against the lab's runs of 2026-11-23, the hosts' TCP on
    BBR (each with its own inputs): run 1's points, and both runs' summary."""
    rows, summary, _ = run_calibration(build, outdir, "calibration-bbr.csv", "--lab",
                                       calibrate.LAB_BBR)
    _, summary2, _ = run_calibration(build, outdir, "calibration-bbr-run2.csv", "--lab",
                                     calibrate.LAB_BBR_RUN2)
    return rows, ["run 1: " + l for l in summary] + ["run 2: " + l for l in summary2]


def run_calibration_eager(build, outdir):
    """The model against the lab's run with Open MPI's eager limit at 1 MiB
    (its own inputs): the summary."""
    return run_calibration(build, outdir, "calibration-eager.csv", "--lab",
                           calibrate.LAB_EAGER)[1]


def run_loss_calibration(build, outdir):
    rows, notes = run_script("calibrate_loss.py", build,
                             os.path.join(outdir, "loss-calibration.csv"))
    return rows, [l for l in notes if "points" in l]


def run_agreement(build):
    cases = [
        ("lab: 4 hosts, one switch, 200 Mbit/s, 248 floats", dict(hosts=4, rate=200e6)),
        ("2 tiers: 8 hosts, 2 a leaf, 100 Gbit/s, 64 cores", dict(tiers=2, hosts=8,
         hosts_per_leaf=2, spines=2, rate=100e9, cores=64)),
        ("2 tiers, window 8 (window-bound)", dict(tiers=2, hosts=8, hosts_per_leaf=2, spines=2,
         rate=100e9, cores=64, window=8)),
        ("3 tiers: 16 hosts, 2 a leaf, 100 Gbit/s, 1 core", dict(tiers=3, hosts=16,
         hosts_per_leaf=2, spines=2, leaves_per_pod=2, supers_per_plane=1, rate=100e9)),
    ]
    rows = []
    for name, opts in cases:
        for size in (65536, 1 << 20):
            p = float(simlib.inca_sim(build, bytes=size, per_packet=True, **opts)["time_us"])
            c = simlib.inca_sim(build, bytes=size, **opts)
            rows.append((name, size, p, float(c["time_us"]), int(c["chunks"])))
    conv = []
    for k in (16, 64, 256):
        t0 = time.time()
        c = simlib.inca_sim(build, bytes=1 << 30, tiers=3, hosts=1024, rate=100e9, elems=ELEMS,
                            cores="auto", window="auto", chunks=k, latency=LATENCY, **FABRIC)
        conv.append((k, int(c["chunks"]), float(c["time_us"]), time.time() - t0))
    return rows, conv


def run_baseline(build):
    """SMPI at SMPI_HOSTS (and SMPI_MORE's small sizes) on a two-level
    fat-tree against the formulas."""
    rows = []
    for rate in SMPI_RATES:
        for n, sizes in [(SMPI_HOSTS, SMPI_SIZES)] + SMPI_MORE:
            res = simlib.smpi_allreduce(build, n, rate, LATENCY, sizes, tiers=2,
                                        algos=SMPI_CHECK_ALGOS, iters=1, warmup=0, each=True,
                                        timeout=RUN_TIMEOUT)
            for size in sizes:
                t, algo = simlib.best(res, size)
                f, falgo = best_formula(n, size, rate, 2)
                rows.append(dict(rate=rate, hosts=n, bytes=size, smpi_us=t, smpi_algo=algo,
                                 formula_us=f, formula_algo=falgo,
                                 per_algo={a: res[a].get(size) for a in res}))
    return rows


def run_projections(build, path):
    rows = []
    for rate in RATES:
        for tiers, n in SHAPES:
            for size in SIZES:
                t0 = time.time()
                r = simlib.inca_sim(build, timeout=RUN_TIMEOUT, bytes=size, tiers=tiers,
                                    hosts=n, rate=rate, elems=ELEMS, cores="auto",
                                    window="auto", latency=LATENCY,
                                    chunks=BIG_CHUNKS if n >= BIG_HOSTS else None, **FABRIC)
                base, algo = best_formula(n, size, rate, tiers)
                rows.append(dict(rate=rate, tiers=tiers, depth=int(r["tiers"]) if r else "",
                                 hosts=n, bytes=size, inca_us=float(r["time_us"]) if r else "",
                                 base_us=base, base_algo=algo,
                                 window=int(r["window"]) if r else "",
                                 root_cores=int(r["root_cores"]) if r else "",
                                 chunks=int(r["chunks"]) if r else "",
                                 wall_s=round(time.time() - t0, 1)))
                print("projection: %g bit/s, %d tiers, %d hosts, %d B: %s us (%.0f s)"
                      % (rate, tiers, n, size, rows[-1]["inca_us"], rows[-1]["wall_s"]),
                      file=sys.stderr, flush=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return rows


def host_inputs(build, outdir):
    """calibrate_host.py on the committed lab rows: its points, its summary
    lines, the in-host options it fitted and the lab's P."""
    rows, notes = run_script("calibrate_host.py", build,
                             os.path.join(outdir, "host-calibration.csv"))
    p, opts = calibrate_host.fit(list(csv.DictReader(open(calibrate_host.LAB))))
    return rows, notes, opts, p


def local_us(build, opts, size, mode):
    """calibrate_host.model for PER_HOST ranks a host."""
    return calibrate_host.model(build, PER_HOST, opts, mode, size)


def per_host_rows(build, proj, opts):
    """Every projection again with PER_HOST ranks a host: the network phase
    as simulated for one rank a host (the same bytes and members on every
    link), the in-host phases around it."""
    local = {(s, m): local_us(build, opts, s, m) for s in SIZES
             for m in ("leader", "rails", "ring")}
    rows = []
    for p in proj:
        if p["inca_us"] in ("", None):
            continue
        s = int(p["bytes"])
        inca, base = float(p["inca_us"]), float(p["base_us"])
        rows.append(dict(rate=float(p["rate"]), tiers=int(p["tiers"]), hosts=int(p["hosts"]),
                         bytes=s, inca1=inca, base1=base,
                         leader=inca + local[(s, "leader")], rails=inca + local[(s, "rails")],
                         base=base + local[(s, "ring")], local_leader=local[(s, "leader")],
                         local_rails=local[(s, "rails")], local_ring=local[(s, "ring")]))
    return rows


def per_host_check(build, opts):
    """inca-sim --ranks-per-host PER_HOST against one rank a host plus the
    in-host phases: 64 hosts, two tiers, 100 Gbit/s."""
    kw = simlib.host_opts(opts)
    out = []
    for s in (65536, 16 << 20):
        common = dict(bytes=s, tiers=2, hosts=64, rate=100e9, elems=ELEMS, cores="auto",
                      window="auto", latency=LATENCY, **FABRIC)
        one = float(simlib.inca_sim(build, **common)["time_us"])
        eight = float(simlib.inca_sim(build, ranks_per_host=PER_HOST, **common, **kw)["time_us"])
        out.append((s, one, local_us(build, opts, s, "leader"), eight))
    return out


def sizing_rows():
    """Cores per port and slot memory per group, from the committed
    inca-bench-switch output (the arithmetic inca-sim --sizing does)."""
    cost = {}
    for line in open(simlib.BENCH_FILE):
        f = line.split()
        if len(f) > 6 and f[0] in ("aggregation", "forward-only") and f[1].isdigit():
            cost[f[0]] = (float(f[6]), int(f[2]))
    agg, elems_b = cost["aggregation"]
    fwd, _ = cost["forward-only"]
    ns = fwd + (agg - fwd) / elems_b * ELEMS
    frame = ELEMS * 4 + 122
    rows = []
    for rate in RATES:
        pps = rate / 8 / frame
        rows.append((rate, pps, ns, pps * ns * 1e-9))
    return rows, ns


def slot_mib(window, members):
    """A group's slot memory (inca-sim's slot_bytes, agg_group_create's
    layout), MiB."""
    row = ELEMS * 8
    bitmap = math.ceil(members / 64) * 8
    align = lambda b: math.ceil(b / 64) * 64
    return window * 2 * (row + align(row + 4) + 2 * align(bitmap)) / 1048576


# Two lab runs back to back, with libinca's naps and without (INCA_COALESCE=0)
NAP_CHECK = os.path.join(calibrate.PERF, "nap-check")


def nap_check_skew(run):
    """In-network (udp) time over period per size in one of NAP_CHECK's runs"""
    d = os.path.join(NAP_CHECK, run)
    with open(os.path.join(d, "allreduce.csv")) as f:
        times = {int(r["bytes"]): float(r["time_us"]) for r in csv.DictReader(f)
                 if r["tool"] == "inca-udp"}
    with open(os.path.join(d, "cpus.csv")) as f:
        periods = {int(r["bytes"]): float(r["period_us"]) for r in csv.DictReader(f)
                   if r["tool"] == "inca-udp" and r["cpu"] == "cpu0"}
    return [times[b] / periods[b] for b in sorted(times) if b in periods]


def write_doc(out, st, proj, host):
    calib, calib_summary, calib_inputs = st["calib"], st["summary"], st["inputs"]
    # the busy time of the ranks' CPU over their getrusage CPU (run 1, in-network)
    lab_rows, _ = calibrate.load_lab()
    core = [calibrate.core_per_gb(lab_rows, n, size, rate) / float(r["cpu_s_per_GB"])
            for (rate, tool, n, size), r in lab_rows.items()
            if tool == "inca-udp" and size in calibrate.SIZES and n in calibrate.RANKS]
    core_ratio_range = "%.2f-%.2f×" % (min(core), max(core))
    loss, loss_summary = st["loss"], st["loss_summary"]
    agree, conv, base, wall = st["agree"], st["conv"], st["base"], st["wall"]
    # the formulas as they are now (a rendering with --reuse takes them anew)
    for b in base:
        b["formula_us"], b["formula_algo"] = best_formula(b["hosts"], b["bytes"], b["rate"], 2)
    sz, ns = sizing_rows()
    L = []
    w = L.append
    w("# INCA at scale: a calibrated SimGrid model")
    w("")
    w("Written by `tests/sim/scale.py` (issue 34); every figure below comes from its run on")
    w("this machine (%s, %d CPUs, shared with other work; the whole run took %.0f s)."
      % (st["machine"], os.cpu_count(), wall))
    w("The model is `inca-sim` (tests/sim/inca_sim.cpp, SimGrid %s S4U): hosts, and"
      % simgrid_version())
    w("INCA switches as actors that aggregate at the cost `inca-bench-switch` measured")
    w("(tests/sim/bench-switch-amd-epyc-2core.txt: %.1f ns a packet of 1024 floats, %.1f ns"
      % (float(open(simlib.BENCH_FILE).read().split("aggregation")[1].split()[5]),
         float(open(simlib.BENCH_FILE).read().split("forward-only")[1].split()[5])))
    w("forwarding, on one core of an AMD EPYC guest), on the tree the manager's own builder")
    w("(control/tree.c, linked in) makes; the baseline is the project's `mpi-allreduce-perf`")
    w("built with `smpicc` and run by SMPI. `tests/sim/README.md` says how to run each part.")
    w("")
    def pick(rate, n, tiers, size):
        for p in proj:
            if (float(p["rate"]) == rate and int(p["hosts"]) == n and int(p["tiers"]) == tiers
                    and int(p["bytes"]) == size and p["inca_us"] not in ("", None)):
                return float(p["inca_us"]), float(p["base_us"])
        return None, None
    w("## Headline")
    w("")
    for rate in RATES:
        for n in (1024, 8192):
            parts = []
            for size in (8, 1 << 30):
                t, b = pick(rate, n, 3, size)
                if t:
                    parts.append("%s %s (best host algorithm %s, %.2f×)" % (
                        fmt_bytes(size), fmt_us(t), fmt_us(b), b / t))
            w("* %d hosts, three tiers, %.0f Gbit/s: %s." % (n, rate / 1e9, "; ".join(parts)))
    w("")
    per = host["per"]

    def pick8(rate, n, size):
        for r in per:
            if r["rate"] == rate and r["hosts"] == n and r["tiers"] == 3 and r["bytes"] == size:
                return r
        return None
    w("With %d ranks a host (libinca's default: the host's leader reduces for it; section" % PER_HOST)
    w("\"%d ranks a host\" below), against the host algorithms' hierarchical form:" % PER_HOST)
    w("")
    for rate in RATES:
        for n in (1024, 8192):
            parts = []
            for size in (8, 1 << 30):
                r = pick8(rate, n, size)
                if r:
                    parts.append("%s %s (best host algorithm %s, %.2f×)" % (
                        fmt_bytes(size), fmt_us(r["leader"]), fmt_us(r["base"]),
                        r["base"] / r["leader"]))
            w("* %d hosts × %d ranks, three tiers, %.0f Gbit/s: %s." % (
                n, PER_HOST, rate / 1e9, "; ".join(parts)))
    w("")
    w("In-network time is nearly flat in N (the tree's depth, not N, sets it); the host")
    w("algorithms pay log2 N latency steps and 2(N-1)/N of the data. That holds only with")
    w("switch nodes that keep up: with the measured cost, %.1f worker cores per port at" % sizing_rows()[0][0][3])
    w("100 Gbit/s (table below).")
    w("")
    w("## What the model leaves out")
    w("")
    lossy = [r for r in loss if float(r["loss_pct"]) > 0]
    lab_x = [float(r["lab_slowdown"]) for r in lossy]
    mod_x = [float(r["model_slowdown"]) for r in lossy]
    w("* **Loss and retransmission**: no packet is lost in the projections, and the")
    w("  model's loss is **not calibrated**. `inca-sim --per-packet --loss P` (or `--drop")
    w("  R:K`, one packet) loses each packet crossing a link with probability P and lets")
    w("  it through an RTO later (1 ms by default, libinca's minimum, doubled for each")
    w("  further loss of the same packet). Against the lab under loss (\"Loss against the")
    w("  lab\" below) it puts what loss costs at %.2f-%.2fx the lossless time where the lab"
      % (min(mod_x), max(mod_x)))
    w("  measured %.2f-%.2fx: libinca's RTO follows the round trip (RFC 6298, with its own"
      % (min(lab_x), max(lab_x)))
    w("  rules against spurious timeouts), %s to %s at the end of the lab's lossless jobs"
      % (fmt_us(min(float(r["rto_lab_us"]) for r in loss if float(r["loss_pct"]) == 0)),
         fmt_us(max(float(r["rto_lab_us"]) for r in loss if float(r["loss_pct"]) == 0))))
    w("  and backed off up to %s under loss, not 1 ms; the model has neither the"
      % fmt_us(max(float(r["rto_lab_us"]) for r in lossy)))
    w("  estimator nor the probe rule. Nor a switch's failure (the manager's re-planning).")
    w("* **The hosts' stacks**: a rank costs nothing per packet in the projections (the lab")
    w("  calibration gives its ranks the CPU they measured). With %d ranks a host the" % PER_HOST)
    w("  in-host phases are time before and after the network's, at the rates one core of")
    w("  this machine reached (below); every local rank has a core of its own and the host's")
    w("  cores are not limited by the memory they share, the host's cache is this machine's")
    w("  (%s). libinca's rails are **not calibrated** (below)." % fmt_bytes(int(host["opts"]["host_cache"])))
    w("* **Congestion control, PFC, ECN, ECMP**: flows share links max-min fairly (SimGrid's")
    w("  CM02 model, no TCP factors); one path per pair; no other jobs on the fabric.")
    w("* **The switch as one server per node**: a node's worker cores are one queue of their")
    w("  total rate (slots spread evenly); a packet still takes one core's time. Switching and")
    w("  propagation are %.0f us a cable. The lab's shaper (a token bucket of 1 ms at the" % (LATENCY * 1e6))
    w("  rate) is in its calibration only: the projections' ports are not shaped.")
    w("* **The coarse unit**: above 64 packets a member's vector moves as chunks (at most")
    w("  64, growing and shrinking by doubling at the ends) stored and forwarded whole at")
    w("  each tier, the window enforced as a rate cap; the agreement with")
    w("  packets, and how the time moves with the chunk count, are below.")
    dev = [b["formula_us"] / b["smpi_us"] for b in base if b["smpi_us"]]
    checked = sorted({b["hosts"] for b in base if b["smpi_us"]})

    def trend(size):
        return ", ".join("%.2f" % (b["formula_us"] / b["smpi_us"])
                         for b in sorted(base, key=lambda b: b["hosts"])
                         if b["bytes"] == size and b["smpi_us"])
    w("* **The baseline beyond %d hosts** is a latency-bandwidth formula (per step the"
      % max(checked))
    w("  latency to its partner and its bytes at the link's TCP payload rate, no contention,")
    w("  no CPU), checked against SMPI at %s hosts (below: the formula at %.2f to %.2f"
      % (", ".join(str(n) for n in checked), min(dev), max(dev)))
    w("  of SMPI's time; at %d hosts three sizes, beyond it 8 B and 64 KiB): SMPI of"
      % SMPI_HOSTS)
    w("  thousands of ranks did not finish in minutes here. At %s hosts the ratio was"
      % ", ".join(str(n) for n in checked))
    w("  %s at 8 B and %s at 64 KiB: the small-message ratios below carry at"
      % (trend(8), trend(65536)))
    w("  least that much uncertainty, growing with N; from 16 MiB the formula and SMPI")
    w("  agree (at %d hosts)." % SMPI_HOSTS)
    w("")
    w("## Calibration against the lab")
    w("")
    w("`tests/sim/calibrate.py` models the lab as `run-allreduce.sh` runs it with every rank")
    w("of both sides on CPU 0 and the switch's worker alone on CPU 1, as the model has them,")
    w("the hosts' TCP cubic asking for ECN (docs/performance/pinned-period/run1, the first run")
    w("of `--ranks \"4 8\" --repeat 2 --rank-cpus 0`, 2026-11-29, twenty-first session):")
    w("4 and 8 hosts on one inca-switch with one worker core; every rank on one shared")
    w("core that runs one burst of a rank's work at a time, in the order they became ready")
    w("(not all at once at a fraction of the speed, which kept the ring's ranks in lockstep);")
    w("a ring's next block comes into a rank while it is busy (TCP fills its buffers);")
    w("cables a quarter of the measured host-to-host ping; the switch's egress ports shaped")
    w("to the rate by a token bucket of 1 ms (its shaper, dp_qos.c) and a host's way up, a")
    w("veth, not shaped (10 Gbit/s); the calls back to back as run-allreduce.sh times them")
    w("(3 to warm up, then 200 up to 64 KiB and 20 above; the median of each call's slowest")
    w("rank); each rank's CPU at every size measured at that size: in-network its share of")
    w("CPU 0's busy time (the CSV's `core_s_per_GB`: CPU 0's wall time less the kernel's")
    w("idle residency, over the ranks; %s getrusage's `cpu_s_per_GB` at every point, the"
      % core_ratio_range)
    w("softirq the kernel runs in the ranks' system calls being charged to them here) at")
    w("the rate modelled, less what the ranks spent polling for results not there yet")
    w("(libinca counts it now, `spin_cpu_us`: a polling rank yields the core to any rank")
    w("with work, so the polls are waiting, not work); Open MPI's getrusage CPU at 1 Gbit/s")
    w("(at 200 Mbit/s its oversubscribed ranks poll and yield the core, and getrusage")
    w("counts that polling); a fixed cost per call fitted to the 8-byte calls (their")
    w("median over the run's latency rounds).")
    w("The CPU is an input at every size: where the lab is CPU-bound (1 Gbit/s)")
    w("its time is close to its ranks' CPU on one core, and agreement there checks how the")
    w("model shares the core, not a prediction of the CPU. Inputs per shape:")
    w("")
    for l in calib_inputs:
        w("* " + l)
    w("")
    w("Two figures per point. **Time** is what run-allreduce.sh reports: the median over")
    w("the calls of each call's slowest rank. **Period** is the rate the calls go at: a")
    w("rank's timed calls back to back, their wall time over their count (the lab: rank 0's,")
    w("`inca-allreduce-perf -R` and `mpi-allreduce-perf -R`; the model: the mean over its")
    w("ranks).")
    w("Summary (error = model ÷ lab − 1; the 15% bar of the issue):")
    w("")
    for l in calib_summary:
        w("* " + l)
    w("")
    w("The same model against the lab's second run of the same command")
    w("(docs/performance/pinned-period/run2, its own inputs: `calibrate.py --lab")
    w("docs/performance/pinned-period/run2`):")
    w("")
    for l in st["summary_run2"]:
        w("* " + l)
    w("")
    w("And the lab against itself, run 2 ÷ run 1 − 1 at the same points (times).")
    w("Where it does not repeat within 15%, the bar is tighter than the lab's own")
    w("repeatability.")
    w("")
    for l in st["repeat"]:
        w("* " + l)
    w("")
    w("Every point of run 1, times:")
    w("")
    w("| rate | ranks | bytes | in-network lab | model | error | Open MPI lab | SMPI ring | error | ring+CPU | error |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in calib:
        smpi = r["smpi_ring_us"]
        w("| %s | %s | %s | %s | %s | %+.1f%% | %s | %s | %s | %s | %+.1f%% |" % (
            r["rate"], r["ranks"], fmt_bytes(int(r["bytes"])), fmt_us(float(r["inca_lab_us"])),
            fmt_us(float(r["inca_model_us"])), 100 * float(r["inca_err"]),
            fmt_us(float(r["ompi_lab_us"])), fmt_us(float(smpi)) if smpi else "-",
            "%+.1f%%" % (100 * float(r["smpi_err"])) if r["smpi_err"] else "-",
            fmt_us(float(r["ring_cpu_us"])), 100 * float(r["ring_cpu_err"])))
    w("")
    w("Every point of run 1, periods, and the lab's time over its period (the slowest")
    w("rank's call against the rate calls go at):")
    w("")
    w("| rate | ranks | bytes | in-network lab | lab time ÷ period | model | error | Open MPI lab | lab time ÷ period | ring+CPU | error |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    timed = [r for r in calib if r["inca_lab_period_us"] and r["ompi_lab_period_us"]]
    for r in timed:
        w("| %s | %s | %s | %s | %.2f | %s | %+.1f%% | %s | %.2f | %s | %+.1f%% |" % (
            r["rate"], r["ranks"], fmt_bytes(int(r["bytes"])),
            fmt_us(float(r["inca_lab_period_us"])),
            float(r["inca_lab_us"]) / float(r["inca_lab_period_us"]),
            fmt_us(float(r["inca_model_period_us"])), 100 * float(r["inca_period_err"]),
            fmt_us(float(r["ompi_lab_period_us"])),
            float(r["ompi_lab_us"]) / float(r["ompi_lab_period_us"]),
            fmt_us(float(r["ring_cpu_period_us"])), 100 * float(r["ring_cpu_period_err"])))
    w("")
    skew = [float(r["inca_lab_us"]) / float(r["inca_lab_period_us"]) for r in timed]
    mskew = [float(r["inca_model_us"]) / float(r["inca_model_period_us"]) for r in timed]
    mid8 = [s for s, r in zip(skew, timed)
            if int(r["ranks"]) == 8 and 16384 <= int(r["bytes"]) <= 262144]
    off = [r for r in timed if abs(float(r["inca_err"])) > LIMIT]
    w("In-network points whose time is off by more than 15%%: %s." % ("; ".join(
        "%s %s ranks %s (%+.1f%%; the lab's time %.2f× its period, the model's period %+.1f%%)"
        % (r["rate"], r["ranks"], fmt_bytes(int(r["bytes"])), 100 * float(r["inca_err"]),
           float(r["inca_lab_us"]) / float(r["inca_lab_period_us"]),
           100 * float(r["inca_period_err"])) for r in off) if off else "none"))
    w("In the model a call's slowest rank takes %.2f-%.2f× the period: its ranks share"
      % (min(mskew), max(mskew)))
    w("the core in the same order call after call, and each call takes each of them")
    w("about as long. In the lab the slowest rank's call took up to %.2f× the period"
      % max(skew))
    if mid8:
        w("(in-network; %.2f-%.2f× at 8 ranks from 16 to 256 KiB): which rank the kernel's"
          % (min(mid8), max(mid8)))
    else:
        w("(in-network): which rank the kernel's")
    w("scheduler runs next changes from call to call, and a rank served last in one call")
    w("and first in the next takes longer than a period. Where the lab's time is below")
    w("its period (down to %.2f×, small calls) the median of a few hundred short calls" % min(skew))
    w("sits below their mean, which the slow ones pull up. Two changes to the model were")
    w("tried by hand against this run and not kept: the ranks' bursts drawn in random")
    w("order, and 30% of a rank's CPU charged when its results come in rather than")
    w("when its packets go; together they gave the model a spread at 4 KiB, where the lab")
    naps, no_naps = nap_check_skew("default"), nap_check_skew("coalesce0")
    w("has none, and not the lab's at 16-64 KiB. Nor are libinca's naps the cause: with")
    w("`INCA_COALESCE=0` (a rank wakes for every result) 8 ranks at 200 Mbit/s from 16 to")
    w("64 KiB took %.2f-%.2f× their period, and %.2f-%.2f× with the naps, in two runs back"
      % (min(no_naps), max(no_naps), min(naps), max(naps)))
    w("to back (docs/performance/nap-check). The projections time one call with")
    w("every host on cores of its own, where a call's time and the period are the same;")
    w("this spread is the lab's shared core.")
    ring_ok = {rt: (sum(abs(float(r["ring_cpu_err"])) <= LIMIT for r in calib if r["rate"] == rt),
                    sum(r["rate"] == rt for r in calib)) for rt in ("200mbit", "1gbit")}
    w("The ring with the CPU (ring+CPU) is within 15%% at %d of %d points at"
      % ring_ok["200mbit"])
    w("200 Mbit/s and %d of %d at 1 Gbit/s; SMPI's ring, network only, is the ring at its"
      % ring_ok["1gbit"])
    w("link, faster than the lab at most sizes and far faster at the CPU-bound 1 Gbit/s.")
    w("The flow model has no part of TCP or of Open MPI's protocol on the shaped links.")
    w("Above Open MPI's eager limit (64 KiB with its headers, btl_tcp) a block waits for")
    w("the receiver's acknowledgement before its rest goes: with the limit at 1 MiB the")
    w("ring took 2-10% less from 256 KiB to 2 MiB at 200 Mbit/s, and up to 20% more at")
    w("1 Gbit/s (docs/performance.md, \"The ring's eager limit\"). The same model against")
    w("the lab's run with 1 MiB (docs/performance/eager, `calibrate.py --lab")
    w("docs/performance/eager`):")
    w("")
    for l in st["summary_eager"]:
        w("* " + l)
    w("")
    w("The lab's runs before this calibration's (docs/performance/cubic-full, the same")
    w("command without `--rank-cpus`) left the ranks to the scheduler: some ran on the")
    w("switch worker's CPU, and a job's small calls sat on one of two levels (8-byte calls,")
    w("8 ranks, 200 Mbit/s, eight jobs each way on one testbed: 163-413 us left to the")
    w("scheduler, 98-105 us in seven and 149 in one with every rank on CPU 0;")
    w("docs/performance.md, \"The calibration lab with the ranks off the switch's CPU\").")
    w("The same model against those runs, each its own inputs, and the two runs against")
    w("each other:")
    w("")
    for l in st["summary_unpinned"] + st["repeat_unpinned"]:
        w("* " + l)
    w("")
    w("The lab's runs of 2026-11-23 had the hosts on the kernel's default TCP, BBR, which")
    w("ignores the switch's ECN marks and lost 18% of the ring's segments in the switch's")
    w("lossy queues (4 ranks, 512 KiB to 2 MiB; docs/performance.md \"The ring's TCP\").")
    w("The same model against those runs (`calibrate.py --lab docs/performance` and")
    w("`--lab docs/performance/run2`, each its own inputs):")
    w("")
    for l in st["summary_bbr"]:
        w("* " + l)
    w("")
    bbr = {(r["rate"], r["ranks"], r["bytes"]): r for r in st["calib_bbr"]}
    eag, _ = calibrate.load_lab(calibrate.LAB_EAGER)
    unp, _ = calibrate.load_lab(calibrate.LAB_UNPINNED)
    w("Open MPI's ring at 200 Mbit/s in the lab: with BBR (2026-11-23), with cubic and")
    w("ECN, the ranks left to the scheduler (docs/performance/cubic-full/run1) and with the")
    w("eager limit at 1 MiB too (docs/performance/eager), and every rank on CPU 0 (this")
    w("calibration); ring+CPU on this calibration's inputs:")
    w("")
    w("| ranks | bytes | BBR | cubic+ECN, scheduler | the same, eager 1 MiB | cubic+ECN, CPU 0 | ring+CPU | error against CPU 0 |")
    w("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in calib:
        if r["rate"] != "200mbit" or int(r["bytes"]) < 65536:
            continue
        b = bbr[(r["rate"], r["ranks"], r["bytes"])]
        k = ("200mbit", "openmpi-ring", int(r["ranks"]), int(r["bytes"]))
        w("| %s | %s | %s | %s | %s | %s | %s | %+.1f%% |" % (
            r["ranks"], fmt_bytes(int(r["bytes"])), fmt_us(float(b["ompi_lab_us"])),
            fmt_us(float(unp[k]["time_us"])), fmt_us(float(eag[k]["time_us"])),
            fmt_us(float(r["ompi_lab_us"])),
            fmt_us(float(r["ring_cpu_us"])), 100 * float(r["ring_cpu_err"])))
    w("")
    w("The baseline in the projections is the host algorithms at their best, not as")
    w("Open MPI ran here, and the")
    w("projections rest on the parts of the model that held: links, the tree, the")
    w("switch's measured cost. The 15% bar is not met at every point.")
    w("")
    w("### Loss against the lab")
    w("")
    shapes = "; ".join("%s, %s ranks" % k for k in sorted({(r["rate"], r["ranks"])
                                                              for r in loss}))
    w("`tests/bench/run-loss.sh` (docs/performance/loss.csv; %s): one rank a host, manager"
      % shapes)
    w("mode, the switch losing each frame on each link with probability P")
    w("(`--impair \"loss P%\"`), the median over 10 calls of each size. `tests/sim/calibrate_loss.py`:")
    w("inca-sim packet by packet on the lab's shape from the runs of 2026-11-23 (%s), the median of" % shapes)
    w("seeds 1-5, with its default RTO (1 ms) and with the RTO libinca's rank 0 ended the")
    w("lab's job with (an input taken from the run, as the CPU per packet is). \"x\": the")
    w("time over the same size's lossless time, lab and model each.")
    w("")
    for l in loss_summary:
        w("* " + l)
    w("")
    w("| loss | bytes | lab | retransmissions (rank 0) | lab's RTO at the end | model, 1 ms RTO | error | model, the lab's RTO | error | lab x | model x (1 ms) | model x (lab's RTO) |")
    w("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in loss:
        w("| %s%% | %s | %s | %s | %s | %s | %+.1f%% | %s | %+.1f%% | %.2f | %.2f | %.2f |" % (
            r["loss_pct"], fmt_bytes(int(r["bytes"])), fmt_us(float(r["lab_us"])),
            r["retransmissions"], fmt_us(float(r["rto_lab_us"])), fmt_us(float(r["model_us"])),
            100 * float(r["err"]), fmt_us(float(r["model_lab_rto_us"])),
            100 * float(r["err_lab_rto"]), float(r["lab_slowdown"]),
            float(r["model_slowdown"]), float(r["model_lab_rto_slowdown"])))
    w("")
    miss = sum(abs(float(r["err_lab_rto"])) > LIMIT for r in lossy)
    w("Even with the lab's own RTO the model misses %d of the %d lossy points by more than %d%%:"
      % (miss, len(lossy), 100 * LIMIT))
    w("one number at the job's end stands for an RTO that moves with every sample and")
    w("back-off, and libinca resends a timed-out packet only once a later one has")
    w("completed (one probe at a time otherwise), which the model does not do. So no")
    w("projection here includes loss; the lab's own figures are the ones to use.")
    w("")
    w("## Chunks against packets")
    w("")
    w("| fabric | bytes | per packet | chunks | difference | chunks used |")
    w("|---|---:|---:|---:|---:|---:|")
    for name, size, p, c, k in agree:
        w("| %s | %s | %s | %s | %+.1f%% | %d |" % (name, fmt_bytes(size), fmt_us(p), fmt_us(c),
                                                    100 * (c / p - 1), k))
    w("")
    w("1 GiB on 1024 hosts (three tiers, 100 Gbit/s), by the most chunks allowed (`--chunks`);")
    w("a per-packet run of this is out of reach (262,144 packets a host):")
    w("")
    w("| --chunks | chunks | time | wall |")
    w("|---:|---:|---:|---:|")
    for k, chunks, t, wl in conv:
        w("| %d | %d | %s | %.0f s |" % (k, chunks, fmt_us(t), wl))
    w("")
    t64 = [t for k, _, t, _ in conv if k == 64]
    tmax = conv[-1][2]
    if t64:
        w("The projections use at most 64 chunks; at %d the same call takes %+.1f%%: at large"
          % (conv[-1][0], 100 * (tmax / t64[0] - 1)))
        w("sizes the projected in-network times are high (against INCA) by about that much.")
        w("")
    more = sorted({b["hosts"] for b in base if b["hosts"] != SMPI_HOSTS})
    w("## The baseline: SMPI at %d%s hosts against the formulas"
      % (SMPI_HOSTS, "".join(", %d" % n for n in more)))
    w("")
    w("`tests/sim/smpi_allreduce.py` runs: two-level fat-tree (SimGrid's), 32 hosts a leaf,")
    w("%.0f us a cable, links at the rate × 1448/1538." % (LATENCY * 1e6))
    w("")
    w("| rate | hosts | bytes | SMPI best | algorithm | formula best | algorithm | formula ÷ SMPI |")
    w("|---:|---:|---:|---:|---|---:|---|---:|")
    for b in base:
        w("| %.0f Gbit/s | %d | %s | %s | %s | %s | %s | %s |" % (
            b["rate"] / 1e9, b["hosts"], fmt_bytes(b["bytes"]),
            fmt_us(b["smpi_us"]) if b["smpi_us"] else "-",
            b["smpi_algo"] or "-", fmt_us(b["formula_us"]), b["formula_algo"],
            "%.2f" % (b["formula_us"] / b["smpi_us"]) if b["smpi_us"] else "-"))
    w("")
    w("## Projections")
    w("")
    w("Generated fat-trees: 32 hosts a leaf; two tiers: every leaf on 4 spines; three")
    w("tiers: pods of 8 leaves and 4 spines (one a plane), 4 super-spines a plane; uplinks")
    w("non-blocking. %d floats a packet (4 KiB payload, 4218 bytes on the wire); every" % ELEMS)
    w("switch node has the worker cores its members need at line rate (`--cores auto`),")
    w("every job the window its round trip needs (`--window auto`, at least 64). The")
    w("baseline is the best formula of the three (ring, Rabenseifner, recursive doubling).")
    w("")
    for rate in RATES:
        w("### %.0f Gbit/s" % (rate / 1e9))
        w("")
        w("| hosts | tiers (tree depth) | bytes | in-network | algbw | best host algorithm | time | in-network ÷ best |")
        w("|---:|---|---:|---:|---:|---|---:|---:|")
        for p in [p for p in proj if float(p["rate"]) == rate]:
            base_t = float(p["base_us"])
            if p["inca_us"] in ("", None):
                w("| %s | %s | %s | not run (over %d s) | | %s | %s | |" % (
                    p["hosts"], p["tiers"], fmt_bytes(int(p["bytes"])), RUN_TIMEOUT,
                    p["base_algo"], fmt_us(base_t)))
                continue
            inca = float(p["inca_us"])
            w("| %s | %s (%s) | %s | %s | %.2f GB/s | %s | %s | **%.2f×** |" % (
                p["hosts"], p["tiers"], p["depth"], fmt_bytes(int(p["bytes"])), fmt_us(inca),
                int(p["bytes"]) / inca / 1e3, p["base_algo"], fmt_us(base_t), base_t / inca))
        w("")
    w("Worker cores a switch node needs per member port at line rate, with this switch's")
    w("measured cost (%.1f ns a packet of %d floats; `inca-sim --sizing` prints it per node):" % (ns, ELEMS))
    w("")
    w("| link | packets/s a port | cores a port |")
    w("|---:|---:|---:|")
    for rate, pps, _, cores in sz:
        w("| %.0f Gbit/s | %.2f M | %.2f |" % (rate / 1e9, pps / 1e6, cores))
    w("")
    w("A 32-port leaf thus needs %d cores at 100 Gbit/s and %d at 400 Gbit/s: the" % (
        math.ceil(32 * sz[0][3]), math.ceil(32 * sz[1][3])))
    w("software switch as measured on this 2-core guest does not keep up with a hardware")
    w("leaf's ports on one server; the projections assume it does (the cores given).")
    w("Slot memory per group: window × 2 sets × (8 bytes an element + the result frame +")
    w("bitmaps); with %d floats a packet and 32 members:" % ELEMS)
    for rate in RATES:
        wins = sorted({int(p["window"]) for p in proj
                       if float(p["rate"]) == rate and p["window"] not in ("", None)})
        w("%s at %.0f Gbit/s (windows %s, what the round trips need, at least 64)." % (
            ", ".join("%.2f MiB" % slot_mib(x, 32) for x in wins), rate / 1e9,
            ", ".join(str(x) for x in wins)))
    w("A switch node holds one group per job it serves.")
    w("")
    write_per_host(w, host)
    w("## Reproducing")
    w("")
    w("```")
    w("nice -n 19 ninja -C build && meson test -C build --suite sim")
    w("tests/sim/calibrate.py                     # the calibration table, a minute")
    w("tests/sim/calibrate.py --lab docs/performance/pinned-period/run2   # the lab's second run")
    w("tests/sim/calibrate.py --lab docs/performance/cubic-full/run1   # the ranks left to the scheduler")
    w("tests/sim/calibrate.py --lab docs/performance/cubic-full/run2")
    w("tests/sim/calibrate.py --lab docs/performance/eager   # Open MPI's eager limit 1 MiB")
    w("tests/sim/calibrate.py --lab docs/performance   # the lab of 2026-11-23, BBR")
    w("tests/sim/calibrate_loss.py                # the loss table, a minute")
    w("tests/sim/calibrate_host.py --measure      # libinca's in-host phases here, 20 s")
    w("sudo tests/bench/run-loss.sh --out docs/performance   # the lab under loss, ~1 minute")
    w("tests/sim/smpi_allreduce.py --hosts 8      # the baseline on the lab's shape")
    w("tests/sim/scale.py                         # this file (--reuse: projections from docs/scale/)")
    w("build/tests/sim/inca-sim --bench tests/sim/bench-switch-amd-epyc-2core.txt \\")
    w("    --topology deploy/etc/topology.example.json --rate 100G --elems 1024 \\")
    w("    --bytes 1073741824 --sizing")
    w("```")
    w("")
    with open(out, "w") as f:
        f.write("\n".join(L))


def write_per_host(w, host):
    opts, lab_p = host["opts"], host["lab_p"]
    w("## %d ranks a host" % PER_HOST)
    w("")
    w("Jobs run a rank per GPU or socket. libinca reduces inside the host first")
    w("(docs/hostlib.md, \"Several ranks per host\"): by default the host's leader reduces its")
    w("ranks' inputs, takes part in the network as the host's one member, and every rank")
    w("copies the result out; with rails (`INCA_HIER=rails`, from 256 KiB) every local rank")
    w("reduces its share of every input and carries it on a rail of its own. The network")
    w("phase moves the same bytes through the same switch nodes as one rank a host, so its")
    w("time is the projection above; the in-host phases come before and after it")
    w("(`inca-sim --ranks-per-host`, the header of tests/sim/inca_sim.cpp: the leader reads")
    w("P inputs and copies the result into the segment, (P + 1) S bytes on its one core;")
    w("with rails every rank copies in the parts of its input others own, reduces its share,")
    w("writes it twice and copies the others' shares out, 3 S a core whatever P). The host")
    w("algorithms at their best take the hierarchical form: a reduce-scatter inside the")
    w("host (S a core), the algorithm across the hosts on the host's link, an allgather")
    w("inside the host ((P − 1) / P x S a core).")
    w("")
    w("### The in-host inputs, on this host")
    w("")
    w("`tests/sim/calibrate_host.py --measure` ran libinca's all-reduce with %d ranks on this" % lab_p)
    w("host alone (a job of one host sends nothing: its time is the in-host phases), the")
    w("leader and rails taking turns, %d rounds, medians (docs/scale/host-lab.csv). The"
      % len(host["lab_rounds"]))
    w("model's inputs, fitted to three of the leader's rows: %.1f us a call, %.1f GB/s a"
      % (opts["host_call"] * 1e6, opts["host_rate"] / 1e9))
    w("core from memory and %.1f GB/s when a call's inputs and result fit the %s cache."
      % (opts["host_rate_cached"] / 1e9, fmt_bytes(int(opts["host_cache"]))))
    w("")
    for l in host["notes"]:
        if "points" in l:
            w("* " + l)
    w("")
    w("| way | bytes | lab | model | error |")
    w("|---|---:|---:|---:|---:|")
    for r in host["rows"]:
        w("| %s | %s | %s | %s | %s |" % (
            r["mode"], fmt_bytes(int(r["bytes"])), fmt_us(float(r["lab_us"])),
            fmt_us(float(r["model_us"])),
            "fitted" if r["fitted"] == "1" else "%+.1f%%" % (100 * float(r["err"]))))
    w("")
    rails = [r for r in host["rows"] if r["mode"] == "rails" and int(r["bytes"]) >= 1 << 20]
    slow = [float(r["lab_us"]) / float(r["model_us"]) for r in rails]
    judged = [r for r in host["rows"] if r["mode"] == "leader" and r["fitted"] != "1"]
    w("The leader's model, judged at the rows not fitted: %s. The bytes a core moves are" % (
        ", ".join("%s %+.0f%%" % (fmt_bytes(int(r["bytes"])), 100 * float(r["err"]))
                  for r in judged)))
    w("not one rate: small calls are a few 16 KiB steps and their handshakes, and between")
    w("the cache and memory the rate falls gradually, not at one size; in the projections")
    w("below the in-host time of the leader carries about that error. The call's fixed cost")
    w("is that of %d ranks; with %d it is likely more. **libinca's rails are not what their" % (
        lab_p, PER_HOST))
    w("bytes take**: from 1 MiB they took %.1f-%.1fx the model's time, and more than the" % (
        min(slow), max(slow)))
    w("leader on the same host, where their bytes (3 S a core against the leader's 3 S at")
    w("P = 2) say about the same. Until 2026-11-29 they took 1.7-4.1x: each local rank")
    w("did its steps in order on one counter, so the two ranks took turns, one waiting")
    w("while the other reduced; now each writes its chunks of the other's steps ahead")
    w("(a writer's and a reader's counter apart, host-lib/hl_team.h), which cut the")
    w("16 MiB and 64 MiB calls by about 1.7x. What is left, in a profile of the 16 MiB")
    w("call (`perf record -e cpu-clock -g` on rank 0): copies into and out of the")
    w("segment and the accumulator (about half), the wait for the other rank (a fifth).")
    w("The rails columns below are thus what rails would give at the leader's per-core")
    w("rate, not what libinca's rails give today: not calibrated, and a bound: libinca's")
    w("rails today are slower than these columns.")
    w("")
    w("Check: `inca-sim --ranks-per-host %d` itself against one rank a host plus the in-host" % PER_HOST)
    w("phases (64 hosts, two tiers, 100 Gbit/s, the leader):")
    w("")
    w("| bytes | one rank a host | + in-host phases | inca-sim, %d a host | difference |" % PER_HOST)
    w("|---:|---:|---:|---:|---:|")
    for size, one, loc, eight in host["check"]:
        w("| %s | %s | %s | %s | %+.4f%% |" % (fmt_bytes(size), fmt_us(one), fmt_us(one + loc),
                                                fmt_us(eight), 100 * (eight / (one + loc) - 1)))
    w("")
    for rate in RATES:
        w("### %d ranks a host, %.0f Gbit/s" % (PER_HOST, rate / 1e9))
        w("")
        w("| hosts | tiers | bytes | in-network, 1 a host | leader | in-host share | rails (not calibrated) | best host algorithm, hierarchical | leader ÷ best | rails ÷ best |")
        w("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in [r for r in host["per"] if r["rate"] == rate]:
            w("| %d | %d | %s | %s | %s | %.0f%% | %s | %s | **%.2f×** | %.2f× |" % (
                r["hosts"], r["tiers"], fmt_bytes(r["bytes"]), fmt_us(r["inca1"]),
                fmt_us(r["leader"]), 100 * r["local_leader"] / r["leader"], fmt_us(r["rails"]),
                fmt_us(r["base"]), r["base"] / r["leader"], r["base"] / r["rails"]))
        w("")
    big = [r for r in host["per"] if r["bytes"] == max(SIZES)]
    small = [r for r in host["per"] if r["bytes"] == min(SIZES)]
    lose = []
    for size in SIZES:
        at = [r for r in host["per"] if r["bytes"] == size]
        k = sum(r["base"] < r["leader"] for r in at)
        if k:
            lose.append("%s (%d of %d shapes)" % (fmt_bytes(size), k, len(at)))
    w("What it says:")
    w("")
    w("* Small calls keep their lead: at %s the in-host phases add %s and in-network is" % (
        fmt_bytes(min(SIZES)), fmt_us(small[0]["local_leader"])))
    w("  %.2f-%.2fx the best host algorithm." % (min(r["base"] / r["leader"] for r in small),
                                               max(r["base"] / r["leader"] for r in small)))
    w("* Large calls are bound by the leader's core: at %s its in-host phases are %.0f-%.0f%% of the call"
      % (fmt_bytes(max(SIZES)), min(100 * r["local_leader"] / r["leader"] for r in big),
         max(100 * r["local_leader"] / r["leader"] for r in big)))
    w("  (the leader's core reads %d inputs and copies the result into the segment: %d x %s"
      % (PER_HOST, PER_HOST + 1, fmt_bytes(max(SIZES))))
    w("  at %.1f GB/s, %s) and in-network is" % (opts["host_rate"] / 1e9,
                                               fmt_us(big[0]["local_leader"])))
    w("  %.2f-%.2fx the host algorithms, whose in-host phases spread over every core." % (
        min(r["base"] / r["leader"] for r in big), max(r["base"] / r["leader"] for r in big)))
    if lose:
        w("  In-network with the leader is slower than the best host algorithm at %s:"
          % ", ".join(lose))
        w("  for large calls with several ranks a host, libinca's default path is the slower one.")
    w("* Rails, even at their bytes' rate (3 S a core; on this host they are slower still,")
    w("  above), give %.2f-%.2fx at %s: libinca moves more bytes a core than the host"
      % (min(r["base"] / r["rails"] for r in big), max(r["base"] / r["rails"] for r in big),
         fmt_bytes(max(SIZES))))
    w("  algorithms' in-host phases (%s a core), so with %d ranks a host one core's rate"
      % ("(2P − 1) / P x S", PER_HOST))
    w("  decides a large call's in-network speed-up in this model.")
    w("")


def simgrid_version():
    try:
        return subprocess.run(["pkg-config", "--modversion", "simgrid"], capture_output=True,
                              text=True).stdout.strip()
    except OSError:
        return "?"


def plots(outdir, proj):
    """PNG plots of the projections (main has set each row's base_us):
    [(file, caption)], none without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing (python3-matplotlib): no plots", file=sys.stderr)
        return []
    keys = sorted({(float(p["rate"]), int(p["tiers"]), int(p["hosts"])) for p in proj})
    out = []
    for what, fname, ylabel, val in (
            ("time of one all-reduce", "time.png", "time (us)",
             lambda p: float(p["inca_us"])),
            ("in-network speed-up over the best host algorithm", "speedup.png",
             "best host algorithm time / in-network time",
             lambda p: float(p["base_us"]) / float(p["inca_us"]))):
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
        for ax, rate in zip(axes, sorted({k[0] for k in keys})):
            for (r, tiers, hosts) in keys:
                if r != rate:
                    continue
                rows = sorted((int(p["bytes"]), val(p)) for p in proj
                              if float(p["rate"]) == r and int(p["tiers"]) == tiers
                              and int(p["hosts"]) == hosts and p["inca_us"] not in ("", None))
                if not rows:
                    continue
                ax.plot([b for b, _ in rows], [v for _, v in rows], marker="o",
                        label="%d hosts, %d tiers" % (hosts, tiers))
                if fname == "time.png":
                    base = sorted((int(p["bytes"]), float(p["base_us"])) for p in proj
                                  if float(p["rate"]) == r and int(p["tiers"]) == tiers
                                  and int(p["hosts"]) == hosts)
                    ax.plot([b for b, _ in base], [v for _, v in base], linestyle="--",
                            color=ax.lines[-1].get_color(), label="  best host algorithm")
            ax.set_xscale("log", base=2)
            if fname == "time.png":
                ax.set_yscale("log")
            ax.set_title("%g Gbit/s links" % (rate / 1e9))
            ax.set_xlabel("bytes")
            ax.grid(True, alpha=0.3)
        axes[0].set_ylabel(ylabel)
        axes[1].legend(fontsize=7)
        fig.suptitle(what + " (projections, inca-sim)")
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, fname), dpi=90)
        plt.close(fig)
        out.append((fname, what))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(simlib.ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(simlib.ROOT, "docs", "scale.md"))
    ap.add_argument("--reuse", action="store_true",
                    help="take the steps and projections of the last full run "
                    "(docs/scale/steps.json, projections.csv) instead of running them")
    ap.add_argument("--recalibrate", action="store_true",
                    help="with --reuse: run the calibration steps again (a few minutes)")
    a = ap.parse_args()
    t0 = time.time()
    outdir = os.path.join(os.path.dirname(a.out), "scale")
    os.makedirs(outdir, exist_ok=True)
    proj_csv = os.path.join(outdir, "projections.csv")
    steps_json = os.path.join(outdir, "steps.json")
    if a.reuse and os.path.exists(steps_json) and os.path.exists(proj_csv):
        st = json.load(open(steps_json))
        if "loss" not in st:
            print("scale.py: %s predates the loss calibration: run without --reuse"
                  % steps_json, file=sys.stderr)
            return 1
        proj = list(csv.DictReader(open(proj_csv)))
        changed = False
        # a steps.json from before the calibration moved to the lab with
        # the ranks on CPU 0 (no summary_unpinned) or to its run with the
        # periods (no inca_period_err): its calib, run2 and repeat are
        # another lab's
        stale = "summary_unpinned" not in st or "inca_period_err" not in st["calib"][0]
        for k in ("calib_cubic", "summary_cubic"):
            st.pop(k, None)
        if a.recalibrate or stale or "repeat" not in st:
            if a.recalibrate or stale:
                st["calib"], st["summary"], st["inputs"] = run_calibration(a.build, outdir)
                st["loss"], st["loss_summary"] = run_loss_calibration(a.build, outdir)
            st["summary_run2"], st["repeat"] = run_calibration_run2(a.build, outdir)
            changed = True
        if a.recalibrate or stale:
            st["calib_bbr"], st["summary_bbr"] = run_calibration_bbr(a.build, outdir)
            st["summary_eager"] = run_calibration_eager(a.build, outdir)
            st["summary_unpinned"], st["repeat_unpinned"] = run_calibration_unpinned(
                a.build, outdir)
            changed = True
        if changed:
            with open(steps_json, "w") as f:
                json.dump(st, f, indent=1)
    else:
        st = {}
        st["calib"], st["summary"], st["inputs"] = run_calibration(a.build, outdir)
        st["summary_run2"], st["repeat"] = run_calibration_run2(a.build, outdir)
        st["calib_bbr"], st["summary_bbr"] = run_calibration_bbr(a.build, outdir)
        st["summary_eager"] = run_calibration_eager(a.build, outdir)
        st["summary_unpinned"], st["repeat_unpinned"] = run_calibration_unpinned(a.build, outdir)
        st["loss"], st["loss_summary"] = run_loss_calibration(a.build, outdir)
        print("calibration done (%.0f s)" % (time.time() - t0), file=sys.stderr, flush=True)
        st["agree"], st["conv"] = run_agreement(a.build)
        print("agreement done (%.0f s)" % (time.time() - t0), file=sys.stderr, flush=True)
        st["base"] = run_baseline(a.build)
        print("baseline done (%.0f s)" % (time.time() - t0), file=sys.stderr, flush=True)
        proj = run_projections(a.build, proj_csv)
        st["wall"] = time.time() - t0
        st["machine"] = simlib.machine()
        with open(steps_json, "w") as f:
            json.dump(st, f, indent=1)
    rows, notes, opts, lab_p = host_inputs(a.build, outdir)
    lab = list(csv.DictReader(open(calibrate_host.LAB)))
    host = dict(rows=rows, notes=notes, opts=opts, lab_p=lab_p,
                lab_rounds=lab[0]["rounds_us"].split())
    # the formulas as they are now (a rendering with --reuse takes them anew)
    for p in proj:
        p["base_us"], p["base_algo"] = best_formula(int(p["hosts"]), int(p["bytes"]),
                                                    float(p["rate"]), int(p["tiers"]))
    host["per"] = per_host_rows(a.build, proj, opts)
    host["check"] = per_host_check(a.build, opts)
    print("%d ranks a host done (%.0f s)" % (PER_HOST, time.time() - t0), file=sys.stderr,
          flush=True)
    write_doc(a.out, st, proj, host)
    pngs = plots(outdir, proj)
    if pngs:
        with open(a.out, "a") as f:
            f.write("\n## Plots\n\nThe projections above (in-network from inca-sim, the best host "
                    "algorithm from the formulas SMPI checked up to %d hosts):\n\n"
                    % max(n for n, _ in SMPI_MORE))
            for name, what in pngs:
                f.write("![%s](scale/%s)\n\n" % (what, name))
    print("wrote %s (%.0f s)" % (a.out, time.time() - t0), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
