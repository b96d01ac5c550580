//! The shim's C core calls in one direction. Which object file defines
//! each global symbol and which uses it (`nm` on the objects build.rs
//! compiled) makes a graph of the C files, and the `#include "..."` lines
//! make another of the sources: neither may have a cycle. A file that
//! calls back up (the counter pool calling the process set-up, the
//! set-up helpers calling the trace) fails here, and the cycle is named.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

const OBJ: &str = concat!(env!("OUT_DIR"), "/obj");
const SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/shim");

type Graph = BTreeMap<String, BTreeSet<String>>;

/// A cycle of `g`, if it has one, as the files along it.
fn cycle(g: &Graph) -> Option<Vec<String>> {
    fn visit(
        g: &Graph,
        n: &str,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(n) {
            Some(2) => return None,
            Some(1) => {
                let at = path.iter().position(|p| p == n).unwrap();
                let mut c = path[at..].to_vec();
                c.push(n.to_string());
                return Some(c);
            }
            _ => {}
        }
        state.insert(n.to_string(), 1);
        path.push(n.to_string());
        for m in g.get(n).into_iter().flatten() {
            if let Some(c) = visit(g, m, state, path) {
                return Some(c);
            }
        }
        path.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    g.keys()
        .find_map(|n| visit(g, n, &mut state, &mut Vec::new()))
}

/// Every object's global symbols: which file defines each, and which
/// symbols each file uses (`nm` on the objects build.rs compiled).
fn symbols() -> (BTreeMap<String, String>, Vec<(String, String)>) {
    let mut defined: BTreeMap<String, String> = BTreeMap::new();
    let mut used: Vec<(String, String)> = Vec::new();
    let mut objects: Vec<_> = std::fs::read_dir(OBJ)
        .unwrap_or_else(|e| panic!("{OBJ}: {e}"))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "o"))
        .collect();
    objects.sort();
    assert!(objects.len() >= 8, "objects in {OBJ}: {objects:?}");
    for o in &objects {
        let file = format!("{}.c", o.file_stem().unwrap().to_string_lossy());
        let out = Command::new("nm")
            .arg("-P")
            .arg(o)
            .output()
            .expect("run nm (binutils, which the C toolchain brings)");
        assert!(out.status.success(), "nm {}", o.display());
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let mut w = line.split_whitespace();
            let (Some(sym), Some(kind)) = (w.next(), w.next()) else {
                continue;
            };
            match kind {
                "U" => used.push((file.clone(), sym.to_string())),
                k if k.chars().all(|c| c.is_ascii_uppercase()) => {
                    defined.insert(sym.to_string(), file.clone());
                }
                _ => {}
            }
        }
    }
    (defined, used)
}

/// File → the files whose global symbols it uses.
fn symbol_graph() -> Graph {
    let (defined, used) = symbols();
    let objects: BTreeSet<&String> = defined
        .values()
        .chain(used.iter().map(|(f, _)| f))
        .collect();
    let mut g: Graph = objects
        .into_iter()
        .map(|f| (f.clone(), BTreeSet::new()))
        .collect();
    for (file, sym) in used {
        if let Some(def) = defined.get(&sym).filter(|d| **d != file) {
            g.get_mut(&file).unwrap().insert(def.clone());
        }
    }
    g
}

/// Source file → the shim files it includes.
fn include_graph() -> Graph {
    let mut g = Graph::new();
    for e in std::fs::read_dir(SRC).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&p).unwrap();
        let includes = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("#include \"")?.strip_suffix('"'))
            .filter(|inc| Path::new(SRC).join(inc).exists())
            .map(String::from)
            .collect();
        g.insert(name, includes);
    }
    g
}

fn layers(g: &Graph) -> String {
    g.iter()
        .map(|(f, to)| {
            format!(
                "  {f} -> {}",
                to.iter().cloned().collect::<Vec<_>>().join(", ")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Panics, naming the cycle and every edge, if `g` has a cycle.
fn assert_acyclic(g: &Graph, what: &str) {
    if let Some(c) = cycle(g) {
        panic!(
            "{what} in a circle: {}\nedges:\n{}",
            c.join(" -> "),
            layers(g)
        );
    }
}

#[test]
fn the_c_files_call_each_other_in_one_direction() {
    let g = symbol_graph();
    assert_acyclic(&g, "the shim's C files call each other");
    // The process set-up is the top of the core: only the entry points
    // reach it (the wrappers' hot path on a thread's first call, the
    // wrapper files' hooks for a process's first fork, and the self-test
    // `fsprof run` calls), and the set-up helpers reach nothing.
    for (file, to) in &g {
        if to.contains("process.c") {
            assert!(
                ["wrappers.c", "selftest.c", "exec.c"].contains(&file.as_str()),
                "{file} calls up into the process set-up"
            );
        }
        for entry in ["wrappers.c", "selftest.c", "exec.c"] {
            assert!(
                !to.contains(entry),
                "{file} calls the entry points of {entry}"
            );
        }
    }
    assert!(g["util.c"].is_empty(), "util.c uses {:?}", g["util.c"]);
}

/// What the process set-up's files may call in libc. Each libc function is
/// a symbol the loader binds, in every new image, at its first call (~1
/// us: the lookup, its page of the symbol tables, an IFUNC's resolver); a
/// copy, a string's length or the environment are read by hand instead
/// (util.c's fsprof_copy, nextsym.c's fsprof_env). getenv, strlen, memcpy
/// and pthread_self here cost a `cat` 3 us (fifteenth session).
const SETUP_LIBC: &[&str] = &[
    "__errno_location",
    "__register_atfork",
    "pthread_atfork",
    "getauxval",
    "syscall",
    "clock_gettime",
    "environ",
    "_r_debug",
    "_DYNAMIC",
    "__dso_handle",
    "_GLOBAL_OFFSET_TABLE_",
    // nextsym.c's fallbacks, where its own lookup is unsure
    "dlsym",
    "dlvsym",
    "abort",
];

#[test]
fn the_process_set_up_binds_few_libc_functions() {
    let (defined, used) = symbols();
    let setup = ["process.c", "run.c", "pool.c", "util.c", "nextsym.c"];
    let extra: Vec<String> = used
        .iter()
        .filter(|(f, sym)| {
            setup.contains(&f.as_str())
                && !defined.contains_key(sym)
                && !SETUP_LIBC.contains(&sym.as_str())
        })
        .map(|(f, sym)| format!("{f}: {sym}"))
        .collect();
    assert!(extra.is_empty(), "the set-up calls into libc: {extra:?}");
}

#[test]
fn the_c_includes_have_no_cycle() {
    assert_acyclic(&include_graph(), "the shim's files include each other");
}

#[test]
fn a_cycle_is_found() {
    let g: Graph = [("a", "b"), ("b", "c"), ("c", "a"), ("d", "a")]
        .iter()
        .map(|(f, t)| (f.to_string(), BTreeSet::from([t.to_string()])))
        .collect();
    assert_eq!(cycle(&g).unwrap(), ["a", "b", "c", "a"]);
    let tree: Graph = [("a", "b"), ("c", "b")]
        .iter()
        .map(|(f, t)| (f.to_string(), BTreeSet::from([t.to_string()])))
        .collect();
    assert_eq!(cycle(&tree), None);
}
