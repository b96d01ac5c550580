//! The shim's own lookup of a wrapper's real function (shim/nextsym.c)
//! returns what dlsym(RTLD_NEXT) returns, or nothing (the shim then asks
//! dlsym). A preloaded library built from nextsym.c compares the two for
//! every symbol the shim exports, at the program's exit, and exits 3 on a
//! difference: alone, with another preload after it that defines some of
//! them, in a program that dlopens libraries defining them, and under an
//! audit module, where it must leave every lookup to dlsym.

use std::path::{Path, PathBuf};
use std::process::Command;

const SHIM_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/shim");
const SHIM_SO: &str = concat!(env!("OUT_DIR"), "/libfsprof_shim.so");

/// The shim's wrappers: its exported functions, less its own entry points.
fn wrapper_names() -> Vec<String> {
    let out = Command::new("nm")
        .args(["-D", "--defined-only", SHIM_SO])
        .output()
        .expect("run nm");
    assert!(out.status.success());
    let names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2).map(str::to_string))
        .filter(|n| !n.starts_with("fsprof_shim_"))
        .collect();
    assert!(names.len() > 100, "{names:?}");
    names
}

/// Compiles C `code` in `dir` into `name` (a shared object when `shared`).
fn cc(dir: &Path, name: &str, code: &str, shared: bool, extra: &[&str]) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, code).unwrap();
    let out = dir.join(name);
    let mut cmd = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()));
    if shared {
        cmd.args(["-shared", "-fPIC"]);
    }
    let st = cmd
        .args(["-O2", "-I", SHIM_DIR, "-o"])
        .arg(&out)
        .arg(&src)
        .args(extra)
        .arg("-ldl")
        .status()
        .unwrap();
    assert!(st.success(), "compiling {name}");
    out
}

/// The checking library: at exit, for every wrapper name, the lookup's
/// answer against dlsym's; prints "found N of M" and exits 3 on a
/// difference.
fn checker(dir: &Path) -> PathBuf {
    let list: String = wrapper_names()
        .iter()
        .map(|n| format!("\"{n}\",\n"))
        .collect();
    let code = format!(
        r#"
#include "nextsym.c"
#include <dlfcn.h>
extern int dprintf(int, const char *, ...);
extern void _exit(int);
static const char *const names[] = {{ {list} }};
__attribute__((destructor)) static void check(void)
{{
    unsigned n = sizeof names / sizeof *names, found = 0, bad = 0;
    for (unsigned i = 0; i < n; i++) {{
        void *want = dlsym(RTLD_NEXT, names[i]);
        void *got = fsprof_next_sym(names[i]);
        if (got == NULL) {{
            dprintf(2, "missing %s\n", names[i]);
            continue;
        }}
        found++;
        if (got != want) {{
            bad++;
            dprintf(2, "%s: lookup %p, dlsym %p\n", names[i], got, want);
        }}
    }}
    dprintf(2, "found %u of %u\n", found, n);
    if (bad)
        _exit(3);
}}
"#
    );
    cc(dir, "check.so", &code, true, &[])
}

/// Runs `prog` with LD_PRELOAD=`preload` (and `env`); returns how many of
/// the names the lookup found, after asserting that it agreed with dlsym
/// and, when it found any, that it found `read` and `posix_spawn` (two
/// versions in glibc, one of them hidden).
fn found(prog: &Path, preload: &str, env: &[(&str, &str)]) -> (u32, u32) {
    let out = Command::new(prog)
        .env("LD_PRELOAD", preload)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{preload}: {err}");
    let line = err
        .lines()
        .find_map(|l| l.strip_prefix("found "))
        .unwrap_or_else(|| panic!("no summary: {err}"));
    let (a, b) = line.split_once(" of ").unwrap();
    let n: u32 = a.parse().unwrap();
    if n > 0 {
        for must in ["read", "posix_spawn"] {
            assert!(
                !err.lines().any(|l| l == format!("missing {must}")),
                "{preload}: {err}"
            );
        }
    }
    (n, b.parse().unwrap())
}

/// A library that interposes `read` and `posix_spawn` itself.
const OTHER: &str = r#"
typedef unsigned long size_t;
long read(int fd, void *buf, size_t n) { (void)fd; (void)buf; (void)n; return -1; }
int posix_spawn(void) { return 95; }
"#;

#[test]
fn lookup_agrees_with_dlsym_alone_and_with_a_later_preload() {
    let dir = tempfile_dir();
    let check = checker(&dir);
    let other = cc(&dir, "other.so", OTHER, true, &[]);
    let t = Path::new("/bin/true");
    let (n, all) = found(t, check.to_str().unwrap(), &[]);
    // Every wrapper of this glibc is a plain function at its default
    // version, found without dlsym; a newer glibc may leave a few to it.
    assert!(n * 10 >= all * 9, "found {n} of {all}");
    let both = format!("{} {}", check.display(), other.display());
    let (m, _) = found(t, &both, &[]);
    assert!(m * 10 >= all * 9, "found {m} of {all} with a later preload");
}

#[test]
fn libraries_dlopened_after_libc_do_not_change_the_answer() {
    let dir = tempfile_dir();
    let check = checker(&dir);
    let other = cc(&dir, "other.so", OTHER, true, &[]);
    let local = cc(&dir, "local.so", OTHER, true, &[]);
    let prog = cc(
        &dir,
        "opener",
        &format!(
            r#"
#include <dlfcn.h>
#include <stdio.h>
int main(void)
{{
    void *g = dlopen("{0}", RTLD_NOW | RTLD_GLOBAL);
    void *l = dlopen("{1}", RTLD_NOW | RTLD_LOCAL);
    if (g == NULL || l == NULL) {{
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }}
    return 0;
}}
"#,
            other.display(),
            local.display()
        ),
        false,
        &[],
    );
    let (n, all) = found(&prog, check.to_str().unwrap(), &[]);
    assert!(n * 10 >= all * 9, "found {n} of {all}");
}

#[test]
fn under_an_audit_module_every_lookup_is_left_to_dlsym() {
    let dir = tempfile_dir();
    let check = checker(&dir);
    let audit = cc(
        &dir,
        "audit.so",
        "unsigned la_version(unsigned v) { return v; }\n",
        true,
        &[],
    );
    let (n, _) = found(
        Path::new("/bin/true"),
        check.to_str().unwrap(),
        &[("LD_AUDIT", audit.to_str().unwrap())],
    );
    assert_eq!(n, 0);
}

fn tempfile_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "fsprof-nextsym-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
