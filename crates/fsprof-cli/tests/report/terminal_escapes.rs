//! A shared profile's metadata and names must not drive the reader's
//! terminal: every text renderer shows control characters as escapes.

use std::path::Path;

use fsprof_core::profile::Unprofiled;
use fsprof_testkit::{fsprof, op, profile_of, write};

const ESC: &str = "\x1b]0;pwned\x07\x1b[31m\u{9b}2J\u{202e}";

fn hostile_profile(dir: &Path) -> std::path::PathBuf {
    let mut p = profile_of(
        "user",
        vec![
            op("read", &[(10, 5)]),
            op(&format!("re{ESC}ad"), &[(12, 2)]),
        ],
    );
    p.meta.command = vec!["sh".into(), "-c".into(), format!("cat {ESC}\nfake line")];
    p.meta.run.host = format!("host{ESC}");
    p.meta.run.kernel = format!("6.1{ESC}");
    p.meta.notes.push(format!("note {ESC}"));
    p.meta.settings.insert(format!("k{ESC}"), format!("v{ESC}"));
    p.meta.unprofiled.push(Unprofiled {
        pid: 7,
        ppid: 1,
        exe: format!("/bin/x{ESC}"),
        reason: format!("why {ESC}"),
    });
    p.processes.push(fsprof_core::Process {
        pid: 7,
        argv: vec![format!("prog{ESC}")],
        layers: p.layers.clone(),
        ..Default::default()
    });
    write(dir, "hostile.json", &p)
}

fn assert_clean(what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let bad: Vec<char> = text
        .chars()
        .filter(|&c| (c.is_control() && c != '\n') || ('\u{202a}'..='\u{202e}').contains(&c))
        .collect();
    assert!(bad.is_empty(), "{what} let {bad:?} through:\n{text}");
}

#[test]
fn text_renderers_escape_control_characters() {
    let dir = tempfile::tempdir().unwrap();
    let p = hostile_profile(dir.path());
    let runs: Vec<Vec<&str>> = vec![
        vec!["report", "P"],
        vec!["report", "P", "--processes", "--peaks", "--interesting"],
        vec!["report", "P", "--format", "csv"],
        vec!["compare", "P", "P"],
        vec!["compare", "P", "P", "--format", "csv"],
        vec!["check", "P"],
    ];
    for args in runs {
        let args: Vec<&std::ffi::OsStr> = args
            .iter()
            .map(|a| match *a {
                "P" => p.as_os_str(),
                a => std::ffi::OsStr::new(a),
            })
            .collect();
        let o = fsprof().args(&args).output().unwrap();
        assert!(o.status.code().is_some_and(|c| c <= 1), "{args:?}: {o:?}");
        assert_clean(&format!("{args:?} stdout"), &o.stdout);
        assert_clean(&format!("{args:?} stderr"), &o.stderr);
    }
    // The escapes show what was there.
    let o = fsprof().arg("report").arg(&p).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("host\\x1b]0;pwned\\x07"), "{text}");
    assert!(
        !text.contains("\nfake line"),
        "a line break in argv forged a line:\n{text}"
    );
}
