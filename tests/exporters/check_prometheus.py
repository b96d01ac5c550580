"""Parses fsprof's Prometheus exposition with the official Python client's
parser and checks it against the profile it came from.

usage: check_prometheus.py METRICS.txt PROFILE.json [--live]
With --live the profile only bounds the metrics (a scrape during a run sees
fewer calls than the final profile); without it they must match exactly.
"""
import json
import math
import sys

from prometheus_client.parser import text_string_to_metric_families


def main():
    text = open(sys.argv[1], encoding="utf-8").read()
    profile = json.load(open(sys.argv[2], encoding="utf-8"))
    live = "--live" in sys.argv[3:]
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert set(families) == {"fsprof_op_latency_seconds", "fsprof_op_errors"}, families.keys()
    hist = families["fsprof_op_latency_seconds"]
    assert hist.type == "histogram", hist.type

    series = {}
    for s in hist.samples:
        labels = dict(s.labels)
        key = (labels["layer"], labels["op"])
        for k in ("host", "command"):
            assert labels[k] != "" or k == "host", (k, labels)
        ser = series.setdefault(key, {"buckets": [], "sum": None, "count": None, "labels": labels})
        if s.name.endswith("_bucket"):
            ser["buckets"].append((float(labels["le"]), s.value))
        elif s.name.endswith("_sum"):
            ser["sum"] = s.value
        elif s.name.endswith("_count"):
            ser["count"] = s.value
    res = profile["meta"]["resolution"]
    ops = {(l["name"], o["name"]): o for l in profile["layers"] for o in l["ops"]}
    if not live:
        assert set(series) == set(ops), (set(series) ^ set(ops))
    assert series, "no series"
    for key, ser in series.items():
        op = ops[key]
        b = ser["buckets"]
        les = [le for le, _ in b]
        assert les == sorted(les) and les[-1] == math.inf, les
        counts = [c for _, c in b]
        assert counts == sorted(counts), f"{key}: not cumulative: {counts}"
        assert counts[-1] == ser["count"], key
        h = op["histogram"]
        total = h.get("zero", 0) + sum(h.get("counts", []))
        if live:
            assert ser["count"] <= total and ser["sum"] <= op["total_ns"] / 1e9 * (1 + 1e-12), key
            continue
        assert ser["count"] == total, (key, ser["count"], total)
        assert math.isclose(ser["sum"], op["total_ns"] / 1e9, rel_tol=1e-12), key
        # Each finite le is an exact fsprof upper bound 2^((i+1)/r) ns in
        # seconds, and the count between consecutive bounds is that
        # bucket's count.
        prev = 0
        offset = h.get("offset", 0)
        finite = [(le, c) for le, c in b if le != math.inf and le != 0]
        for k, (le, c) in enumerate(finite):
            i = offset + k
            assert math.isclose(le, 2 ** ((i + 1) / res) / 1e9, rel_tol=1e-15), (key, le, i)
        for k, (le, c) in enumerate(b):
            if le == math.inf:
                break
            if le == 0:
                assert c == h.get("zero", 0)
            else:
                assert c - prev == h["counts"][k - (1 if h.get("zero", 0) else 0)], (key, le)
            prev = c
    errors = families["fsprof_op_errors"]
    assert errors.type == "counter"
    if not live:
        for s in errors.samples:
            labels = dict(s.labels)
            assert s.value == ops[(labels["layer"], labels["op"])]["errors"]
    print(f"prometheus ok: {len(series)} histograms, {sum(len(s['buckets']) for s in series.values())} buckets")


main()
