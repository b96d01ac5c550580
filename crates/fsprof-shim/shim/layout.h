/* Where the shim's code lies in its text. A short process (a shell's fork,
 * `cat`, `wc`) runs a few hundred instructions of the shim, spread over
 * every wrapper it calls; each 64 KiB of text it touches costs it one page
 * fault (the kernel maps a file's pages around a fault 64 KiB at a time),
 * and a forked child faults the pages in again. So the wrappers that
 * nearly every process calls each get a section of their own, which
 * shim/layout.ld places with the set-up code and the constructors in the
 * first 64 KiB of the file, the window of the loader's first fault (the
 * wrappers a `cat` calls first, those of a shell's child and `find` after
 * the set-up code); and each wrapper keeps its
 * rarely taken paths beside it (-fno-reorder-blocks-and-partition) rather
 * than in a `.cold` part at the far end of the text.
 *
 * The list comes from the ops the processes of a shell loop, `find | xargs
 * wc`, a compile and coreutils call (fsprof run: ops per process), with
 * every symbol those ops have, and what a shell's child calls between fork
 * and exec. Leaving a wrapper out of it costs only a fault; nothing else
 * depends on it. */
#ifndef FSPROF_LAYOUT_H
#define FSPROF_LAYOUT_H

#define FSPROF_COMMON_TEXT __attribute__((section(".text.hot.fsprof")))
/* A common wrapper's own section, so that shim/layout.ld can order the
 * wrappers among themselves and the set-up code. */
#define FSPROF_WRAPPER_TEXT(name) __attribute__((section(".text.hot.fsprof." #name)))

/* WRAPPER_PLACE(name) is FSPROF_WRAPPER_TEXT(name) when COMMON_<name> is
 * defined below (as `~, FSPROF_WRAPPER_TEXT(name)`), else nothing. */
#define WRAPPER_PLACE(name) LAYOUT_SECOND(COMMON_##name, , )
#define LAYOUT_SECOND(...) LAYOUT_SECOND_(__VA_ARGS__)
#define LAYOUT_SECOND_(a, b, ...) b

/* A wrapper's pointer to its real function: in .bss, on the page every
 * process has written (pool.c), for the common wrappers (COMMON_ below)
 * and those of HOTREAL_ below; in .lbss for the others, written only by a
 * process that calls one of them. The 204 pointers took 1.6 KiB of that
 * page, which pool.c's first slot record needs. */
#define REAL_PLACE(name) LAYOUT_THIRD(COMMON_##name, , LAYOUT_THIRD(HOTREAL_##name, , BIG_BSS, ), )
#define LAYOUT_THIRD(...) LAYOUT_THIRD_(__VA_ARGS__)
#define LAYOUT_THIRD_(a, b, c, ...) c

#define COMMON_open ~, FSPROF_WRAPPER_TEXT(open)
#define COMMON_open64 ~, FSPROF_WRAPPER_TEXT(open64)
#define COMMON_openat ~, FSPROF_WRAPPER_TEXT(openat)
#define COMMON___open_2 ~, FSPROF_WRAPPER_TEXT(__open_2)
#define COMMON_close ~, FSPROF_WRAPPER_TEXT(close)
#define COMMON_read ~, FSPROF_WRAPPER_TEXT(read)
#define COMMON_write ~, FSPROF_WRAPPER_TEXT(write)
#define COMMON_fstat ~, FSPROF_WRAPPER_TEXT(fstat)
#define COMMON_stat ~, FSPROF_WRAPPER_TEXT(stat)
#define COMMON_lstat ~, FSPROF_WRAPPER_TEXT(lstat)
#define COMMON_fstatat ~, FSPROF_WRAPPER_TEXT(fstatat)
#define COMMON_lseek ~, FSPROF_WRAPPER_TEXT(lseek)
#define COMMON_fcntl ~, FSPROF_WRAPPER_TEXT(fcntl)
#define COMMON_fflush ~, FSPROF_WRAPPER_TEXT(fflush)
#define COMMON_fclose ~, FSPROF_WRAPPER_TEXT(fclose)
#define COMMON_fopen ~, FSPROF_WRAPPER_TEXT(fopen)
#define COMMON_posix_fadvise ~, FSPROF_WRAPPER_TEXT(posix_fadvise)
#define COMMON_access ~, FSPROF_WRAPPER_TEXT(access)
#define COMMON_readdir ~, FSPROF_WRAPPER_TEXT(readdir)
#define COMMON_opendir ~, FSPROF_WRAPPER_TEXT(opendir)
#define COMMON_closedir ~, FSPROF_WRAPPER_TEXT(closedir)
#define COMMON_dup2 ~, FSPROF_WRAPPER_TEXT(dup2)
#define COMMON_pipe ~, FSPROF_WRAPPER_TEXT(pipe)
#define COMMON_execve ~, FSPROF_WRAPPER_TEXT(execve)
#define COMMON_execvp ~, FSPROF_WRAPPER_TEXT(execvp)

/* Pointers kept with the common wrappers' though their code is not in the
 * first window: what process.c's before_first_fork finds for a forked
 * child, the calls of coreutils, find, xargs, a shell beyond the list
 * above (a process that calls one of the others writes a page of .lbss,
 * where the pool's first slot record was), and pread's, which the per-call
 * figures (bench/selfcost_bound.py) measure, left where it was. */
#define HOTREAL_execvpe ~,
#define HOTREAL_execv ~,
#define HOTREAL_chdir ~,
#define HOTREAL_dup3 ~,
#define HOTREAL_stat64 ~,
#define HOTREAL_lstat64 ~,
#define HOTREAL_fstatat64 ~,
#define HOTREAL_statx ~,
#define HOTREAL_statfs ~,
#define HOTREAL_fstatfs ~,
#define HOTREAL_fcntl64 ~,
#define HOTREAL_fopen64 ~,
#define HOTREAL_fdopen ~,
#define HOTREAL_fdopendir ~,
#define HOTREAL_readdir64 ~,
#define HOTREAL_readlink ~,
#define HOTREAL_unlink ~,
#define HOTREAL_unlinkat ~,
#define HOTREAL_mmap ~,
#define HOTREAL_mmap64 ~,
#define HOTREAL_munmap ~,
#define HOTREAL_fread ~,
#define HOTREAL_fwrite ~,
#define HOTREAL_fwrite_unlocked ~,
#define HOTREAL_fputs ~,
#define HOTREAL_fputs_unlocked ~,
#define HOTREAL_fputc ~,
#define HOTREAL_putc ~,
#define HOTREAL_putchar ~,
#define HOTREAL___overflow ~,
#define HOTREAL_getline ~,
#define HOTREAL_pread ~,
#define HOTREAL_pread64 ~,
#define HOTREAL___getdelim ~,

#endif
