//! Reading a by-cgroup session ([`crate::bycgroup`]): the counters of each
//! (cgroup, op), the cgroups created and removed since the last read, and
//! forgetting the counters of cgroups that are gone, so that the maps hold
//! only what is live (a long-running agent under cgroup churn).

use std::collections::{BTreeMap, HashSet};

use crate::attach::map;
use crate::bycgroup::{NEW_VAL_SIZE, PATH_BYTES};
use crate::progs::{self, StatsValue};
use crate::session::{read_map, word, Session};
use crate::sys::{self, Map};
use crate::Error;

/// New cgroups (mkdir) and removals (rmdir) waiting to be read: a
/// cgroup-creating storm beyond this between two reads is named from
/// /sys/fs/cgroup instead (or folded into `other` if already gone).
const EVENT_ENTRIES: u32 = 8192;
/// Requests in flight whose submitter's cgroup is kept.
const RQ_ENTRIES: u32 = 16384;

/// The maps only a by-cgroup session has.
pub struct CgroupMaps {
    /// Request pointer → cgroup id (LRU: a request whose completion is
    /// never seen ages out).
    pub(crate) rq: Map,
    /// Cgroup id → {path length, path} of cgroups created.
    pub(crate) new: Map,
    /// Cgroup id → ktime of its removal.
    pub(crate) gone: Map,
    /// One per-CPU value where `cgroup_mkdir` builds its entry.
    pub(crate) scratch: Map,
}

impl CgroupMaps {
    pub(crate) fn create() -> Result<CgroupMaps, Error> {
        let lazy = sys::BPF_F_NO_PREALLOC;
        Ok(CgroupMaps {
            rq: map("fsprof_rqcg", sys::MAP_LRU_HASH, 8, 8, RQ_ENTRIES, 0)?,
            new: map(
                "fsprof_cgnew",
                sys::MAP_HASH,
                8,
                NEW_VAL_SIZE,
                EVENT_ENTRIES,
                lazy,
            )?,
            gone: map("fsprof_cggone", sys::MAP_HASH, 8, 8, EVENT_ENTRIES, lazy)?,
            scratch: map("fsprof_cgtmp", sys::MAP_PERCPU_ARRAY, 4, NEW_VAL_SIZE, 1, 0)?,
        })
    }
}

/// One (cgroup, op)'s counters as the kernel holds them: totals since the
/// session started (or since the key was last forgotten).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CgOp {
    /// The cgroup v2 id (its directory's inode number); 0 for requests
    /// whose submitter is unknown.
    pub cgroup: u64,
    /// The op key ([`Session::op_name`] names it).
    pub key: u64,
    pub stats: StatsValue,
    /// 0 ns observations.
    pub zero: u64,
    /// (slot, count) of each non-empty bucket, by slot: slot `j` is
    /// bucket `j - 1` (`Histogram::from_slots`).
    pub slots: Vec<(u32, u64)>,
}

/// One read of a by-cgroup session.
#[derive(Clone, Debug, Default)]
pub struct CgRead {
    pub ops: Vec<CgOp>,
    /// Entries in the counter maps, and how many they hold at most: when
    /// they are full, new (cgroup, op, bucket) cells are not counted.
    pub entries: usize,
    pub capacity: usize,
}

/// What happened to cgroups since the last [`Session::drain_cgroup_events`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CgroupEvents {
    /// (id, path below the v2 root, e.g. `/system.slice/x.service`).
    pub created: Vec<(u64, String)>,
    /// (id, CLOCK_MONOTONIC ns of the removal).
    pub removed: Vec<(u64, u64)>,
}

impl Session {
    fn cgroup_maps(&self) -> Result<&CgroupMaps, Error> {
        self.cgroups.as_ref().ok_or_else(|| Error::Read {
            name: "cgroup maps".into(),
            err: std::io::Error::other("the session was not started by cgroup"),
        })
    }

    /// Every (cgroup, op)'s counters, summed over CPUs, by (cgroup, op).
    pub fn read_by_cgroup(&self) -> Result<CgRead, Error> {
        self.cgroup_maps()?;
        let mut ops: BTreeMap<(u64, u64), CgOp> = BTreeMap::new();
        let mut fill = (0, 0);
        let mut read = |name: &str, m: &Map| -> Result<Vec<sys::Entry>, Error> {
            let e = read_batch(name, m)?;
            fill = (fill.0 + e.len(), fill.1 + m.max_entries as usize);
            Ok(e)
        };
        for (name, m) in [
            ("fsprof_stats", &self.stats),
            ("fsprof_bstats", &self.blk_stats),
        ] {
            for (k, vals) in read(name, m)? {
                let (cgroup, key) = (word(&k, 0), word(&k, 1));
                let e = ops.entry((cgroup, key)).or_default();
                for v in vals.iter().filter_map(|v| StatsValue::from_bytes(v)) {
                    e.stats.count += v.count;
                    e.stats.total += v.total;
                    e.stats.errors += v.errors;
                    e.stats.max = e.stats.max.max(v.max);
                    e.stats.not_min = e.stats.not_min.max(v.not_min);
                }
            }
        }
        for (name, m) in [
            ("fsprof_hist", &self.hist),
            ("fsprof_bhist", &self.blk_hist),
        ] {
            for (k, vals) in read(name, m)? {
                let (cgroup, key, slot) = (word(&k, 0), word(&k, 1), word(&k, 2) as u32);
                let n: u64 = vals.iter().map(|v| word(v, 0)).sum();
                let e = ops.entry((cgroup, key)).or_default();
                if slot == progs::ZERO_SLOT {
                    e.zero += n;
                } else {
                    e.slots.push((slot, n));
                }
            }
        }
        let ops = ops
            .into_iter()
            .map(|((cgroup, key), mut op)| {
                op.cgroup = cgroup;
                op.key = key;
                op.slots.sort_unstable();
                op
            })
            .collect();
        Ok(CgRead {
            ops,
            entries: fill.0,
            capacity: fill.1,
        })
    }

    /// The cgroups created and removed since the last call; each is
    /// reported once.
    pub fn drain_cgroup_events(&self) -> Result<CgroupEvents, Error> {
        let c = self.cgroup_maps()?;
        let mut ev = CgroupEvents::default();
        for (k, vals) in read_map("fsprof_cgnew", &c.new)? {
            delete(&c.new, "fsprof_cgnew", &k)?;
            let v = &vals[0];
            let len = word(v, 0) as i64;
            // probe_read_kernel_str counts the NUL; an error is negative.
            if len <= 1 {
                continue;
            }
            let path = &v[8..8 + (len as usize - 1).min(PATH_BYTES - 1)];
            ev.created
                .push((word(&k, 0), String::from_utf8_lossy(path).into_owned()));
        }
        for (k, vals) in read_map("fsprof_cggone", &c.gone)? {
            delete(&c.gone, "fsprof_cggone", &k)?;
            ev.removed.push((word(&k, 0), word(&vals[0], 0)));
        }
        Ok(ev)
    }

    /// Deletes every counter of the cgroups in `ids` (read them first):
    /// the maps then hold only cgroups that are live or recently gone.
    /// Returns how many entries went.
    pub fn forget_cgroups(&self, ids: &HashSet<u64>) -> Result<usize, Error> {
        let mut n = 0;
        let maps = [
            ("fsprof_stats", &self.stats),
            ("fsprof_bstats", &self.blk_stats),
            ("fsprof_hist", &self.hist),
            ("fsprof_bhist", &self.blk_hist),
        ];
        for (name, m) in maps {
            let keys = m.keys().map_err(|err| Error::Read {
                name: name.into(),
                err,
            })?;
            for k in keys.iter().filter(|k| ids.contains(&word(k, 0))) {
                delete(m, name, k)?;
                n += 1;
            }
        }
        Ok(n)
    }
}

fn read_batch(name: &str, m: &Map) -> Result<Vec<sys::Entry>, Error> {
    m.entries_batch().map_err(|err| Error::Read {
        name: name.into(),
        err,
    })
}

fn delete(m: &Map, name: &str, key: &[u8]) -> Result<(), Error> {
    match m.delete(key) {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
        Err(err) => Err(Error::Read {
            name: name.into(),
            err,
        }),
    }
}
