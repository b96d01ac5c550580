//! The one rule for tests that need more than cargo: root (eBPF programs,
//! mounts) or a program from outside the Rust toolchain (strace, bindfs,
//! mkfs.ext4, Chromium, Prometheus, the Python parsers of the exports).
//!
//! 1. Such a test carries `#[ignore = "needs root"]` (or `"needs strace"`,
//!    `"needs root, bindfs"`, ...). `cargo test --workspace` and
//!    `cargo nextest run --workspace` then report it as ignored/skipped in
//!    their summary, with the reason, instead of passing it unseen.
//! 2. `./scripts/test-all` (the README's test command, which `.ci/run`
//!    runs) installs everything and passes `--run-ignored all`, so these
//!    tests run there; `cargo nextest list --run-ignored only` lists them.
//! 3. Once a test runs it never skips: the functions here panic, naming
//!    what is missing and what to install.
//! 4. Under `CI=true` a run that leaves these tests out fails
//!    (`fsprof-testkit`'s `ci_runs_the_tests_that_need_more_than_cargo`).
//! 5. What nothing can install — a property of the machine ([`Machine`]:
//!    an invariant TSC, kernel BTF, a kernel that allows fentry) — is
//!    needed the same way ([`need_machine`]), and such a test also sits in
//!    a module named for it (`needs_fentry::times_vfs_read_of_cat`).
//!    Where the machine lacks the property the test cannot apply:
//!    `./scripts/test-all` asks the machine first and leaves those modules
//!    out (`-- --skip needs_fentry::`), so nextest lists each such test as
//!    SKIP by name in its summary; it never passes unseen, and run anyway
//!    it fails here.

use std::path::{Path, PathBuf};

/// What a developer is told to do when something is missing.
const SETUP: &str =
    "`./scripts/test-all` (as root) installs everything the tests need; see docs/testing.md";

/// `CI=true` (or `1`), as CI systems set it.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Fails the test with what is missing and how to get it.
pub fn missing(what: &str, fix: &str) -> ! {
    panic!("this test needs {what}, which is missing: {fix}. {SETUP}")
}

/// A property of the machine that no package provides. The test that
/// needs one is in a module named [`Machine::module`]; `scripts/test-all`
/// probes the same properties (a suite rule holds the two lists equal).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Machine {
    /// A TSC that ticks at a constant rate and through sleep states
    /// (`constant_tsc` and `nonstop_tsc`): fsprof's cycle-counter clock.
    InvariantTsc,
    /// The kernel's own type information (`/sys/kernel/btf/vmlinux`,
    /// CONFIG_DEBUG_INFO_BTF): fentry targets and the block layer's
    /// per-request layout.
    KernelBtf,
    /// A kernel that loads and attaches fentry/fexit programs (lockdown
    /// and some VMs refuse them with EPERM).
    Fentry,
}

impl Machine {
    pub const ALL: [Machine; 3] = [Machine::InvariantTsc, Machine::KernelBtf, Machine::Fentry];

    /// The module the tests that need it sit in.
    pub fn module(self) -> &'static str {
        match self {
            Machine::InvariantTsc => "needs_invariant_tsc",
            Machine::KernelBtf => "needs_kernel_btf",
            Machine::Fentry => "needs_fentry",
        }
    }

    fn what(self) -> &'static str {
        match self {
            Machine::InvariantTsc => {
                "an invariant TSC (constant_tsc and nonstop_tsc in /proc/cpuinfo)"
            }
            Machine::KernelBtf => "kernel BTF (/sys/kernel/btf/vmlinux, CONFIG_DEBUG_INFO_BTF)",
            Machine::Fentry => "a kernel that allows fentry/fexit programs",
        }
    }
}

/// Fails the test unless the machine has `property` (`has`, as the test
/// found it with the code under test). `why` says what the machine did
/// instead, when known.
#[track_caller]
pub fn need_machine(property: Machine, has: bool, why: &str) {
    if !has {
        panic!(
            "this test needs {}, which this machine lacks{}{why}; no package provides it: on such a \
             machine `./scripts/test-all` leaves the `{}::` tests out and lists them as skipped",
            property.what(),
            if why.is_empty() { "" } else { ": " },
            property.module()
        );
    }
}

/// Root, for what the test does as root (`why`: "eBPF", "a loop mount").
pub fn need_root(why: &str) {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        missing(
            &format!("root ({why})"),
            "run it as root (sudo -E ..., or ./scripts/test-all as root)",
        );
    }
}

/// A program on PATH, from the Debian package `package`.
pub fn need_program(program: &str, package: &str) -> PathBuf {
    which(program).unwrap_or_else(|| {
        missing(
            &format!("`{program}` on PATH"),
            &format!("apt-get install {package}"),
        )
    })
}

/// A file installed by the Debian package `package`.
pub fn need_file(path: &Path, package: &str) -> PathBuf {
    if !path.exists() {
        missing(
            &path.display().to_string(),
            &format!("apt-get install {package}"),
        );
    }
    path.to_path_buf()
}

/// The first `program` on PATH.
pub fn which(program: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// A Python that has the parsers the exports are checked with
/// (`prometheus_client`, `opentelemetry-proto`): `$FSPROF_PYTHON`, else the
/// venv `./scripts/test-all` makes in `<target>/pyenv`.
pub fn need_python_parsers() -> PathBuf {
    let python = std::env::var_os("FSPROF_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::target_dir().join("pyenv/bin/python3"));
    let ok = std::process::Command::new(&python)
        .args([
            "-c",
            "import prometheus_client, opentelemetry.proto, google.protobuf",
        ])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        missing(
            &format!(
                "{} with prometheus-client and opentelemetry-proto",
                python.display()
            ),
            &format!(
                "python3 -m venv {0} && {0}/bin/pip install prometheus-client opentelemetry-proto",
                crate::target_dir().join("pyenv").display()
            ),
        );
    }
    python
}

/// The `node_modules` holding playwright-core for the browser checks:
/// `$FSPROF_NODE_MODULES`, else `<target>/browser-env/node_modules`, where
/// `./scripts/test-all` installs `tests/browser`'s locked packages (out of
/// the source tree, and never at test time).
pub fn need_playwright() -> PathBuf {
    let modules = std::env::var_os("FSPROF_NODE_MODULES")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::target_dir().join("browser-env/node_modules"));
    if !modules.join("playwright-core/package.json").is_file() {
        let env = crate::target_dir().join("browser-env");
        missing(
            &format!("playwright-core in {}", modules.display()),
            &format!(
                "mkdir -p {0} && cp tests/browser/package*.json {0} && (cd {0} && npm ci)",
                env.display()
            ),
        );
    }
    modules
}
