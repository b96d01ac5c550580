"""A loop-mounted ext4 holding one file of random bytes, for the agent's
benchmarks (bench/agent_overhead.py, bench/agent_program_cost.py); made
without lazy initialisation, so that nothing but the workload touches the
device later."""
import os
import subprocess


class LoopExt4:
    def __init__(self, tmp, file_mib):
        img, self.mnt = os.path.join(tmp, "img"), os.path.join(tmp, "mnt")
        os.mkdir(self.mnt)
        with open(img, "wb") as f:
            f.truncate((file_mib + file_mib // 3 + 64) << 20)
        subprocess.run(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", img],
                       check=True)
        self.dev = subprocess.run(["losetup", "--find", "--show", img], check=True, capture_output=True,
                                  text=True).stdout.strip()
        subprocess.run(["mount", "-o", "noatime", self.dev, self.mnt], check=True)
        self.big = os.path.join(self.mnt, "big")
        subprocess.run(["dd", "if=/dev/urandom", f"of={self.big}", "bs=1M", f"count={file_mib}",
                        "status=none"], check=True)
        subprocess.run(["sync"], check=True)

    def remove(self):
        subprocess.run(["umount", self.mnt])
        subprocess.run(["losetup", "-d", self.dev])


def stop(p):
    """SIGINT, as Ctrl-C (bpftrace prints its maps and exits; both tools
    detach), then SIGKILL after a minute."""
    if p.poll() is None:
        p.send_signal(2)
        try:
            p.wait(60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
