//! The self-overhead figure is an upper bound only because a sampled
//! call's two extra clock reads wait for earlier work (shim/own.c,
//! `ordered_ticks`); the reads every call makes must not (they are the hot
//! path). Both are properties of the compiled shim, checked in its
//! disassembly: a timing test could not tell an ordered read from one that
//! happened to land late on this machine.
#![cfg(target_arch = "x86_64")]

use std::collections::BTreeMap;
use std::process::Command;

/// Each function's instructions (mnemonic and operands), by name.
fn disassembly() -> BTreeMap<String, Vec<String>> {
    let path = std::env::temp_dir().join(format!("fsprof-own-clock-{}.so", std::process::id()));
    std::fs::write(&path, fsprof_shim::SHIM_SO).unwrap();
    let out = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn"])
        .arg(&path)
        .output()
        .expect("objdump (binutils) is needed to read the compiled shim");
    std::fs::remove_file(&path).unwrap();
    assert!(out.status.success(), "objdump failed: {out:?}");
    let mut funcs = BTreeMap::new();
    let mut current: Option<&mut Vec<String>> = None;
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        // "0000000000006470 <fsprof_own_fire>:" opens a function;
        // "    6470:\tmov    ..." is one of its instructions.
        if let Some(name) = line.strip_suffix(">:").and_then(|l| l.split_once(" <")) {
            current = Some(funcs.entry(name.1.to_string()).or_default());
        } else if let (Some(f), Some((_, insn))) = (current.as_mut(), line.split_once(":\t")) {
            f.push(insn.trim().to_string());
        }
    }
    funcs
}

/// For each rdtsc in `insns`, whether an lfence comes right before it.
fn rdtsc_ordered(insns: &[String]) -> Vec<bool> {
    insns
        .iter()
        .enumerate()
        .filter(|(_, i)| i.starts_with("rdtsc"))
        .map(|(k, _)| k > 0 && insns[k - 1].starts_with("lfence"))
        .collect()
}

#[test]
fn only_a_sampled_calls_extra_clock_reads_wait_for_earlier_work() {
    let funcs = disassembly();
    for f in ["fsprof_own_fire", "fsprof_own_file"] {
        let insns = funcs
            .get(f)
            .unwrap_or_else(|| panic!("{f} not in the shim's symbols"));
        let reads = rdtsc_ordered(insns);
        assert_eq!(
            reads,
            [true],
            "{f}: one clock read, after an lfence: {insns:#?}"
        );
    }
    // The wrappers' own reads (the call's interval, on every call) are
    // plain: ordering them would slow every call down.
    for f in ["pread", "read", "fstat", "openat", "close"] {
        let insns = funcs
            .get(f)
            .unwrap_or_else(|| panic!("the {f} wrapper not in the shim's symbols"));
        let reads = rdtsc_ordered(insns);
        assert!(
            reads.len() >= 2 && reads.iter().all(|o| !o),
            "{f}: its clock reads {reads:?} (true = after an lfence)"
        );
    }
}
