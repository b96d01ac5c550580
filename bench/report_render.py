#!/usr/bin/env python3
"""Cost of fsprof's figures and exports against its text report.

Records one real profile (with intervals), then times each renderer
REPEAT times and prints the median wall time, the ratio to `fsprof report`
(text) measured in the same run, and the output size.

usage: bench/report_render.py [--repeat N]   (builds the release binary first)
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FSPROF = os.path.join(ROOT, "target", "release", "fsprof")
REPEAT = int(sys.argv[sys.argv.index("--repeat") + 1]) if "--repeat" in sys.argv else 7


def timed(args, out):
    times = []
    for _ in range(REPEAT):
        if out and os.path.exists(out):
            os.unlink(out)
        t = time.perf_counter()
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    subprocess.run(["cargo", "build", "--release", "-q"], cwd=ROOT, check=True)
    with tempfile.TemporaryDirectory() as d:
        prof = os.path.join(d, "p.json")
        subprocess.run(
            [FSPROF, "run", "-q", "--interval", "10ms", "-o", prof, "--", "sh", "-c",
             "for i in 1 2 3; do grep -r no_such_pattern /usr/include; done; true"],
            check=True, stdout=subprocess.DEVNULL)
        p = json.load(open(prof))
        ops = sum(len(l["ops"]) for l in p["layers"])
        print(f"profile: {ops} ops, {len(p['intervals'])} intervals, {os.path.getsize(prof)} bytes; median of {REPEAT}")
        cases = [
            ("report text (baseline)", [FSPROF, "report", prof], None),
            ("report --format html", [FSPROF, "report", prof, "--format", "html", "-o", f"{d}/r.html"], f"{d}/r.html"),
            ("export otlp-json", [FSPROF, "export", prof, "--format", "otlp-json", "-o", f"{d}/o.json"], f"{d}/o.json"),
            ("export prometheus", [FSPROF, "export", prof, "--format", "prometheus", "-o", f"{d}/m.prom"], f"{d}/m.prom"),
            ("plot count .svg", [FSPROF, "plot", prof, "--op", "read", "-o", f"{d}/c.svg"], f"{d}/c.svg"),
            ("plot count .png", [FSPROF, "plot", prof, "--op", "read", "-o", f"{d}/c.png"], f"{d}/c.png"),
            ("plot timeline .png", [FSPROF, "plot", prof, "--op", "read", "--kind", "timeline", "-o", f"{d}/t.png"], f"{d}/t.png"),
        ]
        base = None
        print(f"{'renderer':<24} {'median':>9} {'x text':>7} {'output':>10}")
        for name, args, out in cases:
            t = timed(args, out)
            base = base or t
            size = os.path.getsize(out) if out else 0
            print(f"{name:<24} {t * 1000:>7.1f}ms {t / base:>7.2f} {size:>10}")


main()
