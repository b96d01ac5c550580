"""The pairs of runs of a pool made by bench/compare_rates.py, as
bench/compare_floor.py and bench/compare_heldout.py read them: identical
pairs are baseline runs 2i and 2i+1, slowed pairs baseline run 2i against
slowed run i of an op (made between them), over the whole pool; and its
sets of three runs a side, as compare_rates.py makes them (set i: baseline
runs 6i..6i+5, A the even ones and B the odd ones; slowed: A against
slowed runs 3i..3i+2)."""
import os

# The ops compare_rates.py slows, per workload.
OPS = {"meta": ["readdir", "getxattr"], "read": ["open", "read"], "procs": ["close", "read"]}


def runs(pool, w, kind):
    out, i = [], 0
    while os.path.exists(os.path.join(pool, f"{w}-{kind}-{i}.json")):
        out.append(os.path.join(pool, f"{w}-{kind}-{i}.json"))
        i += 1
    return out


def pairs(pool, w):
    """(kind, slowed op or None, A, B) of workload `w` in `pool`."""
    base = runs(pool, w, "base")
    for i in range(len(base) // 2):
        yield ("identical", None, base[2 * i], base[2 * i + 1])
    for op in OPS[w]:
        for i, s in enumerate(runs(pool, w, op)):
            if 2 * i < len(base):
                yield ("slowed", op, base[2 * i], s)


def sets(pool, w):
    """(kind, slowed op or None, [A1, A2, A3], [B1, B2, B3]) of workload `w`."""
    base = runs(pool, w, "base")
    n = len(base) // 6
    for i in range(n):
        yield ("identical", None, base[6 * i:6 * i + 6:2], base[6 * i + 1:6 * i + 6:2])
    for op in OPS[w]:
        slowed = runs(pool, w, op)
        for i in range(min(n, len(slowed) // 3)):
            yield ("slowed", op, base[6 * i:6 * i + 6:2], slowed[3 * i:3 * i + 3])
