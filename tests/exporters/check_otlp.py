"""Parses fsprof's OTLP/JSON into the real protobuf message
(opentelemetry-proto's ExportMetricsServiceRequest, strict parse: unknown
fields are errors) and checks every data point against the profile.

usage: check_otlp.py OTLP.json PROFILE.json
"""
import json
import math
import sys

from google.protobuf import json_format
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality


def attrs(kvs):
    return {kv.key: kv.value.string_value for kv in kvs}


def main():
    req = json_format.Parse(open(sys.argv[1], encoding="utf-8").read(), ExportMetricsServiceRequest())
    profile = json.load(open(sys.argv[2], encoding="utf-8"))
    meta = profile["meta"]
    res = meta["resolution"]
    ops = {(l["name"], o["name"]): o for l in profile["layers"] for o in l["ops"]}

    assert len(req.resource_metrics) == 1
    rm = req.resource_metrics[0]
    ra = attrs(rm.resource.attributes)
    host = meta["host"] or "+".join(sorted({s["host"] for s in meta.get("merged_from", []) if s["host"]}))
    assert ra["service.name"] == "fsprof" and ra["host.name"] == host, ra
    metrics = {m.name: m for m in rm.scope_metrics[0].metrics}
    lat = metrics["fsprof.op.latency"]
    assert lat.unit == "ns"
    assert lat.WhichOneof("data") == "exponential_histogram"
    eh = lat.exponential_histogram
    assert eh.aggregation_temporality == AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE
    seen = set()
    for dp in eh.data_points:
        a = attrs(dp.attributes)
        assert set(a) == {"host", "layer", "op", "command"}, a
        assert a["host"] == host, a
        key = (a["layer"], a["op"])
        seen.add(key)
        op = ops[key]
        h = op["histogram"]
        assert dp.scale == int(math.log2(res)), (dp.scale, res)
        assert dp.positive.offset == h.get("offset", 0), key
        assert list(dp.positive.bucket_counts) == h.get("counts", []), key
        assert dp.zero_count == h.get("zero", 0)
        assert dp.count == dp.zero_count + sum(dp.positive.bucket_counts) == op["post"], key
        assert dp.sum == op["total_ns"], key
        if "min_ns" in op:
            assert dp.HasField("min") and dp.min == op["min_ns"] and dp.max == op["max_ns"], key
        assert dp.start_time_unix_nano == meta["start_unix_ns"]
        assert dp.time_unix_nano == meta["start_unix_ns"] + meta["duration_ns"]
    assert seen == set(ops), seen ^ set(ops)
    errs = metrics["fsprof.op.errors"].sum
    assert errs.is_monotonic
    for dp in errs.data_points:
        a = attrs(dp.attributes)
        assert dp.as_int == ops[(a["layer"], a["op"])]["errors"]
    print(f"otlp ok: {len(eh.data_points)} exponential histograms at scale {int(math.log2(res))}")


main()
