//! Tracepoint ids and field layouts, read from tracefs at run time so no
//! kernel headers are needed and the programs follow whatever layout the
//! running kernel has.

use std::fs;
use std::path::{Path, PathBuf};

use crate::Error;

/// Where tracefs is (mounted by us if it was not).
pub fn root() -> Result<PathBuf, Error> {
    let candidates = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];
    for c in candidates {
        if Path::new(c).join("events").is_dir() {
            return Ok(PathBuf::from(c));
        }
    }
    // Many systems leave tracefs unmounted until someone needs it; mounting
    // it changes nothing else and is what perf and bpftrace do too.
    let target = c"/sys/kernel/tracing";
    // SAFETY: constant NUL-terminated strings; a failed mount changes nothing.
    let r = unsafe {
        libc::mount(
            c"tracefs".as_ptr(),
            target.as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if r == 0 && Path::new("/sys/kernel/tracing/events").is_dir() {
        return Ok(PathBuf::from("/sys/kernel/tracing"));
    }
    Err(Error::NoTracefs(
        std::io::Error::last_os_error().to_string(),
    ))
}

/// One field of a tracepoint record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
}

/// A tracepoint: its perf id and record layout.
#[derive(Clone, Debug)]
pub struct Tracepoint {
    pub category: String,
    pub name: String,
    pub id: u64,
    pub fields: Vec<Field>,
}

impl Tracepoint {
    pub fn load(root: &Path, category: &str, name: &str) -> Result<Tracepoint, Error> {
        let path = root.join("events").join(category).join(name).join("format");
        let text = fs::read_to_string(&path).map_err(|e| Error::NoTracepoint {
            name: format!("{category}:{name}"),
            why: if e.kind() == std::io::ErrorKind::NotFound {
                "this kernel does not have it".into()
            } else {
                format!("reading {}: {e}", path.display())
            },
        })?;
        parse_format(category, name, &text).ok_or_else(|| Error::NoTracepoint {
            name: format!("{category}:{name}"),
            why: format!("cannot parse {}", path.display()),
        })
    }

    pub fn field(&self, name: &str) -> Result<&Field, Error> {
        self.fields
            .iter()
            .find(|f| f.name == name)
            .ok_or_else(|| Error::NoTracepoint {
                name: format!("{}:{}", self.category, self.name),
                why: format!("it has no field `{name}` on this kernel"),
            })
    }
}

pub fn exists(root: &Path, category: &str, name: &str) -> bool {
    root.join("events")
        .join(category)
        .join(name)
        .join("format")
        .is_file()
}

/// Parses a tracefs `format` file.
pub fn parse_format(category: &str, name: &str, text: &str) -> Option<Tracepoint> {
    let mut id = None;
    let mut fields = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(v) = line.strip_prefix("ID:") {
            id = v.trim().parse().ok();
        } else if let Some(rest) = line.strip_prefix("field:") {
            let mut decl = "";
            let (mut offset, mut size, mut signed) = (None, None, false);
            for part in rest.split(';') {
                let part = part.trim();
                if let Some(v) = part.strip_prefix("offset:") {
                    offset = v.parse().ok();
                } else if let Some(v) = part.strip_prefix("size:") {
                    size = v.parse().ok();
                } else if let Some(v) = part.strip_prefix("signed:") {
                    signed = v == "1";
                } else if decl.is_empty() {
                    decl = part;
                }
            }
            // "unsigned long args[6]" -> "args"
            let last = decl.split_whitespace().last()?;
            let fname = last.split('[').next()?.to_string();
            fields.push(Field {
                name: fname,
                offset: offset?,
                size: size?,
                signed,
            });
        }
    }
    Some(Tracepoint {
        category: category.into(),
        name: name.into(),
        id: id?,
        fields,
    })
}

/// `X` for every `X_enter`/`X_exit` pair in a tracepoint category.
pub fn enter_exit_pairs(root: &Path, category: &str) -> Vec<String> {
    let Ok(rd) = fs::read_dir(root.join("events").join(category)) else {
        return Vec::new();
    };
    let names: std::collections::BTreeSet<String> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names
        .iter()
        .filter_map(|n| n.strip_suffix("_enter"))
        .filter(|base| names.contains(&format!("{base}_exit")))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SYS_EXIT: &str = "name: sys_exit
ID: 442
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:long id;\toffset:8;\tsize:8;\tsigned:1;
\tfield:unsigned long args[6];\toffset:16;\tsize:48;\tsigned:0;
\tfield:__data_loc char[] cmd;\toffset:64;\tsize:4;\tsigned:0;

print fmt: \"NR %ld = %ld\", REC->id, REC->ret
";

    #[test]
    fn parses_ids_offsets_and_array_names() {
        let tp = parse_format("raw_syscalls", "sys_exit", SYS_EXIT).unwrap();
        assert_eq!(tp.id, 442);
        let id = tp.field("id").unwrap();
        assert_eq!((id.offset, id.size, id.signed), (8, 8, true));
        assert_eq!(tp.field("args").unwrap().size, 48);
        assert_eq!(tp.field("cmd").unwrap().offset, 64);
        assert!(tp.field("ret").is_err());
    }

    #[test]
    fn a_format_without_id_is_rejected() {
        assert!(parse_format("a", "b", "name: x\nformat:\n").is_none());
    }
}
