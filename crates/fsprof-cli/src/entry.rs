//! The static-PIE binary's entry point (`build.rs` links it as `-e
//! fsprof_entry` where it links fsprof as a static PIE): before glibc's
//! `_start`, one `madvise(MADV_POPULATE_WRITE)` over the RELRO segment.
//!
//! Why: a static PIE relocates itself at start (`_dl_relocate_static_pie`),
//! writing one pointer per relative relocation (`RELACOUNT` in `readelf -d
//! target/release/fsprof`: tens of thousands, growing with the code) into
//! the pages of its RELRO segment (`.data.rel.ro`, `.got`: the
//! `GNU_RELRO` MemSiz of `readelf -lW`, divided by the page size: tens of
//! pages); each first write to a page is a copy-on-write page fault, ~1.1
//! µs each in this VM (trap, page allocation, copy). One `madvise` makes
//! the same private copies in one system call, without a trap per page
//! (measured ~82 µs → ~46 µs for the same pages, docs/benchmarks.md
//! "Start-up, fourth session"). It changes no byte the program sees: the
//! pages get the same contents the faults would have given them.
//!
//! Written in assembly because nothing else may run yet: the binary is not
//! relocated (every stored pointer is still the link-time one), there is
//! no TLS and no libc. The code uses only RIP-relative addresses, its own
//! ELF headers (`__ehdr_start`, defined by the linker) and one system
//! call, and keeps what `_start` needs: `rsp` (argc, argv, envp, auxv) and
//! `rdx` (the kernel's exit function). A kernel without
//! `MADV_POPULATE_WRITE` (before 5.14) answers EINVAL and the faults
//! happen as before.

#[cfg(all(fsprof_entry, target_arch = "x86_64", target_os = "linux"))]
std::arch::global_asm!(
    ".globl fsprof_entry",
    ".type fsprof_entry,@function",
    "fsprof_entry:",
    // _start's argument from the kernel.
    "mov r12, rdx",
    "lea r8, [rip + __ehdr_start]",
    // The program headers where they are loaded, and their count.
    "mov rax, [r8 + 0x20]",
    "lea r9, [r8 + rax]",
    "movzx ecx, word ptr [r8 + 0x38]",
    "movzx r11d, word ptr [r8 + 0x36]",
    // The load bias: where PT_PHDR (6) is minus where it was linked.
    "mov r10, r9",
    "mov rsi, r9",
    "mov edx, ecx",
    "2:",
    "test edx, edx",
    "jz 6f",
    "cmp dword ptr [rsi], 6",
    "je 3f",
    "add rsi, r11",
    "dec edx",
    "jmp 2b",
    "3:",
    "sub r10, [rsi + 0x10]",
    "jmp 4f",
    // No PT_PHDR (GNU ld's musl static PIE): the ELF header is where the
    // first PT_LOAD (1) maps file offset 0, so the bias is the header's
    // address minus that segment's link address less its file offset.
    "6:",
    "mov rsi, r9",
    "mov edx, ecx",
    "7:",
    "test edx, edx",
    "jz 9f",
    "cmp dword ptr [rsi], 1",
    "je 8f",
    "add rsi, r11",
    "dec edx",
    "jmp 7b",
    "8:",
    "mov r10, r8",
    "sub r10, [rsi + 0x10]",
    "add r10, [rsi + 0x8]",
    // PT_GNU_RELRO (0x6474e552): its pages, rounded out to whole pages.
    "4:",
    "test ecx, ecx",
    "jz 9f",
    "cmp dword ptr [r9], 0x6474e552",
    "je 5f",
    "add r9, r11",
    "dec ecx",
    "jmp 4b",
    "5:",
    "mov rdi, [r9 + 0x10]",
    "add rdi, r10",
    "mov rsi, [r9 + 0x28]",
    "add rsi, rdi",
    "and rdi, -4096",
    "add rsi, 4095",
    "and rsi, -4096",
    "sub rsi, rdi",
    // madvise(start, len, MADV_POPULATE_WRITE); its result does not matter.
    "mov edx, 23",
    "mov eax, 28",
    "syscall",
    "9:",
    "mov rdx, r12",
    "jmp _start",
    ".size fsprof_entry, . - fsprof_entry",
);
