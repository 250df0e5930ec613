#!/usr/bin/python3
"""allreduce.csv -> allreduce.md (tables, ratios) and two SVG plots (busbw and
latency against size, log-log), without plotting libraries.
Usage: report.py CSV OUTDIR RATE"""
import csv
import math
import sys
from collections import defaultdict

src, out, rate = sys.argv[1:4]
rows = list(csv.DictReader(open(src)))
data = defaultdict(dict)          # (tool, ranks) -> bytes -> row
for r in rows:
    data[(r["tool"], int(r["ranks"]))][int(r["bytes"])] = r
tools = sorted({t for t, _ in data})
ranks = sorted({n for _, n in data})
link = {"1gbit": 0.125}.get(rate, None)

md = ["# All-reduce: in-network (inca-switch) vs Open MPI ring", "",
      "float sum; time in µs (mean per call), algbw = size / time, busbw = algbw · 2(N−1)/N, "
      "GB/s. Links shaped to %s by the switch." % rate, ""]
for n in ranks:
    md += ["## %d ranks" % n, "",
           "| size (B) | " + " | ".join("%s time | %s algbw | %s busbw" % (t, t, t) for t in tools) +
           " | in-network / ring algbw (udp) | ring / in-network time (udp) |",
           "|---:|" + "---:|" * (3 * len(tools) + 2)]
    sizes = sorted({b for t in tools for b in data[(t, n)]})
    for b in sizes:
        cells = []
        for t in tools:
            r = data[(t, n)].get(b)
            cells += [r["time_us"], r["algbw_GBps"], r["busbw_GBps"]] if r else ["", "", ""]
        a, m = data[("inca-udp", n)].get(b), data[("openmpi-ring", n)].get(b)
        ratio = lat = ""
        if a and m and float(m["algbw_GBps"]) > 0:
            ratio = "%.2f" % (float(a["algbw_GBps"]) / float(m["algbw_GBps"]))
        if a and m:
            lat = "%.2f" % (float(m["time_us"]) / float(a["time_us"]))
        md.append("| %d | %s | %s | %s |" % (b, " | ".join(cells), ratio, lat))
    md.append("")
    if link:
        m = data[("openmpi-ring", n)]
        if m:
            big = max(m)
            md.append("Open MPI ring at %d B: busbw %.3f GB/s = %.0f%% of the %s link." %
                      (big, float(m[big]["busbw_GBps"]), 100 * float(m[big]["busbw_GBps"]) / link, rate))
            md.append("")
open(out + "/allreduce.md", "w").write("\n".join(md) + "\n")

colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"]
dashes = {2: "", 4: "6,3", 8: "2,2"}

def svg(metric, ylabel, fname, logy):
    W, H, L, R, T, B = 760, 480, 70, 200, 30, 50
    pts = {k: [(b, float(r[metric])) for b, r in sorted(v.items()) if float(r[metric]) > 0]
           for k, v in data.items()}
    xs = [b for v in pts.values() for b, _ in v]
    ys = [y for v in pts.values() for _, y in v]
    if not xs:
        return
    x0, x1 = math.log10(min(xs)), math.log10(max(xs))
    if logy:
        y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    else:
        y0, y1 = 0, max(ys) * 1.1
    fx = lambda b: L + (math.log10(b) - x0) / ((x1 - x0) or 1) * (W - L - R)
    fy = lambda y: H - B - ((math.log10(y) if logy else y) - y0) / ((y1 - y0) or 1) * (H - T - B)
    s = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">' % (W, H),
         '<rect width="100%" height="100%" fill="white"/>',
         '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (L, H - B, W - R, H - B),
         '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (L, T, L, H - B)]
    for e in range(int(math.floor(x0)), int(math.ceil(x1)) + 1):
        x = fx(10 ** e)
        if L <= x <= W - R:
            s.append('<text x="%.0f" y="%d" text-anchor="middle">1e%d</text>' % (x, H - B + 15, e))
    ticks = [10 ** e for e in range(int(y0), int(y1) + 1)] if logy else [y1 * i / 5 for i in range(6)]
    for y in ticks:
        s.append('<text x="%d" y="%.0f" text-anchor="end">%s</text>' % (L - 5, fy(y) + 4, ("%g" % y)))
        s.append('<line x1="%d" y1="%.0f" x2="%d" y2="%.0f" stroke="#ddd"/>' % (L, fy(y), W - R, fy(y)))
    s.append('<text x="%d" y="%d" text-anchor="middle">size (bytes)</text>' % ((L + W - R) // 2, H - 10))
    s.append('<text x="15" y="%d" transform="rotate(-90 15 %d)" text-anchor="middle">%s</text>' % (H // 2, H // 2, ylabel))
    for i, (k, v) in enumerate(sorted(pts.items())):
        c = colors[tools.index(k[0]) % len(colors)]
        d = " ".join("%.1f,%.1f" % (fx(b), fy(y)) for b, y in v)
        s.append('<polyline fill="none" stroke="%s" stroke-width="2" stroke-dasharray="%s" points="%s"/>' % (c, dashes.get(k[1], ""), d))
        s.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2" stroke-dasharray="%s"/>' % (W - R + 10, T + 15 * i, W - R + 35, T + 15 * i, c, dashes.get(k[1], "")))
        s.append('<text x="%d" y="%d">%s, %d ranks</text>' % (W - R + 40, T + 15 * i + 4, k[0], k[1]))
    s.append("</svg>")
    open(out + "/" + fname, "w").write("\n".join(s) + "\n")

svg("busbw_GBps", "busbw (GB/s)", "allreduce-busbw.svg", False)
svg("time_us", "time per all-reduce (us)", "allreduce-latency.svg", True)
