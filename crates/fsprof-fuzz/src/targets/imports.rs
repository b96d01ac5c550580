//! Logs of other tools: `strace -f -ttt -T -y` output and fio iologs,
//! imported as `fsprof trace import` does (strictly and with
//! `--lenient`), and the trace the import writes read back.

use fsprof_trace::event::Record;
use fsprof_trace::import::{self, fio, strace, Format, ImportError, Sink};
use fsprof_trace::show::text_call;
use fsprof_trace::TraceReader;

use super::{clean_error, file_with};
use crate::engine::Target;

fn strace_seeds() -> Vec<Vec<u8>> {
    vec![b"1 1.5 close(3</a>) = 0 <0.000001>\n".to_vec()]
}

#[rustfmt::skip]
const STRACE_TOKENS: &[&[u8]] = &[b"<unfinished ...>", b"<... read resumed>", b" resumed>", b"+++ exited with 0 +++", b"--- SIGCHLD {si_signo=SIGCHLD} ---", b"[pid ", b" = -1 ENOENT (No such file or directory)", b" = ", b" <0.000001>", b"\"...", b"\"\\x", b"\\", b"AT_FDCWD", b"</", b">", b"CLONE_THREAD", b"execve(", b"clone(", b"openat(", b"write(", b"chdir(", b"newfstatat(", b"st_size=", b"st_mode=", b"O_RDONLY|", b"0x", b"\n"];

pub const STRACE: Target = Target::new("strace", strace_seeds, STRACE_TOKENS, check_strace, 600);

fn fio_seeds() -> Vec<Vec<u8>> {
    vec![b"fio version 2 iolog\nf add\nf open\nf close\n".to_vec()]
}

#[rustfmt::skip]
const FIO_TOKENS: &[&[u8]] = &[b"fio version 2 iolog\n", b"fio version 3 iolog\n", b" add", b" open", b" close", b" read ", b" write ", b" trim ", b" sync", b" datasync", b" wait ", b"\n"];

pub const FIO: Target = Target::new("fio", fio_seeds, FIO_TOKENS, check_fio, 800);

/// Parsed records, printed as `trace show` would.
#[derive(Default)]
struct Printed {
    records: usize,
}

impl Sink for Printed {
    fn record(&mut self, r: Record) -> Result<(), ImportError> {
        if let Record::Call(c) = &r {
            let _ = text_call(c, 0);
        }
        self.records += 1;
        Ok(())
    }

    fn skipped(&mut self, why: &str) {
        clean_error(&why);
    }
}

pub fn check_strace(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    for (lenient, pid) in [(false, None), (true, None), (true, Some(7))] {
        let mut sink = Printed::default();
        let opts = strace::Options {
            lenient,
            cwd: Some(b"/w".to_vec()),
        };
        if let Err(e) = strace::Parser::new(opts).parse(&text, pid, lenient, &mut sink) {
            clean_error(&e);
        }
    }
    import_and_read(Format::Strace, bytes);
}

pub fn check_fio(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    for lenient in [false, true] {
        if let Err(e) = fio::import(&text, lenient, &mut Printed::default()) {
            clean_error(&e);
        }
    }
    import_and_read(Format::FioIolog, bytes);
}

/// `fsprof trace import`, leniently, then the trace it wrote read through.
fn import_and_read(format: Format, bytes: &[u8]) {
    let log = file_with(bytes);
    let out = log.with_extension("trace");
    let opts = strace::Options {
        lenient: true,
        cwd: None,
    };
    match import::import(format, &log, &out, &opts, true) {
        Ok(_) => {
            let reader = TraceReader::open(&out)
                .unwrap_or_else(|e| panic!("an import wrote a trace it cannot open: {e}"));
            for r in reader {
                if let Err(e) = r {
                    panic!("an import wrote a trace it cannot read: {e}");
                }
            }
        }
        Err(e) => clean_error(&e),
    }
}
