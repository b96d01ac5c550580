"""An OTLP/HTTP metrics receiver built on the official opentelemetry-proto
parser: every POST to /v1/metrics is parsed strictly (protobuf, or the
protobuf JSON mapping for application/json), checked, and summarised into
SUMMARY.json (the latest push's data points, and how many pushes came).

usage: otlp_receiver.py SUMMARY.json
Prints the port it listens on (127.0.0.1) as its first line.
"""
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

from google.protobuf import json_format
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)

OUT = sys.argv[1]
STATE = {"pushes": 0, "errors": []}


def attrs(kvs):
    return {kv.key: kv.value.string_value for kv in kvs}


def summarise(req):
    points = {}
    for rm in req.resource_metrics:
        res = attrs(rm.resource.attributes)
        assert res["service.name"] == "fsprof-agent", res
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                if m.HasField("exponential_histogram"):
                    for dp in m.exponential_histogram.data_points:
                        a = attrs(dp.attributes)
                        n = dp.zero_count + sum(dp.positive.bucket_counts)
                        assert dp.count == n, (a, dp.count, n)
                        key = "|".join([m.name, a["cgroup"], a["layer"], a["op"]])
                        points[key] = {
                            "count": dp.count,
                            "scale": dp.scale,
                            "offset": dp.positive.offset,
                            "buckets": list(dp.positive.bucket_counts),
                            "zero": dp.zero_count,
                        }
    return points


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        ctype = self.headers.get("Content-Type", "")
        req = ExportMetricsServiceRequest()
        try:
            if "json" in ctype:
                json_format.Parse(body, req)
            else:
                req.ParseFromString(body)
            points = summarise(req)
        except Exception as e:  # a push the parser rejects fails the test
            STATE["errors"].append(f"{ctype}: {e!r}")
            self.send_response(400)
            self.end_headers()
            self.write_state({})
            return
        STATE["pushes"] += 1
        self.write_state(points, ctype)
        resp = ExportMetricsServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(resp)))
        self.end_headers()
        self.wfile.write(resp)

    def write_state(self, points, ctype=""):
        tmp = OUT + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"pushes": STATE["pushes"], "errors": STATE["errors"],
                       "content_type": ctype, "points": points}, f)
        os.replace(tmp, OUT)

    def log_message(self, *args):
        pass


server = HTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
