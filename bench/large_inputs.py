#!/usr/bin/env python3
"""Large inputs: a fleet merge of 1,000 profiles, and readers on profiles
of 20k and 100k layers.

1. Fleet merge. Records a few real profiles (`fsprof run` of small real
   workloads), copies them into N host profiles (distinct host names and
   start times, as a fleet's would be), then times `fsprof merge` of N/10
   and of N profiles, against a baseline measured in the same run:
   `fsprof check` of the same N files (reads and checks every input,
   merges nothing). Prints median CPU and wall times, the ratio to the
   baseline, how the time grows from N/10 to N inputs (10.0 = linear) and
   peak memory.
2. Scaling. Writes a profile of SMALL layers and one of 5 x SMALL layers
   (one op each, seeded random histograms), and times report
   --interesting, merge, compare, check and export otlp-json on both:
   "growth" is the ratio of the two medians of CPU time (user + system;
   wall time on a shared machine measures the other users too), 5.0 for
   a linear reader, 25 for a quadratic one; and the same for peak memory.

usage: bench/large_inputs.py [--repeat N] [--fleet N] [--small LAYERS]
       (builds the release binary first)
"""
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FSPROF = os.path.join(ROOT, "target", "release", "fsprof")


def arg(name, default):
    return int(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


REPEAT = arg("--repeat", 3)
FLEET = arg("--fleet", 1000)
SMALL = arg("--small", 20000)


def run_once(args):
    """CPU seconds (user + system), wall seconds and peak resident KiB of
    one run of `args`, from GNU time (wait4 in this script would count
    Python's own peak: Linux keeps the peak across exec)."""
    with tempfile.NamedTemporaryFile("r") as t:
        p = subprocess.run(["/usr/bin/time", "-q", "-o", t.name, "-f", "%U %S %e %M", *args],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # check and compare exit 1 for what they find, not for failing.
        if p.returncode not in (0, 1):
            sys.exit(f"{' '.join(args[:3])} ... failed ({p.returncode}): {p.stderr.decode(errors='replace')}")
        user, sys_s, wall, kib = t.read().split()[-4:]
    return float(user) + float(sys_s), float(wall), int(kib)


def timed(args):
    """Median CPU seconds, median wall seconds, largest peak KiB."""
    runs = [run_once(args) for _ in range(REPEAT)]
    return (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs),
            max(r[2] for r in runs))


def fleet(d):
    workloads = [
        "cat /etc/passwd /etc/group > /dev/null",
        "ls -lR /usr/include/linux > /dev/null",
        "grep -r -l no_such_pattern /usr/include/net > /dev/null; true",
        "find /usr/share/doc -name copyright | head -50 | xargs cat > /dev/null",
        "tar cf - /usr/include/asm-generic 2>/dev/null | wc -c > /dev/null",
    ]
    real = []
    for i, w in enumerate(workloads):
        out = os.path.join(d, f"real{i}.json")
        subprocess.run([FSPROF, "run", "-q", "-f", "-o", out, "--", "sh", "-c", w],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        real.append(json.load(open(out)))
    files = []
    for h in range(FLEET):
        p = json.loads(json.dumps(real[h % len(real)]))
        p["meta"]["host"] = f"host{h:04d}"
        p["meta"]["start_unix_ns"] += h * 1_000_000_000
        f = os.path.join(d, f"host{h:04d}.json")
        with open(f, "w") as o:
            json.dump(p, o)
        files.append(f)
    size = sum(os.path.getsize(f) for f in files)
    ops = sum(len(l["ops"]) for p in real for l in p["layers"]) / len(real)
    procs = sum(len(p.get("processes", [])) for p in real) / len(real)
    print(f"## fleet merge: {FLEET} profiles of {len(real)} real runs "
          f"({ops:.0f} ops, {procs:.0f} processes each on average), "
          f"{size / 1e6:.1f} MB in all; median of {REPEAT}")
    tenth = files[: FLEET // 10]
    rows = [
        (f"check {FLEET} files (baseline)", [FSPROF, "check", *files]),
        (f"merge {len(tenth)} files", [FSPROF, "merge", *tenth, "-f", "-o", os.path.join(d, "m1.json")]),
        (f"merge {FLEET} files", [FSPROF, "merge", *files, "-f", "-o", os.path.join(d, "m2.json")]),
    ]
    got = [timed(a) for _, a in rows]
    merged = json.load(open(os.path.join(d, "m2.json")))
    assert len(merged["meta"]["merged_from"]) == FLEET, "every input is in the merge"
    base = max(got[0][0], 0.01)  # GNU time counts in hundredths
    print(f"{'command':<32} {'cpu s':>7} {'x check':>8} {'wall s':>7} {'peak MB':>8}")
    for (name, _), (cpu, wall, kib) in zip(rows, got):
        print(f"{name:<32} {cpu:>7.3f} {cpu / base:>8.2f} {wall:>7.3f} {kib / 1024:>8.0f}")
    print(f"growth of merge's CPU time from {len(tenth)} to {FLEET} inputs: "
          f"{got[2][0] / max(got[1][0], 0.01):.1f}x (10.0 = linear)")


def synthetic(path, layers, seed):
    rng = random.Random(seed)
    out = []
    for i in range(layers):
        counts = [rng.randrange(50) for _ in range(8)]
        n = sum(counts)
        out.append({"name": f"layer{i}", "ops": [{
            "name": "op0", "pre": n, "post": n, "errors": 0, "total_ns": n * 1000,
            "min_ns": 100, "max_ns": 100000,
            "histogram": {"zero": 0, "offset": 7, "counts": counts}}]})
    p = {"format": "fsprof-profile", "format_version": 1,
         "meta": {"fsprof_version": "0.1.0", "tool": "run", "command": ["x"], "host": "h",
                  "kernel": "k", "start_time": "2026-11-22T00:00:00Z", "start_unix_ns": 1,
                  "duration_ns": 1000000, "clock": {"source": "monotonic"}, "resolution": 1},
         "layers": out}
    with open(path, "w") as o:
        json.dump(p, o)


def scaling(d):
    sizes = [SMALL, 5 * SMALL]
    paths = {}
    for n in sizes:
        for seed in (1, 2):
            paths[n, seed] = os.path.join(d, f"l{n}-{seed}.json")
            synthetic(paths[n, seed], n, seed * n)
    print(f"\n## scaling: {sizes[0]} vs {sizes[1]} layers "
          f"({os.path.getsize(paths[sizes[0], 1]) / 1e6:.1f} vs "
          f"{os.path.getsize(paths[sizes[1], 1]) / 1e6:.1f} MB); median of {REPEAT}")
    cases = [
        ("report --interesting", lambda a, b: [FSPROF, "report", a, "--interesting"]),
        ("merge A B", lambda a, b: [FSPROF, "merge", a, b, "-f", "-o", os.path.join(d, "m.json")]),
        ("compare A B", lambda a, b: [FSPROF, "compare", a, b]),
        ("check A", lambda a, b: [FSPROF, "check", a]),
        ("export otlp-json A", lambda a, b: [FSPROF, "export", a, "--format", "otlp-json", "-o",
                                             os.path.join(d, "o.json"), "-f"]),
    ]
    print(f"{'command':<22} {'cpu s ' + str(sizes[0]):>12} {'cpu s ' + str(sizes[1]):>12} {'growth':>7} "
          f"{'MB ' + str(sizes[0]):>9} {'MB ' + str(sizes[1]):>9} {'growth':>7}")
    for name, make in cases:
        (t1, _, m1), (t2, _, m2) = (timed(make(paths[n, 1], paths[n, 2])) for n in sizes)
        print(f"{name:<22} {t1:>12.2f} {t2:>12.2f} {t2 / max(t1, 0.01):>7.1f} "
              f"{m1 / 1024:>9.0f} {m2 / 1024:>9.0f} {m2 / m1:>7.1f}")


def main():
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "fsprof"], cwd=ROOT, check=True)
    with tempfile.TemporaryDirectory() as d:
        if "--no-fleet" not in sys.argv:
            fleet(d)
        if "--no-scaling" not in sys.argv:
            scaling(d)


if __name__ == "__main__":
    main()
