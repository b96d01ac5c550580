//! `fsprof agent` (crates/fsprof-agent): the always-on, system-wide agent
//! as a service, against real consumers, and under cgroup churn. Each test
//! runs a system-wide agent, so they run one at a time (the nextest test
//! group `agent-system-wide`).

mod kit;
#[path = "../kernel/loopfs.rs"]
mod loopfs;

mod churn;
mod lifecycle;
mod prometheus;
