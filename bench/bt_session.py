"""A bpftrace script running in the background for a benchmark's timeline
(bench/trace_attach.py, bench/trace_phases.py)."""
import subprocess
import time


def start(script, out):
    """Starts bpftrace on `script`, its output into the file `out`; returns
    once its probes are attached (and a second more), or after 30 s. Stop
    it with SIGINT and wait for it before reading `out`."""
    bt = subprocess.Popen(["bpftrace", "-e", script], stdout=open(out, "w"), stderr=subprocess.STDOUT)
    for _ in range(300):
        time.sleep(0.1)
        if "Attaching" in open(out).read(4096):
            break
    time.sleep(1)
    return bt
