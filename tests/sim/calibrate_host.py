#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The model's in-host phases (inca-sim --ranks-per-host) against libinca's:
several ranks on one host, reduced inside it first (host-lib/hl_hier.c).

--measure runs libinca's own all-reduce (host-lib/inca-allreduce-perf) with
P ranks on this host alone, a job of one host: it sends nothing, so its time
is the in-host phases only (up, the host's share of the network, down). Both
of libinca's ways: the leader (INCA_HIER=leader, the default) and rails
(INCA_HIER=rails, from INCA_RAIL_MIN_BYTES = 256 KiB). ROUNDS rounds, the two
ways taking turns, each call's time the median of the slowest rank over its
iterations; the medians of the rounds go to docs/scale/host-lab.csv.

Then (and without --measure, from that file) the model's inputs are fitted
to three of the leader's rows: the fixed cost of a call (--host-call, the
8-byte row), the bytes a second a local rank moves from memory (--host-rate,
the largest size: (P + 1) S / (T - F)) and from cache (--host-rate-cached,
1 MiB, whose inputs and result fit it); the cache (--host-cache) is this
machine's last level, from sysfs, kept in the file. Every other row, and
every row of rails, is a prediction: inca-sim's local_up_us + local_down_us
against the lab, the error per point, written to
docs/scale/host-calibration.csv.

P is the machine's cores at most (a rank a core, as the model assumes);
nothing runs over the network: the group's addresses are 127.0.0.x and a
host alone never sends.

Usage: tests/sim/calibrate_host.py [--build build] [--measure [--rounds 3]
       [--ranks P]] [--lab docs/scale/host-lab.csv] [--csv OUT.csv]
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile

import simlib

SIZES = [8, 4096, 65536, 262144, 1 << 20, 4 << 20, 16 << 20, 64 << 20]
MODES = ["leader", "rails"]
RAIL_MIN = 262144
LIMIT = 0.15
CACHED_FIT = 1 << 20
LAB = os.path.join(simlib.ROOT, "docs", "scale", "host-lab.csv")
OUT = os.path.join(simlib.ROOT, "docs", "scale", "host-calibration.csv")


def run_once(build, ranks, mode, iters, timeout):
    """One job of `ranks` ranks on this host: {bytes: time_us}."""
    exe = os.path.join(build, "host-lib", "inca-allreduce-perf")
    group = {"switch": "127.0.0.1", "group": 1, "qpn": 256, "qkey": "0x5eed0034",
             "window": 16, "members": [{"ip": "127.0.0.1", "qpn": 17}],
             "rails": [{"group": 2 + l, "qpn": 257 + l,
                        "members": [{"ip": "127.0.0.%d" % (2 + l), "qpn": 18 + l}]}
                       for l in range(ranks - 1)]}
    with tempfile.TemporaryDirectory(prefix="inca-host-cal-") as tmp:
        cfg = os.path.join(tmp, "group.json")
        with open(cfg, "w") as f:
            json.dump(group, f)
        env = dict(os.environ, INCA_CONFIG=cfg, INCA_TRANSPORT="udp", INCA_SIZE=str(ranks),
                   INCA_LAYOUT=str(ranks), INCA_HIER=mode, INCA_RAIL_MIN_BYTES=str(RAIL_MIN))
        for k in ("INCA_SWITCH", "INCA_MEMBERS", "INCA_GROUP", "INCA_QPN", "INCA_MANAGER"):
            env.pop(k, None)
        cmd = [exe, "-b", str(SIZES[0]), "-e", str(SIZES[-1]), "-f", "2", "-n", str(iters), "-N", "200",
               "-w", "20"]
        procs = []
        outs = []
        try:
            for r in range(ranks):
                procs.append(subprocess.Popen(cmd, env=dict(env, INCA_RANK=str(r)),
                                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                              text=True, start_new_session=True))
            for p in procs:
                outs.append(p.communicate(timeout=timeout))
        except BaseException as e:
            # a hung rank, Ctrl-C (which the ranks, in sessions of their
            # own, do not get) or any other error: the ranks this started
            # end with it
            for p in procs:
                if p.poll() is None:
                    p.kill()
                p.communicate()
            if isinstance(e, subprocess.TimeoutExpired):
                sys.exit("calibrate_host.py: %s with %d ranks took more than %d s"
                         % (mode, ranks, timeout))
            raise
    for p, (out, err) in zip(procs, outs):
        if p.returncode != 0:
            sys.exit("calibrate_host.py: %s, rank %d: exit %d: %s"
                     % (mode, procs.index(p), p.returncode, err.strip()[-300:]))
    times = {}
    for line in outs[0][0].splitlines():
        f = line.split()
        if len(f) >= 10 and not line.startswith("#") and f[0].isdigit():
            if int(f[7]) != 0:
                sys.exit("calibrate_host.py: %s: %s wrong elements at %s B" % (mode, f[7], f[0]))
            if int(f[8]) != 0:
                sys.exit("calibrate_host.py: %s: %s B on the wire at %s B: not one host alone"
                         % (mode, f[8], f[0]))
            times[int(f[0])] = float(f[4])
    missing = [s for s in SIZES if s not in times]
    if missing:
        sys.exit("calibrate_host.py: %s: no row for %s B" % (mode, missing))
    return times


def measure(build, ranks, rounds, path):
    got = {m: {s: [] for s in SIZES} for m in MODES}
    for k in range(rounds):
        for mode in MODES:
            t = run_once(build, ranks, mode, 20, 600)
            for s in SIZES:
                got[mode][s].append(t[s])
            print("round %d, %s: %s" % (k + 1, mode, " ".join("%d:%.1f" % (s, t[s])
                                                               for s in SIZES)),
                  file=sys.stderr, flush=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["mode", "ranks", "bytes", "median_us", "rounds_us", "machine",
                    "cache_bytes"])
        for mode in MODES:
            for s in SIZES:
                w.writerow([mode, ranks, s, "%.1f" % statistics.median(got[mode][s]),
                            " ".join("%.1f" % v for v in got[mode][s]), simlib.machine(),
                            last_level_cache()])


def last_level_cache():
    """This machine's largest cache, bytes (sysfs)."""
    best = 0
    base = "/sys/devices/system/cpu/cpu0/cache"
    for d in os.listdir(base):
        try:
            v = open(os.path.join(base, d, "size")).read().strip()
        except OSError:
            continue
        k = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(v[-1:], 1)
        best = max(best, int(v.rstrip("KMG")) * k)
    if not best:
        sys.exit("calibrate_host.py: no cache size in %s" % base)
    return best


def fit(lab):
    """The in-host inputs from the leader's rows (see the top): a dict of
    inca-sim's options, and P."""
    leader = {int(r["bytes"]): float(r["median_us"]) for r in lab if r["mode"] == "leader"}
    p = int(lab[0]["ranks"])
    cache = int(lab[0]["cache_bytes"])
    small, big = min(leader), max(leader)
    if (p + 1) * CACHED_FIT > cache or (p + 1) * big <= cache:
        sys.exit("calibrate_host.py: %d B of cache: 1 MiB must fit it, %d B must not"
                 % (cache, big))
    call = leader[small] * 1e-6
    opts = dict(host_call=call, host_cache=cache,
                host_rate=(p + 1) * big / (leader[big] * 1e-6 - call),
                host_rate_cached=(p + 1) * CACHED_FIT / (leader[CACHED_FIT] * 1e-6 - call))
    return p, opts


def model(build, p, opts, mode, size):
    """inca-sim's in-host phases of one call, us: mode leader, rails
    (libinca's) or ring (the host algorithms' hierarchical form)."""
    r = simlib.inca_sim(build, hosts=1, bytes=size, ranks_per_host=p,
                        hier="leader" if mode == "ring" else mode, ring=mode == "ring",
                        rail_min=RAIL_MIN, **simlib.host_opts(opts))
    return float(r["local_up_us"]) + float(r["local_down_us"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(simlib.ROOT, "build"))
    ap.add_argument("--measure", action="store_true", help="run libinca here first")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ranks", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--lab", default=LAB)
    ap.add_argument("--csv", default=OUT)
    a = ap.parse_args()
    if a.measure:
        if a.ranks < 2 or a.ranks > (os.cpu_count() or 1):
            sys.exit("calibrate_host.py: --ranks %d: from 2 to this machine's %d cores"
                     % (a.ranks, os.cpu_count()))
        measure(a.build, a.ranks, a.rounds, a.lab)
    lab = list(csv.DictReader(open(a.lab)))
    p, opts = fit(lab)
    rows = []
    for r in lab:
        size = int(r["bytes"])
        m = model(a.build, p, opts, r["mode"], size)
        lab_us = float(r["median_us"])
        fitted = r["mode"] == "leader" and size in (min(SIZES), CACHED_FIT, max(SIZES))
        rows.append(dict(mode=r["mode"], ranks=p, bytes=size, lab_us=lab_us,
                         model_us="%.1f" % m, err="%.4f" % (m / lab_us - 1),
                         fitted=int(fitted)))
    with open(a.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print("# in-host inputs, fitted to the leader's %d B, %d B and %d B rows (%s, %d ranks): "
          "--host-call %.4g --host-rate %.4g --host-cache %d --host-rate-cached %.4g"
          % (min(SIZES), CACHED_FIT, max(SIZES), lab[0]["machine"], p, opts["host_call"],
             opts["host_rate"], opts["host_cache"], opts["host_rate_cached"]))
    for mode in MODES:
        judged = [r for r in rows if r["mode"] == mode and not r["fitted"]]
        big = [r for r in judged if r["bytes"] >= 1 << 20]
        within = sum(abs(float(r["err"])) <= LIMIT for r in judged)
        print("# %s: %d of %d points within 15%% (the fitted ones not counted), from 1 MiB "
              "%d of %d; largest %.1f%%" % (mode, within, len(judged),
                                          sum(abs(float(r["err"])) <= LIMIT for r in big),
                                          len(big),
                                          100 * max(abs(float(r["err"])) for r in judged)))
    for r in rows:
        print("%-6s %9d B  lab %10.1f us  model %10s us  %+6.1f%%%s" % (
            r["mode"], r["bytes"], r["lab_us"], r["model_us"], 100 * float(r["err"]),
            "  (fitted)" if r["fitted"] else ""))


if __name__ == "__main__":
    main()
