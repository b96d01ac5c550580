//! `fsprof agent`: always-on, system-wide capture of the kernel's
//! file-system layers, filed by cgroup.

pub mod collector;
pub mod config;
pub mod fold;
pub mod labels;
pub mod registry;
