//! The fentry/fexit verdict of `--probe-report` is a real attempt: find
//! vfs_read in this kernel's BTF, load an fentry program on it, attach it.
//! On kernels that allow it the attempt must succeed end to end; where the
//! kernel refuses (the development VM returns EPERM on load), the verdict
//! must name the step and the errno — that refusal is what this test pins.

use fsprof_kernel::probe;

/// The parser on the running kernel's BTF: only where the kernel has it.
mod needs_kernel_btf {
    use super::*;

    /// Needs no root: BTF is world-readable.
    #[test]
    #[ignore = "needs kernel BTF"]
    fn btf_parser_finds_vfs_functions_in_the_running_kernel() {
        let btf = std::fs::read("/sys/kernel/btf/vmlinux");
        let why = btf.as_ref().err().map(ToString::to_string);
        fsprof_testkit::need_machine(
            fsprof_testkit::Machine::KernelBtf,
            btf.is_ok(),
            why.as_deref().unwrap_or(""),
        );
        let btf = btf.unwrap();
        for f in ["vfs_read", "vfs_write", "vfs_fsync_range", "iterate_dir"] {
            assert!(
                probe::btf_func_id(&btf, f).is_some(),
                "{f} not found in vmlinux BTF"
            );
        }
        assert_eq!(probe::btf_func_id(&btf, "fsprof_no_such_function"), None);
    }
}

#[test]
#[ignore = "needs root"]
fn fentry_verdict_is_a_real_attempt_with_a_reason() {
    fsprof_testkit::need_root("eBPF");
    match probe::fentry_support() {
        Ok(s) => assert!(s.contains("loads and attaches"), "{s}"),
        Err(why) => {
            eprintln!("NOTE: fentry/fexit is not usable on this kernel, so fsprof's fs layer uses tracepoint pairs: {why}");
            assert!(
                why.contains("no kernel BTF")
                    || (why.contains("refuses to") && why.contains("os error")),
                "the verdict must name the failing step and errno: {why}"
            );
        }
    }
}
