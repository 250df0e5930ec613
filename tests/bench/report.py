#!/usr/bin/python3
"""The report of tests/bench/run-allreduce.sh.

report.py DIR
    DIR/allreduce.csv, floor.csv, retx.csv -> DIR/allreduce.md (summary at
    the largest size against the physical limits, the latency floor, CPU
    and retransmissions, then every row) and plots of busbw and time
    against size per rate, as SVG (no library needed) and PNG (matplotlib).
report.py --versus DIR
    Manager mode beside a static group (run-allreduce.sh --groups both):
    the time of each size and transport, manager / static, and the calls
    of 8..256 B as the median over their interleaved rounds.
report.py --compare DIR1 DIR2 RATE
    The ratios of two runs of the same command side by side; exit 1 when
    one at RATE (the link-bound rate) differs by more than 10%. Ratios at
    other (CPU-bound) rates are shown, not judged.
"""
import csv
import math
import sys
from collections import defaultdict

INCA = ("inca-udp", "inca-xdp")
RING = "openmpi-ring"
TOOLS = INCA + (RING,)


def rate_Bps(rate):
    """'200mbit' -> bytes per second"""
    units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
    for u, m in units.items():
        if rate.endswith(u):
            return float(rate[: -len(u)]) * m / 8
    raise SystemExit("report.py: rate %r: expected NNNkbit, NNNmbit or NNNgbit" % rate)


def load(d):
    rows = defaultdict(dict)     # (rate, tool, ranks) -> bytes -> row
    for r in csv.DictReader(open(d + "/allreduce.csv")):
        # bandwidths from the time, not from the tools' 3-decimal columns
        n, b = int(r["ranks"]), int(r["bytes"])
        r["algbw_GBps"] = "%.5f" % (b / float(r["time_us"]) / 1e3)
        r["busbw_GBps"] = "%.5f" % (b / float(r["time_us"]) / 1e3 * 2 * (n - 1) / n)
        rows[(r["rate"], r["tool"], n)][b] = r
    floor = {}                   # (rate, ranks, what) -> µs
    for r in csv.DictReader(open(d + "/floor.csv")):
        floor[(r["rate"], int(r["ranks"]), r["what"])] = float(r["median_us"])
    retx = {}                    # (rate, tool, ranks) -> (packets, retx, probes)
    for r in csv.DictReader(open(d + "/retx.csv")):
        retx[(r["rate"], r["tool"], int(r["ranks"]))] = (
            int(r["packets"]), int(r["retransmissions"]), int(r["probes"]))
    lat = defaultdict(lambda: defaultdict(list))  # (rate, tool, ranks) -> round -> µs
    try:
        for r in csv.DictReader(open(d + "/latency.csv")):
            if int(r["bytes"]) <= SMALL:
                lat[(r["rate"], r["tool"], int(r["ranks"]))][int(r["round"])].append(
                    float(r["time_us"]))
    except FileNotFoundError:
        pass                     # a run before the latency rounds
    rates = list(dict.fromkeys(k[0] for k in rows))
    ranks = sorted({k[2] for k in rows})
    return rows, floor, retx, rates, ranks, lat


SMALL = 256   # calls up to this are latency-bound: their median time is one figure


def median(v):
    t = sorted(v)
    return (t[(len(t) - 1) // 2] + t[len(t) // 2]) / 2 if t else float("nan")


def small_time(series):
    """the median over the sizes up to SMALL of their median times (µs)"""
    return median(float(r["time_us"]) for b, r in series.items() if b <= SMALL)


def latency(lat, rows, key):
    """(µs, rounds): the median over the interleaved rounds of each round's
    median over 8..SMALL B; without rounds, small_time of the sweep"""
    rounds = lat.get(key)
    if rounds:
        return median(median(v) for v in rounds.values()), len(rounds)
    return small_time(rows.get(key, {})), 0


def ratios(rows, lat, rates, ranks):
    """(rate, n, what) -> ratio: in-network / ring algbw at the largest size,
    ring / in-network time of the small calls (8..256 B, the rounds' median)"""
    out = {}
    for rate in rates:
        for n in ranks:
            ring = rows.get((rate, RING, n))
            if not ring:
                continue
            big = max(ring)
            for t in INCA:
                a = rows.get((rate, t, n))
                if not a or big not in a:
                    continue
                out[(rate, n, "%s algbw / ring at %d B" % (t, big))] = \
                    float(a[big]["algbw_GBps"]) / float(ring[big]["algbw_GBps"])
                out[(rate, n, "ring time / %s, calls of 8..%d B" % (t, SMALL))] = \
                    latency(lat, rows, (rate, RING, n))[0] / latency(lat, rows, (rate, t, n))[0]
    return out


def compare(d1, d2, judged):
    r1 = ratios(*[load(d1)[i] for i in (0, 5, 3, 4)])
    r2 = ratios(*[load(d2)[i] for i in (0, 5, 3, 4)])
    worst = 0
    print("# Two runs of the same command, ratio by ratio", "",
          "| rate | ranks | ratio | run 1 | run 2 | difference |",
          "|---|---:|---|---:|---:|---:|", sep="\n")
    for k in r1:
        if k not in r2:
            continue
        diff = abs(r2[k] - r1[k]) / r1[k]
        if k[0] == judged:
            worst = max(worst, diff)
        print("| %s | %d | %s | %.2f | %.2f | %.1f%%%s |" % (
            k[0], k[1], k[2], r1[k], r2[k], 100 * diff, "" if k[0] == judged else " (not judged)"))
    ok = worst <= 0.10
    print("\nlargest difference at %s (link-bound): %.1f%% (%s the 10%% bound)" %
          (judged, 100 * worst, "within" if ok else "OUTSIDE"))
    return 0 if ok else 1


def ceilings(mtu):
    """the header ceilings on links of this MTU (libinca's mtu auto: IB MTU
    4096 on udp, 2048 on xdp at 9000; fp32, E = 1024 above 1500)"""
    def inca(ib):
        data = (min(ib, 4096) - 32) // 4 * 4
        wire = data + 98 + 24        # headers, INCA header, ICRC; preamble, FCS, gap
        return "%d B of floats per %d B on the wire at IB MTU %d (%.0f%%)" % (
            data, wire, ib, 100.0 * data / wire)
    ib = 4096 if mtu >= 4096 + 52 else 2048 if mtu >= 2048 + 52 else 1024
    parts = ["INCA " + inca(ib) + (" on udp, " + inca(2048) + " on xdp" if ib > 2048 else "")]
    mss = mtu - 52
    parts.append("TCP %d per %d (%.0f%%), links of MTU %d" % (mss, mtu + 38, 100.0 * mss / (mtu + 38), mtu))
    return "; ".join(parts)


def report(d):
    rows, floor, retx, rates, ranks, lat = load(d)
    try:
        mtu = int(open(d + "/mtu.txt").read())
    except (FileNotFoundError, ValueError):
        mtu = 1500
    md = ["# All-reduce: in-network (inca-switch) vs Open MPI", "",
          "Open MPI at its best here (*ring* below): TCP with two connections per peer, "
          "recursive doubling below 4 KiB and the ring from 4 KiB "
          "(tests/bench/ompi-allreduce-rules.conf). "
          "float sum. time: median over the iterations of the slowest rank (µs); "
          "algbw = size / time; busbw = algbw · 2(N−1)/N (GB/s); cpu: user + system "
          "CPU seconds per GB reduced, per rank (mean over ranks; Open MPI's daemons "
          "not counted). Every result checked element by element on every rank.", ""]
    for rate in rates:
        link = rate_Bps(rate) / 1e9
        md += ["## Links of %s (%.4f GB/s)" % (rate, link), "",
               "### At the largest size, against the physical limits", "",
               "The ring moves 2(N−1)/N of the buffer in and out of every host, in-network "
               "aggregation once, so in-network algbw ÷ ring algbw is at most 2(N−1)/N when "
               "both reach the link. *link* is each side's payload rate in each direction "
               "÷ the link rate: in-network algbw (the buffer once each way), the ring's "
               "busbw. Header overheads cap it below 1: %s." % ceilings(mtu), "",
               "*cpu*: user + system CPU seconds per GB reduced, per rank, each side's "
               "ranks in the same run; *cpu ÷ ring*: in-network's against the ring's "
               "(issue 20 asks ≤ 0.5 on udp, ≤ 0.3 on xdp at the link-bound rate).", "",
               "| ranks | size | udp GB/s | xdp GB/s | ring GB/s | udp ÷ ring | xdp ÷ ring | "
               "ceiling | udp link | xdp link | ring link | cpu s/GB udp | xdp | ring | "
               "cpu udp ÷ ring | cpu xdp ÷ ring |",
               "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for n in ranks:
            ring = rows.get((rate, RING, n), {})
            if not ring:
                continue
            big = max(ring)
            get = lambda t, k: float(rows.get((rate, t, n), {}).get(big, {}).get(k, "nan"))
            u, x, m = get("inca-udp", "algbw_GBps"), get("inca-xdp", "algbw_GBps"), get(RING, "algbw_GBps")
            cu, cx, cr = (get(t, "cpu_s_per_GB") for t in TOOLS)
            md.append("| %d | %d | %.4f | %.4f | %.4f | %.2f | %.2f | %.2f | %.0f%% | %.0f%% | %.0f%% | "
                      "%.2f | %.2f | %.2f | %.2f | %.2f |" % (
                          n, big, u, x, m, u / m, x / m, 2 * (n - 1) / n, 100 * u / link,
                          100 * x / link, 100 * get(RING, "busbw_GBps") / link,
                          cu, cx, cr, cu / cr if cr else float("nan"),
                          cx / cr if cr else float("nan")))
        nr = max((latency(lat, rows, (rate, t, n))[1] for t in TOOLS for n in ranks), default=0)
        md += ["", "### The latency floor (median µs)", "",
               ("*8..256 B*: the median over %d rounds, taken in turn by udp, xdp and the "
                "ring, of each round's median over the sizes 8 to 256 B of their median "
                "times (every such call is one latency; taking turns spreads the "
                "machine's slow drifts over every side)." % nr) if nr else
               ("*8..256 B*: the median over the sizes 8 to 256 B of their median times "
                "(every such call is one latency; one figure is steadier than a size's)."),
               "*8 B*: the 8 B row of the sweep below.", "",
               "| ranks | ping switch | ping host | 8 B UDP echo (host) | 8 B udp | 8 B xdp | 8 B ring | "
               "8..256 B udp | xdp | ring | ring ÷ udp |",
               "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for n in ranks:
            small = lambda t: rows.get((rate, t, n), {}).get(8, {}).get("time_us", "–")
            band = lambda t: latency(lat, rows, (rate, t, n))[0]
            f = lambda w: "%.1f" % floor[(rate, n, w)] if (rate, n, w) in floor else "–"
            md.append("| %d | %s | %s | %s | %s | %s | %s | %.1f | %.1f | %.1f | %.2f |" % (
                n, f("ping-switch"), f("ping-host"), f("udp-echo-host"),
                small("inca-udp"), small("inca-xdp"), small(RING), band("inca-udp"),
                band("inca-xdp"), band(RING), band(RING) / band("inca-udp")))
        md += ["", "INCA's 8 B all-reduce is one round trip to the switch (compare *ping "
               "switch*) plus the wait for the slowest rank; the echo crosses the switch "
               "twice each way.", "",
               "### Retransmissions (links that drop nothing)", "",
               "| ranks | transport | packets (rank 0) | retransmitted | rate | of them probes |",
               "|---:|---|---:|---:|---:|---:|"]
        for n in ranks:
            for t in INCA:
                if (rate, t, n) in retx:
                    p, r, pr = retx[(rate, t, n)]
                    md.append("| %d | %s | %d | %d | %.3f%% | %d |" % (
                        n, t[5:], p, r, 100.0 * r / p if p else 0, pr))
        md.append("")
        for n in ranks:
            md += ["### %d ranks, every size" % n, "",
                   "| size (B) | " + " | ".join("%s µs | GB/s algbw | cpu s/GB" % t for t in TOOLS) +
                   " | udp ÷ ring algbw |",
                   "|---:|" + "---:|" * (3 * len(TOOLS) + 1)]
            sizes = sorted({b for t in TOOLS for b in rows.get((rate, t, n), {})})
            for b in sizes:
                cells = []
                for t in TOOLS:
                    r = rows.get((rate, t, n), {}).get(b)
                    cells += [r["time_us"], r["algbw_GBps"], r["cpu_s_per_GB"]] if r else ["", "", ""]
                a, m = rows.get((rate, "inca-udp", n), {}).get(b), rows.get((rate, RING, n), {}).get(b)
                ratio = "%.2f" % (float(m["time_us"]) / float(a["time_us"])) if a and m else ""
                md.append("| %d | %s | %s |" % (b, " | ".join(cells), ratio))
            md.append("")
        plots(d, rows, rate, ranks)
        md += ["Plots: [busbw](allreduce-busbw-%s.png) ([svg](allreduce-busbw-%s.svg)), "
               "[time](allreduce-time-%s.png) ([svg](allreduce-time-%s.svg))." % ((rate,) * 4), ""]
    open(d + "/allreduce.md", "w").write("\n".join(md) + "\n")
    print("\n".join(md[: 40]))


COLORS = {"inca-udp": "#1f77b4", "inca-xdp": "#2ca02c", RING: "#d62728"}
DASHES = {2: "", 4: "6,3", 8: "2,2"}


def plots(d, rows, rate, ranks):
    for metric, label, logy, name in (("busbw_GBps", "busbw (GB/s)", False, "busbw"),
                                      ("time_us", "time per all-reduce (µs)", True, "time")):
        series = []
        for n in ranks:
            for t in TOOLS:
                pts = [(b, float(r[metric])) for b, r in sorted(rows.get((rate, t, n), {}).items())
                       if float(r[metric]) > 0]
                if pts:
                    series.append(("%s, %d ranks" % (t, n), COLORS[t], DASHES.get(n, "1,1"), pts))
        title = "All-reduce, float sum, links of %s" % rate
        base = "%s/allreduce-%s-%s" % (d, name, rate)
        svg(base + ".svg", series, label, logy, title)
        png(base + ".png", series, label, logy, title)


def svg(path, series, ylabel, logy, title):
    W, H, L, R, T, B = 800, 480, 70, 210, 40, 50
    xs = [b for s in series for b, _ in s[3]]
    ys = [y for s in series for _, y in s[3]]
    if not xs:
        return
    x0, x1 = math.log10(min(xs)), math.log10(max(xs))
    y0, y1 = (math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))) if logy else (0, max(ys) * 1.1)
    fx = lambda b: L + (math.log10(b) - x0) / ((x1 - x0) or 1) * (W - L - R)
    fy = lambda y: H - B - ((math.log10(y) if logy else y) - y0) / ((y1 - y0) or 1) * (H - T - B)
    s = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">' % (W, H),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="20" font-size="13">%s</text>' % (L, title),
         '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (L, H - B, W - R, H - B),
         '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (L, T, L, H - B)]
    for e in range(int(math.floor(x0)), int(math.ceil(x1)) + 1):
        x = fx(10 ** e)
        if L <= x <= W - R:
            s.append('<text x="%.0f" y="%d" text-anchor="middle">1e%d</text>' % (x, H - B + 15, e))
    ticks = [10 ** e for e in range(int(y0), int(y1) + 1)] if logy else [y1 * i / 5 for i in range(6)]
    for y in ticks:
        s.append('<text x="%d" y="%.0f" text-anchor="end">%s</text>' % (L - 5, fy(y) + 4, "%.3g" % y))
        s.append('<line x1="%d" y1="%.0f" x2="%d" y2="%.0f" stroke="#ddd"/>' % (L, fy(y), W - R, fy(y)))
    s.append('<text x="%d" y="%d" text-anchor="middle">size (bytes)</text>' % ((L + W - R) // 2, H - 10))
    s.append('<text x="15" y="%d" transform="rotate(-90 15 %d)" text-anchor="middle">%s</text>' % (H // 2, H // 2, ylabel))
    for i, (name, color, dash, pts) in enumerate(series):
        d = " ".join("%.1f,%.1f" % (fx(b), fy(y)) for b, y in pts)
        s.append('<polyline fill="none" stroke="%s" stroke-width="2" stroke-dasharray="%s" points="%s"/>' % (color, dash, d))
        s.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2" stroke-dasharray="%s"/>' % (W - R + 10, T + 15 * i, W - R + 35, T + 15 * i, color, dash))
        s.append('<text x="%d" y="%d">%s</text>' % (W - R + 40, T + 15 * i + 4, name))
    s.append("</svg>")
    open(path, "w").write("\n".join(s) + "\n")


def png(path, series, ylabel, logy, title):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("report.py: no matplotlib (python3-matplotlib): %s not drawn" % path, file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(9, 5.4), dpi=100)
    for name, color, dash, pts in series:
        style = {"": "-", "6,3": "--", "2,2": ":"}.get(dash, "-.")
        ax.plot([b for b, _ in pts], [y for _, y in pts], style, color=color, label=name, linewidth=1.8)
    ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel("size (bytes)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def versus(d):
    """manager mode (inca-T) against a static group (inca-T-static), in
    DIR: every size of the sweep, then the small calls from the rounds"""
    rows, _, _, rates, ranks, lat = load(d)
    print("manager mode beside a static group (time in us, manager / static):")
    print("%-8s %-5s %12s %10s %12s %12s %7s" % ("rate", "ranks", "bytes", "transport",
                                               "manager us", "static us", "ratio"))
    for rate in rates:
        for n in ranks:
            for t in INCA:
                mg, st = rows.get((rate, t, n), {}), rows.get((rate, t + "-static", n), {})
                for b in sorted(set(mg) & set(st)):
                    a, c = float(mg[b]["time_us"]), float(st[b]["time_us"])
                    print("%-8s %-5d %12d %10s %12.1f %12.1f %7.3f" % (rate, n, b, t[5:], a, c, a / c))
                (a, ra), (c, rc) = latency(lat, rows, (rate, t, n)), latency(lat, rows, (rate, t + "-static", n))
                if ra and rc:
                    print("%-8s %-5d %12s %10s %12.1f %12.1f %7.3f   (median of %d and %d rounds)" %
                          (rate, n, "8..%d" % SMALL, t[5:], a, c, a / c, ra, rc))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--versus":
        sys.exit(versus(sys.argv[2]))
    if len(sys.argv) == 5 and sys.argv[1] == "--compare":
        sys.exit(compare(sys.argv[2], sys.argv[3], sys.argv[4]))
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    report(sys.argv[1])
