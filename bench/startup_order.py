#!/usr/bin/env python3
"""Writes crates/fsprof-cli/startup.order: the functions the `fsprof`
binary runs in its own process for `run -q -- true` (with and without a
profile file, with the summary) and `--version`, as the linker names them,
for lld's --symbol-ordering-file (build.rs). Laid out together at the
start of the text, they fault in as a few 64 KiB windows of the file
instead of one window each (~30 faults a start, spread over 9 MB of code).

The functions are found with valgrind's callgrind (every function that
ran, not a sample), mangled, and kept only where the built binary defines
them; a few that callgrind does not see are added by name: the start-up
before `main` (`_start`, glibc's CPU-feature and cache detection, which
callgrind's emulated CPU takes another way) and the vfork child's code,
which runs in fsprof's memory before the command's `execve`.

Run it after a toolchain or dependency update (the symbols' hashes
change, and `cli::startup::the_start_up_functions_are_laid_out_together`
fails when most names are no longer found):

    cargo build --release -p fsprof
    python3 bench/startup_order.py [--fsprof target/release/fsprof]
    cargo build --release -p fsprof   # relinks with the new order

Needs valgrind and nm.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "crates", "fsprof-cli", "startup.order")

# Run outside callgrind's view (see the module doc): before `main`; the
# vDSO's set-up (valgrind gives a program no vDSO); the vfork child before
# its `execve`; the wait for the command (under valgrind fsprof is so slow
# that the command has always exited when it looks). Found with `perf
# record -e page-faults -d` of the ordered binary: code that still faulted
# outside the ordered text.
EXTRA = re.compile(
    r"^(_start|__libc_start_main(_impl)?|__libc_start_call_main|_dl_relocate_static_pie"
    r"|_dl_non_dynamic_init|_dl_get_origin|handle_amd|handle_intel|intel_check_word"
    r"|init_cacheinfo|(get_common_indices|get_extended_indices|update_active"
    r"|init_cpu_features|dl_init_cacheinfo)(\..*)?"
    r"|_dl_new_object|_dl_setup_hash|_dl_lookup_symbol_x|do_lookup_x|check_match"
    r"|_dl_add_to_namespace_list|_dl_name_match_p|setup_vdso(_pointers)?|_dl_vdso_vsym"
    r"|___pthread_mutex_lock|__pthread_mutex_unlock_usercnt|__strcmp_avx2|__strcmp_evex"
    r"|__execve|__sched_setaffinity_new|__sigtimedwait|__wait4|__waitid)$"
    r"|vfork_child|inherited7restore|stdio15closed_at_start|StopSignals4wait"
    r"|6Source5ended|7process5Child4wait|7process5Child8try_wait"
)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fsprof", default=os.path.join(ROOT, "target/release/fsprof"))
    a = ap.parse_args()
    for prog in ("valgrind", "nm"):
        if not shutil.which(prog):
            sys.exit(f"needs {prog}")
    fsprof = os.path.abspath(a.fsprof)
    defined = {}
    for line in subprocess.run(["nm", fsprof], capture_output=True, text=True, check=True).stdout.splitlines():
        p = line.split()
        if len(p) == 3 and p[1] in "tTwWiI":
            defined.setdefault(p[2], int(p[0], 16))
    tmp = tempfile.mkdtemp()
    try:
        forms = [["run", "-q", "--", "true"], ["run", "-q", "-o", "/dev/null", "--", "true"],
                 ["run", "--", "true"], ["--version"]]
        for k, args in enumerate(forms):
            # Twice: the first run in a boot also measures the shim's own
            # cost and the clock, which later runs read from a file.
            for _ in range(2):
                subprocess.run(["valgrind", "--tool=callgrind", "--demangle=no",
                                f"--callgrind-out-file={tmp}/cg.{k}.%p", fsprof, *args],
                               cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        ran = set()
        for f in glob.glob(f"{tmp}/cg.*"):
            for line in open(f, errors="replace"):
                m = re.match(r"^c?fn=\(\d+\) (.*)", line)
                if m:
                    # callgrind marks a function's recursion depth with 'N.
                    ran.add(re.sub(r"'\d+$", "", m.group(1).strip()))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    names = {n for n in ran if n in defined} | {n for n in defined if EXTRA.search(n)}
    if len(names) < 100:
        sys.exit(f"only {len(names)} functions found: did valgrind run fsprof?")
    # In the order the binary has them now: callers stay near what they
    # call as the compiler laid them out.
    order = sorted(names, key=lambda n: (defined[n], n))
    with open(OUT, "w") as f:
        f.write("".join(n + "\n" for n in order))
    print(f"{len(order)} functions written to {os.path.relpath(OUT, ROOT)}")


if __name__ == "__main__":
    main()
