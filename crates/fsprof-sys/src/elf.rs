//! Whether a program file will load the shim: `LD_PRELOAD` is honoured by
//! the dynamic loader only, which runs for an ELF file with an interpreter
//! (`PT_INTERP`), and in secure-execution mode (a set-user-ID or
//! set-group-ID file) it ignores preloads by path. Read by hand: the ELF
//! header and the program headers are a few fixed-size fields, and this
//! runs on the start-up path of every `fsprof trace` (no crate parses
//! less).

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::Path;

const PT_INTERP: u32 = 3;
/// Program headers looked at, at most (a real program has ~15).
const MAX_PHDRS: usize = 64;

/// Whether `path` is a 64-bit little-endian ELF program with an interpreter
/// that is neither set-user-ID nor set-group-ID; false for anything else
/// (a script, a static program, a file that cannot be read).
pub fn loads_preload(path: &Path) -> bool {
    let Ok(mut f) = File::open(path) else {
        return false;
    };
    let setid = f
        .metadata()
        .map_or(true, |m| m.permissions().mode() & 0o6000 != 0);
    let mut h = [0u8; 64];
    if setid || f.read_exact(&mut h).is_err() || !is_elf64_le(&h) {
        return false;
    }
    let phoff = u64::from_le_bytes(h[32..40].try_into().unwrap());
    let phentsize = u16::from_le_bytes([h[54], h[55]]) as usize;
    let phnum = (u16::from_le_bytes([h[56], h[57]]) as usize).min(MAX_PHDRS);
    if phentsize < 4 {
        return false;
    }
    let mut ph = vec![0u8; phentsize * phnum];
    if f.read_exact_at(&mut ph, phoff).is_err() {
        return false;
    }
    ph.chunks_exact(phentsize)
        .any(|p| u32::from_le_bytes(p[..4].try_into().unwrap()) == PT_INTERP)
}

fn is_elf64_le(h: &[u8; 64]) -> bool {
    h[..4] == *b"\x7fELF" && h[4] == 2 && h[5] == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dynamic_program_loads_it_and_a_script_does_not() {
        // This test's own binary is a dynamic (PIE) program.
        let me = std::env::current_exe().unwrap();
        assert!(loads_preload(&me));
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("s");
        std::fs::write(&script, "#!/bin/sh\ntrue\n").unwrap();
        assert!(!loads_preload(&script));
        assert!(!loads_preload(&dir.path().join("missing")));
        // The same program, set-user-ID: the loader ignores the preload.
        let copy = dir.path().join("setuid");
        std::fs::copy(&me, &copy).unwrap();
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o4755)).unwrap();
        assert!(!loads_preload(&copy));
        // The ELF header only, cut before its program headers.
        let cut = dir.path().join("cut");
        std::fs::write(&cut, &std::fs::read(&me).unwrap()[..64]).unwrap();
        assert!(!loads_preload(&cut));
    }
}
