//! Makes the relocated data of a musl static PIE read-only, as glibc's
//! start-up does for its own (`_dl_protect_relro`) and musl's static
//! start-up does not: the vtables, function pointers and GOT that the
//! self-relocation wrote (`PT_GNU_RELRO`) would otherwise stay writable for
//! the life of a root process that parses other users' files, one write
//! away from redirecting a call. One `mprotect` of the whole pages of the
//! segment (a partial last page shares its page with `.data`, as glibc
//! leaves it).

extern "C" {
    /// The ELF header where it is mapped (defined by the linker).
    static __ehdr_start: libc::Elf64_Ehdr;
}

/// `PT_GNU_RELRO` of this program, made read-only; without one, nothing
/// to do.
pub fn protect() {
    // SAFETY: the linker puts the ELF header at the start of the first
    // loaded segment; it stays mapped, read-only, for the program's life.
    let ehdr = unsafe { &*std::ptr::addr_of!(__ehdr_start) };
    let base = ehdr as *const libc::Elf64_Ehdr as usize;
    // SAFETY: e_phnum program headers at e_phoff, in the same first
    // segment as the header (where both linkers put them).
    let headers = unsafe {
        std::slice::from_raw_parts(
            (base + ehdr.e_phoff as usize) as *const libc::Elf64_Phdr,
            ehdr.e_phnum as usize,
        )
    };
    // The load bias: the header's address against the link address of
    // the segment that maps file offset 0 (GNU ld writes no PT_PHDR for a
    // static PIE).
    let Some(bias) = headers
        .iter()
        .find(|h| h.p_type == libc::PT_LOAD)
        .map(|h| base.wrapping_sub((h.p_vaddr - h.p_offset) as usize))
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
