# SPDX-License-Identifier: BSD-3-Clause
"""What the scale scripts share: running inca-sim (the S4U model of INCA)
and the baseline, the project's own mpi-allreduce-perf built with smpicc and
run by smpirun on a SimGrid platform of the same shape (SMPI's ring,
Rabenseifner and recursive doubling, the fastest per size)."""
import os
import platform
import re
import signal
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BENCH_FILE = os.path.join(HERE, "bench-switch-amd-epyc-2core.txt")
# SMPI's names: lr is the logical ring (reduce-scatter + allgather), rab1,
# rab2 and rab_rdb Rabenseifner's variants, rdb recursive doubling
SMPI_ALGOS = ["lr", "rab1", "rab2", "rab_rdb", "rdb"]
# TCP carries 1448 bytes in a 1538-byte frame on the wire (docs/performance.md)
TCP_EFFICIENCY = 1448 / 1538


def machine():
    """The CPU's model name (what every figure is named beside)."""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def host_opts(opts):
    """inca-sim's in-host options (calibrate_host.fit's dict) as arguments
    of inca_sim(), whole numbers kept whole."""
    return {k: "%.10g" % v for k, v in opts.items()}


def nice(cmd):
    return ["nice", "-n", "19"] + cmd


def inca_sim(build, timeout=None, **opts):
    """One inca-sim run: opts are its long options (True: a flag). Returns
    its key=value line as a dict, or None when it ran out of time."""
    cmd = [os.path.join(build, "tests", "sim", "inca-sim"), "--bench",
           opts.pop("bench", BENCH_FILE), "--log=root.thres:warning"]
    for k, v in opts.items():
        if v is True:
            cmd.append("--" + k.replace("_", "-"))
        elif v is not None and v is not False:
            cmd += ["--" + k.replace("_", "-"), str(v)]
    if timeout:
        out = run_bounded(nice(cmd), timeout)
        if out is None:
            return None
    else:
        out = subprocess.run(nice(cmd), check=True, capture_output=True, text=True).stdout
    line = out.strip().splitlines()[-1]
    fields = dict(kv.split("=", 1) for kv in line.split()[1:])
    fields["kind"] = line.split()[0]
    return fields


def run_bounded(cmd, timeout):
    """cmd's stdout, or None when it ran out of time (then it and every
    process it started are killed: smpirun's smpimain outlives smpirun)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         start_new_session=True)
    try:
        return p.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return None


def smpi_build(build):
    """mpi-allreduce-perf built with smpicc into BUILD/tests/sim/smpi/."""
    out_dir = os.path.join(build, "tests", "sim", "smpi")
    exe = os.path.join(out_dir, "mpi-allreduce-perf")
    src = os.path.join(ROOT, "tests", "bench", "mpi_allreduce_perf.c")
    hdr = os.path.join(ROOT, "host-lib", "tools", "perf_stats.h")
    os.makedirs(out_dir, exist_ok=True)
    if not os.path.exists(exe) or os.path.getmtime(exe) < max(os.path.getmtime(src),
                                                               os.path.getmtime(hdr)):
        subprocess.run(nice(["smpicc", "-O2", "-D_GNU_SOURCE",
                             "-I" + os.path.join(ROOT, "host-lib", "tools"),
                             "-o", exe, src]), check=True)
    return exe


def smpi_platform(path, hosts, rate_bps, latency, tiers=1, hosts_per_leaf=32):
    """A SimGrid platform: one switch (a cluster of private links, no
    backbone), or SimGrid's fat-tree (two levels: leaves of hosts_per_leaf
    hosts, as many spines, one link each; three levels: pods of 8 leaves).
    Link bandwidth: the rate times TCP's efficiency."""
    bw = rate_bps / 8 * TCP_EFFICIENCY
    attrs = ('id="fabric" prefix="h" suffix="" radical="0-%d" speed="1Gf" bw="%.6gBps" '
             'lat="%.6gs"' % (hosts - 1, bw, latency))
    if tiers == 1:
        attrs += ' sharing_policy="SPLITDUPLEX"'
    elif tiers == 2:
        leaves = -(-hosts // hosts_per_leaf)
        attrs += (' topology="FAT_TREE" topo_parameters="2;%d,%d;1,%d;1,1"'
                  % (hosts_per_leaf, leaves, hosts_per_leaf))
    else:
        pods = -(-hosts // (hosts_per_leaf * 8))
        attrs += (' topology="FAT_TREE" topo_parameters="3;%d,8,%d;1,8,%d;1,1,1"'
                  % (hosts_per_leaf, pods, hosts_per_leaf))
    with open(path, "w") as f:
        f.write("<?xml version='1.0'?>\n"
                '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n'
                '<platform version="4.1">\n  <cluster %s/>\n</platform>\n' % attrs)


def smpi_allreduce(build, hosts, rate_bps, latency, sizes, algos=SMPI_ALGOS, tiers=1,
                   iters=3, timeout=120, each=False, warmup=1):
    """{algo: {bytes: time_us}} from mpi-allreduce-perf under smpirun, one
    rank per host; sizes a power-of-two series (each: one run per size).
    Buffers past 64 KiB are SMPI's shared memory from 64 ranks (the results
    are then wrong: only the times count). A run that fails or runs out of
    time is left out."""
    exe = smpi_build(build)
    res = {}
    with tempfile.TemporaryDirectory(prefix="inca-smpi-") as tmp:
        plat = os.path.join(tmp, "platform.xml")
        hostfile = os.path.join(tmp, "hosts")
        smpi_platform(plat, hosts, rate_bps, latency, tiers)
        with open(hostfile, "w") as f:
            f.write("".join("h%d\n" % i for i in range(hosts)))
        for algo in algos:
            cmd = ["smpirun", "-np", str(hosts), "-platform", plat, "-hostfile", hostfile,
                   "--cfg=smpi/allreduce:" + algo, "--cfg=network/model:CM02",
                   "--cfg=network/TCP-gamma:0", "--cfg=network/crosstraffic:0",
                   "--cfg=smpi/simulate-computation:no", "--cfg=smpi/host-speed:1e9",
                   "--log=root.thres:critical", "--cfg=smpi/tmpdir:" + tmp]
            if hosts >= 64:
                cmd.append("--cfg=smpi/auto-shared-malloc-thresh:65536")
            times = {}
            # the whole doubling series in one run, or (each) one run a size
            for lo, hi in ([(s, s) for s in sizes] if each else [(min(sizes), max(sizes))]):
                out = run_bounded(nice(cmd + [exe, "-b", str(lo), "-e", str(hi), "-f", "2",
                                              "-n", str(iters), "-w", str(warmup)]), timeout)
                for line in (out or "").splitlines():
                    m = re.match(r"\s*(\d+)\s+\d+\s+float\s+sum\s+([\d.]+)", line)
                    if m and int(m.group(1)) in sizes:
                        times[int(m.group(1))] = float(m.group(2))
            if times:
                res[algo] = times
    return res


def best(res, size):
    """(time_us, algo) of the fastest algorithm at size."""
    cands = [(t[size], a) for a, t in res.items() if size in t]
    return min(cands) if cands else (None, None)
