//! Makes the relocated data of a musl static PIE read-only, as glibc's
//! start-up does for its own (`_dl_protect_relro`) and musl's static
//! start-up does not: the vtables, function pointers and GOT that the
//! self-relocation wrote (`PT_GNU_RELRO`) would otherwise stay writable for
//! the life of a root process that parses other users' files, one write
//! away from redirecting a call. One `mprotect` of the whole pages of the
//! segment (a partial last page shares its page with `.data`, as glibc
//! leaves it).

/// `PT_GNU_RELRO` of this program, made read-only; without one (or without
/// the auxiliary vector's program headers) nothing to do.
pub fn protect() {
    // SAFETY: getauxval only reads the auxiliary vector.
    let (phdr, phnum) = unsafe {
        (
            libc::getauxval(libc::AT_PHDR) as usize,
            libc::getauxval(libc::AT_PHNUM) as usize,
        )
    };
    if phdr == 0 {
        return;
    }
    // SAFETY: the kernel put `phnum` program headers at `phdr` in this
    // program's mapped image, where they stay for its lifetime.
    let headers = unsafe { std::slice::from_raw_parts(phdr as *const libc::Elf64_Phdr, phnum) };
    // The load bias: where the program headers are against where they
    // were linked (PT_PHDR).
    let Some(bias) = headers
        .iter()
        .find(|h| h.p_type == libc::PT_PHDR)
        .map(|h| phdr.wrapping_sub(h.p_vaddr as usize))
    else {
        return;
    };
    let Some(relro) = headers.iter().find(|h| h.p_type == libc::PT_GNU_RELRO) else {
        return;
    };
    let page = 4096;
    let start = bias.wrapping_add(relro.p_vaddr as usize) / page * page;
    let end = bias.wrapping_add((relro.p_vaddr + relro.p_memsz) as usize) / page * page;
    if end > start {
        // SAFETY: whole pages of this program's own RELRO segment, which
        // nothing writes after the start-up's relocation; a failure leaves
        // them as they were.
        unsafe { libc::mprotect(start as *mut libc::c_void, end - start, libc::PROT_READ) };
    }
}
