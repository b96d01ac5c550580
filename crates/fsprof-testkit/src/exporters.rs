//! The exports' real consumers: the Python checkers in `tests/exporters/`
//! (Prometheus' client parser, the OpenTelemetry protobuf messages).

use std::path::Path;
use std::process::Command;

/// Runs `tests/exporters/<script>` with `py` (from
/// [`crate::need_python_parsers`]) and asserts it accepted the output;
/// returns what it printed.
pub fn py_check(py: &Path, script: &str, args: &[&Path], extra: &[&str]) -> String {
    let o = Command::new(py)
        .arg(crate::workspace().join("tests/exporters").join(script))
        .args(args)
        .args(extra)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", py.display()));
    let out = crate::stdout(&o);
    assert!(
        o.status.success(),
        "{script} rejected the output:\n{out}{}",
        crate::stderr(&o)
    );
    out
}
