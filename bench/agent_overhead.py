"""What `fsprof agent` costs, side by side in one run, as ratios to bare
runs measured in the same interleaved rounds (bench/interleave.py):

  1. wall time of three workloads, with nothing attached ("bare"), with the
     agent's default layers (block, fs, fuse) running and scraped, and with
     a bpftrace biolatency-style histogram (block_rq_issue ->
     block_rq_complete, in a map keyed by request) doing the same kind of
     work:
       - grep: a warm `grep -r` over /usr/include;
       - cold: a 1 GiB file on a loop-mounted ext4, caches dropped, read
         sequentially and then at 4 KiB random offsets (the same 32 MiB of
         offsets each round);
       - procs: a shell loop of 1,000 short processes (`/bin/true`).
  2. the agent's own CPU at idle with a scrape every 15 s: its utime+stime
     over IDLE seconds, as a share of one CPU.
  3. `--syscalls`: the warm grep with the agent's syscall layer on, against
     bpftrace's empty raw_syscalls programs (the floor: what enabling the
     syscall tracepoints costs before any work), as `fsprof kernel`'s
     benchmark reports it.

Each agent variant is started once and kept running across the rounds (it
is always on); it is scraped before every timed run, as Prometheus would.
Needs root, bpftrace, mkfs.ext4 and a release build.

usage: sudo python3 bench/agent_overhead.py [ROUNDS] [IDLE_SECONDS]
       (FSPROF=path/to/fsprof to use another build)
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interleave import interleaved, ratio_table  # noqa: E402
from loop_ext4 import LoopExt4, stop  # noqa: E402

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 7
IDLE = float(sys.argv[2]) if len(sys.argv) > 2 else 60
FSPROF = os.path.abspath(os.environ.get("FSPROF", "target/release/fsprof"))
for need, why in [(FSPROF, "cargo build --release"), (shutil.which("bpftrace"), "apt-get install bpftrace"),
                  (shutil.which("mkfs.ext4"), "apt-get install e2fsprogs")]:
    if not need or not os.path.exists(need):
        sys.exit(f"missing: {why}")
if os.geteuid() != 0:
    sys.exit("needs root (eBPF, a loop mount, drop_caches)")

BIOLATENCY = """
tracepoint:block:block_rq_issue { @start[args->dev, args->sector] = nsecs; }
tracepoint:block:block_rq_complete /@start[args->dev, args->sector]/ {
  @usecs = hist((nsecs - @start[args->dev, args->sector]) / 1000);
  delete(@start[args->dev, args->sector]);
}"""

tmp = tempfile.mkdtemp(prefix="fsprof-agentbench-")
fs = LoopExt4(tmp, 1024)
big = fs.big

RANDOM = os.path.join(tmp, "random.py")
with open(RANDOM, "w") as f:
    f.write("""import os, random, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
size = os.fstat(fd).st_size
r = random.Random(7)
for _ in range(8192):
    os.pread(fd, 4096, r.randrange(size // 4096) * 4096)
""")


# Tracers started, stopped however the script ends.
running = []


def drop_caches():
    subprocess.run(["sync"])
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


WORK = {
    "grep": ["grep", "-r", "-q", "fsprof-no-such-string", "/usr/include"],
    "cold": ["sh", "-c", f"cat {big} >/dev/null && python3 {RANDOM} {big}"],
    "procs": ["sh", "-c", "i=0; while [ $i -lt 1000 ]; do /bin/true; i=$((i+1)); done"],
}


class Agent:
    """A running agent (always on across the rounds), scraped before each run."""

    def __init__(self, *extra):
        self.log = open(os.path.join(tmp, f"agent{len(extra)}.log"), "w+")
        self.p = subprocess.Popen([FSPROF, "agent", "--serve-metrics", "127.0.0.1:0", *extra],
                                  stdout=subprocess.DEVNULL, stderr=self.log)
        running.append(self)
        self.addr = None
        for _ in range(600):
            self.log.seek(0)
            for line in self.log.read().splitlines():
                if "serving metrics on http://" in line:
                    self.addr = line.split("http://")[1].split("/")[0]
            if self.addr:
                break
            time.sleep(0.05)
        if not self.addr:
            sys.exit(f"the agent did not start: {open(self.log.name).read()}")

    def scrape(self):
        return urllib.request.urlopen(f"http://{self.addr}/metrics", timeout=30).read()

    def cpu(self):
        """utime + stime, seconds."""
        f = open(f"/proc/{self.p.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        stop(self.p)


class Bpftrace:
    def __init__(self, prog):
        self.p = subprocess.Popen(["bpftrace", "-q", "-e", prog], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        running.append(self)
        time.sleep(3)  # attached (bpftrace has no readiness signal)

    def scrape(self):
        pass

    def stop(self):
        stop(self.p)


def run(what, tracer):
    def measure(_):
        if what == "cold":
            drop_caches()
        tracer.scrape()
        t = time.perf_counter()
        # grep finds nothing (exit 1) on purpose: it reads every file.
        subprocess.run(WORK[what], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - t
    return measure


def load():
    return open("/proc/loadavg").read().split()[0]


print(f"# fsprof agent overhead, {ROUNDS} interleaved rounds, medians; load at start {load()}")


class Bare:
    def scrape(self):
        pass

    def stop(self):
        pass


try:
    # 1. Wall time. The tracers run in turn, each across all rounds of every
    # workload, and bare rounds are interleaved with each (so ratios come from
    # the same stretch of machine load).
    for what in WORK:
        times = {}
        for name, make in [("fsprof agent", lambda: Agent()), ("bpftrace biolatency", lambda: Bpftrace(BIOLATENCY))]:
            tracer = make()
            t = interleaved({"bare": Bare(), name: tracer}, ROUNDS,
                            lambda v, w=what: run(w, v)(v))
            tracer.stop()
            times.setdefault("bare", []).extend(t["bare"])
            times[name] = t[name]
        print(f"\n## {what}: {' '.join(WORK[what])[:60]} (load {load()})")
        ratio_table(times, 22)

    # 2. Idle CPU with a scrape every 15 s.
    a = Agent()
    time.sleep(2)
    c0, t0 = a.cpu(), time.perf_counter()
    while time.perf_counter() - t0 < IDLE:
        a.scrape()
        time.sleep(15)
    used, span = a.cpu() - c0, time.perf_counter() - t0
    a.stop()
    print(f"\n## idle: agent CPU {used:.3f} s over {span:.0f} s with a scrape every 15 s = "
          f"{100 * used / span:.3f}% of one CPU (load {load()})")

    # 3. --syscalls against the empty-program floor, on the warm grep.
    times = {}
    for name, make in [("fsprof agent --syscalls", lambda: Agent("--syscalls")),
                       ("bpftrace empty raw_syscalls", lambda: Bpftrace(
                           "tracepoint:raw_syscalls:sys_enter { } tracepoint:raw_syscalls:sys_exit { }"))]:
        tracer = make()
        t = interleaved({"bare": Bare(), name: tracer}, ROUNDS, lambda v: run("grep", v)(v))
        tracer.stop()
        times.setdefault("bare", []).extend(t["bare"])
        times[name] = t[name]
    print(f"\n## --syscalls on the warm grep, against the empty-program floor (load {load()})")
    ratio_table(times, 28)

finally:
    for t in running:
        t.stop()
    fs.remove()
    shutil.rmtree(tmp)
