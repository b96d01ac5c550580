//! The block programs' bookkeeping of completions the kernel does not
//! deliver, run in the kernel on made-up requests (BPF_PROG_TEST_RUN with
//! the raw tracepoints' arguments): a request issued twice without a
//! completion or a requeue in between is counted once as undelivered; a
//! completion or a requeue in between clears it. The request pointers are
//! never dereferenced except through `bpf_probe_read_kernel`, which reads
//! zeros from an address that is not kernel memory.

use fsprof_kernel::blockrq::{self, RqLayout};
use fsprof_kernel::progs::{self, Shared, START_KEY_SIZE, START_VAL_SIZE, STATS_VAL_SIZE};
use fsprof_kernel::sys::{self, Map, Prog};

struct Block {
    issue: Prog,
    requeue: Prog,
    complete: Prog,
    undelivered: Map,
    stats: Map,
    _maps: Vec<Map>,
}

impl Block {
    fn load() -> Block {
        let l = RqLayout::vmlinux().expect("kernel BTF describes struct request");
        let map = |name, ty, k, v, n| Map::create(name, ty, k, v, n, 0).expect(name);
        let start = map("t_start", sys::MAP_HASH, START_KEY_SIZE, START_VAL_SIZE, 64);
        let undelivered = map("t_undeliv", sys::MAP_HASH, 8, 8, 64);
        let stats = map("t_stats", sys::MAP_HASH, 8, STATS_VAL_SIZE, 64);
        let hist = map("t_hist", sys::MAP_HASH, progs::HIST_KEY_SIZE, 8, 256);
        let sh = Shared {
            stats_fd: stats.fd(),
            sys_stats_fd: -1,
            hist_fd: hist.fd(),
            thresh_fd: -1,
            on_fd: -1,
            resolution: 1,
            by_cgroup: None,
        };
        let load = |name, insns: Vec<_>| {
            Prog::load(name, sys::PROG_RAW_TRACEPOINT, &insns)
                .unwrap_or_else(|e| panic!("{name}: {} {}", e.errno, e.log))
        };
        Block {
            issue: load(
                "t_issue",
                blockrq::issue(&l, &sh, start.fd(), undelivered.fd()),
            ),
            requeue: load("t_requeue", blockrq::requeue(start.fd())),
            complete: load("t_complete", blockrq::complete(&l, &sh, start.fd(), None)),
            undelivered,
            stats,
            _maps: vec![start, hist],
        }
    }

    fn run(&self, p: &Prog, rq: u64) {
        p.test_run_args(&[rq, 0, 4096]).expect("BPF_PROG_TEST_RUN");
    }

    /// Undelivered completions, of every op key.
    fn undelivered(&self) -> u64 {
        self.undelivered
            .entries()
            .unwrap()
            .iter()
            .flat_map(|(_, vals)| vals.iter())
            .map(|v| u64::from_ne_bytes(v[..8].try_into().unwrap()))
            .sum()
    }

    /// Completions filed in the `block` layer's counters (`block-size`
    /// files each of them too, under keys of its own).
    fn completed(&self) -> u64 {
        let block = progs::BLOCK_BASE..progs::BLOCK_SIZE_BASE;
        self.stats
            .entries()
            .unwrap()
            .iter()
            .filter(|(k, _)| block.contains(&u32::from_ne_bytes(k[..4].try_into().unwrap())))
            .flat_map(|(_, vals)| vals.iter())
            .filter_map(|v| progs::StatsValue::from_bytes(v))
            .map(|v| v.count)
            .sum()
    }
}

#[test]
#[ignore = "needs root"]
fn a_request_issued_again_without_its_completion_counts_as_undelivered() {
    fsprof_testkit::need_root("eBPF");
    let b = Block::load();
    // Addresses in user space: probe reads of them fail and read zeros.
    let (r1, r2, r3) = (0x1000u64, 0x2000u64, 0x3000u64);

    b.run(&b.issue, r1);
    b.run(&b.complete, r1);
    b.run(&b.issue, r1);
    assert_eq!(
        (b.undelivered(), b.completed()),
        (0, 1),
        "issue, complete, issue"
    );

    b.run(&b.issue, r2);
    b.run(&b.requeue, r2);
    b.run(&b.issue, r2);
    assert_eq!(b.undelivered(), 0, "a requeued request is issued again");

    b.run(&b.issue, r3);
    b.run(&b.issue, r3);
    assert_eq!(
        (b.undelivered(), b.completed()),
        (1, 1),
        "issued twice, no completion between"
    );
    // Filed under the op key the first issue stored: device 0 and
    // operation 0 (read), what probe reads of a non-kernel address give.
    let keys: Vec<u64> = b
        .undelivered
        .keys()
        .unwrap()
        .iter()
        .map(|k| u64::from_ne_bytes(k[..8].try_into().unwrap()))
        .collect();
    assert_eq!(keys, [u64::from(progs::BLOCK_BASE)]);
}
