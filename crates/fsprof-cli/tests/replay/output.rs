//! Output that only libc sees as bytes: printf's formatted text, puts,
//! putc and dprintf, and the bytes glibc's putc_unlocked macro stores in a
//! stream's buffer without a call. A trace holds them, a replay writes
//! them, and the traced program's results do not change.

use std::ffi::OsStr;
use std::path::Path;

use fsprof_testkit::{canonical_tempdir, compile_source, fsprof};

use super::command::{ok, trace_in};
use super::descriptors::replayed_cmd;

/// Fortified and optimized, as Debian builds programs: printf is
/// `__printf_chk`, putchar_unlocked an inline store. Writes `out` (its
/// stdout, moved there with dup2), `log` (a stream it opens), `raw` (a
/// descriptor) and `report`: what each call returned, errno after it, and
/// its stream's position, bytes pending and error flag. With `fail`, also
/// output calls that fail (on a stream opened for reading).
const OUTPUT_C: &str = r#"#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <string.h>
#include <unistd.h>
static char rep[8192];
static size_t at;
static void said(const char *what, long r, FILE *f) {
    int e = errno;
    at += snprintf(rep + at, sizeof rep - at, "%s %ld %d %ld %zu %d\n", what, r, e,
                   f ? ftell(f) : -1L, f ? __fpending(f) : (size_t)0, f ? ferror(f) : 0);
}
#define SAY(what, call, f) do { errno = 77; long r_ = (long)(call); said(what, r_, f); } while (0)
static int vout(FILE *f, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = vfprintf(f, fmt, ap);
    va_end(ap);
    return r;
}
static int vdout(int fd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = vdprintf(fd, fmt, ap);
    va_end(ap);
    return r;
}
int main(int argc, char **argv) {
    int o = open("out", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (o < 0 || dup2(o, 1) != 1 || close(o)) return 1;
    SAY("printf", printf("%d apples, %s\n", 3, "pears"), stdout);
    SAY("puts", puts("a line"), stdout);
    SAY("putchar", putchar('x'), stdout);
    putchar_unlocked('y');
    putchar_unlocked('\n');
    SAY("fputc", fputc('z', stdout), stdout);
    SAY("vfprintf", vout(stdout, "%s|%5.2f|%c\n", "pi", 3.14159, 'q'), stdout);
    errno = ENOENT;
    long m = printf("<%m>\n");
    said("%m", m, stdout);
    FILE *f = fopen("log", "w");
    if (!f) return 2;
    SAY("fprintf", fprintf(f, "%08x:%-6s;", 0xbeef, "ab"), f);
    SAY("putc", putc('\n', f), f);
    SAY("fputc_unlocked", fputc_unlocked('!', f), f);
    /* Longer than the stream's buffer: flushed inside the call. */
    SAY("long", fprintf(f, "%6000d|\n", 42), f);
    for (int i = 0; i < 5000; i++) putc_unlocked('a' + i % 26, f);
    SAY("fclose", fclose(f), NULL);
    int d = open("raw", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    SAY("dprintf", dprintf(d, "%s=%d\n", "raw", 7), NULL);
    SAY("vdprintf", vdout(d, "[%*s]\n", 4, "v"), NULL);
    if (close(d)) return 3;
    if (argc > 1 && !strcmp(argv[1], "fail")) {
        FILE *ro = fopen("log", "r");
        if (!ro) return 4;
        SAY("fprintf-ro", fprintf(ro, "no %d", 1), ro);
        SAY("fputc-ro", fputc('n', ro), ro);
        SAY("puts-closed-fd", (close(1), puts("gone")), stdout);
        SAY("fflush-closed-fd", fflush(stdout), stdout);
        SAY("dprintf-bad-fd", dprintf(99, "x"), NULL);
        fclose(ro);
    }
    int rf = open("report", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (rf < 0 || write(rf, rep, at) != (ssize_t)at || close(rf)) return 5;
    /* Left for exit to flush. */
    putchar_unlocked('!');
    return 0;
}
"#;

const FILES: [&str; 4] = ["out", "log", "raw", "report"];

fn output_program(base: &Path) -> std::path::PathBuf {
    compile_source("output", OUTPUT_C, base, &["-O2", "-D_FORTIFY_SOURCE=2"])
}

/// Runs `exe ARGS` in a new directory `dir` without fsprof; its files.
fn plain_run(dir: &Path, exe: &Path, args: &[&str]) -> Vec<Vec<u8>> {
    std::fs::create_dir(dir).unwrap();
    let st = std::process::Command::new(exe)
        .args(args)
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(st.success(), "{st:?}");
    files(dir)
}

fn files(dir: &Path) -> Vec<Vec<u8>> {
    FILES
        .iter()
        .map(|f| std::fs::read(dir.join(f)).unwrap_or_default())
        .collect()
}

fn show(trace: &Path) -> String {
    let o = fsprof()
        .arg("trace")
        .arg("show")
        .arg(trace)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Every output call's bytes, the macro's included (inside the program
/// and at its exit), are in the trace: the replay into an empty root
/// writes `out`, `log` and `raw` byte for byte as the program did, which
/// wrote them as it does without fsprof. `trace show` names the calls.
#[test]
fn printf_puts_putc_and_dprintf_replay_byte_identical() {
    let (_d, base) = canonical_tempdir();
    let exe = output_program(&base);
    let plain = plain_run(&base.join("plain"), &exe, &[]);
    assert!(plain[0].ends_with(b"xy\nzpi| 3.14|q\n<No such file or directory>\n!"));
    let (msgs, replayed) = replayed_cmd(&base, &[exe.as_os_str()], &[], "full");
    let traced = files(&base.join("work"));
    assert_eq!(traced, plain, "the program's output and results, traced");
    let again = files(&replayed);
    for (i, name) in FILES.iter().enumerate() {
        assert_eq!(
            String::from_utf8_lossy(&again[i]),
            String::from_utf8_lossy(&traced[i]),
            "replayed {name}: {msgs}"
        );
    }
    let text = show(&base.join("d.trace"));
    for call in [
        "fprintf(1",
        "puts(",
        "fputc(120, 1",
        "fputc(10, 1",
        "fprintf(",
        "\"%08x:%-6s;\"",
        "dprintf(",
    ] {
        assert!(text.contains(call), "{call} not in:\n{text}");
    }
}

/// The default data mode keeps a digest of what the calls wrote, as it
/// does of fwrite's: the replayed files have the traced sizes.
#[test]
fn output_calls_replay_their_sizes_with_digests() {
    let (_d, base) = canonical_tempdir();
    let exe = output_program(&base);
    let (msgs, replayed) = replayed_cmd(&base, &[exe.as_os_str()], &[], "digest");
    let traced = files(&base.join("work"));
    let again = files(&replayed);
    for (i, name) in FILES.iter().enumerate() {
        assert_eq!(again[i].len(), traced[i].len(), "replayed {name}: {msgs}");
    }
}

/// Results, errno and stream state (position, bytes pending, error flag)
/// of output calls that succeed and that fail are those of the program
/// run without fsprof, in each data mode.
#[test]
fn output_calls_keep_their_results_errno_and_stream_state() {
    let (_d, base) = canonical_tempdir();
    let exe = output_program(&base);
    let plain = plain_run(&base.join("plain"), &exe, &["fail"]);
    let report = String::from_utf8_lossy(&plain[3]).into_owned();
    assert!(report.contains("fprintf-ro -1 9 "), "{report}");
    for data in ["full", "digest", "none"] {
        let dir = base.join(data);
        std::fs::create_dir(&dir).unwrap();
        let cmd: [&OsStr; 2] = [exe.as_os_str(), OsStr::new("fail")];
        trace_in(
            &dir,
            &["--data", data],
            &base.join(format!("{data}.trace")),
            &cmd,
        );
        let traced = files(&dir);
        assert_eq!(String::from_utf8_lossy(&traced[3]), report, "--data {data}");
        assert_eq!(traced, plain, "--data {data}");
    }
    // And under `fsprof run`, which counts them as ops.
    let dir = base.join("run");
    std::fs::create_dir(&dir).unwrap();
    let o = fsprof()
        .args(["run", "-q", "-o"])
        .arg(base.join("p.json"))
        .arg("--")
        .arg(&exe)
        .arg("fail")
        .current_dir(&dir)
        .output()
        .unwrap();
    ok(&o);
    assert_eq!(files(&dir), plain, "fsprof run");
    let p: serde_json::Value =
        serde_json::from_slice(&std::fs::read(base.join("p.json")).unwrap()).unwrap();
    let op = |name: &str| {
        let ops = p["layers"][0]["ops"].as_array().unwrap();
        let o = ops.iter().find(|o| o["name"] == name);
        let o = o.unwrap_or_else(|| panic!("no {name} in {ops:?}"));
        (o["post"].as_u64().unwrap(), o["errors"].as_u64().unwrap())
    };
    // printf, vfprintf, %m, and on `log`: two, and one that failed.
    assert_eq!(op("fprintf"), (6, 1));
    assert_eq!(op("puts"), (2, 0));
    assert_eq!(op("dprintf"), (3, 1));
    // putchar, fputc, putc, the one that failed, and the __overflow of
    // the 5000 putc_unlocked (fputc_unlocked the compiler may inline).
    let (n, errors) = op("fputc");
    assert!(n >= 5 && errors == 1, "{n} {errors}");
}

/// coreutils write with printf and putchar_unlocked (`wc`), and with
/// fputs and fwrite: a shell's redirections of them replay into an empty
/// root as they ran.
#[test]
fn wc_and_printf_output_replays_into_an_empty_root() {
    let (_d, base) = canonical_tempdir();
    let script = "wc -l f > out; wc -c f g >> out; /usr/bin/printf '%s=%d\\n' a 1 > out2; \
                  ls f g > out3";
    let cmd: [&OsStr; 3] = [OsStr::new("sh"), OsStr::new("-c"), OsStr::new(script)];
    let (msgs, replayed) = replayed_cmd(
        &base,
        &cmd,
        &[("f", b"a\nb\nc\n"), ("g", b"one line\n")],
        "full",
    );
    let work = base.join("work");
    for name in ["out", "out2", "out3"] {
        let traced = std::fs::read(work.join(name)).unwrap();
        assert!(!traced.is_empty(), "{name}");
        assert_eq!(
            String::from_utf8_lossy(&std::fs::read(replayed.join(name)).unwrap_or_default()),
            String::from_utf8_lossy(&traced),
            "replayed {name}: {msgs}"
        );
    }
    let text = show(&base.join("d.trace"));
    assert!(text.contains("fprintf(1</"), "{text}");
}
