/* Where the shim's code lies in its text. A short process (a shell's fork,
 * `cat`, `wc`) runs a few hundred instructions of the shim, spread over
 * every wrapper it calls; each 64 KiB of text it touches costs it one page
 * fault (the kernel maps a file's pages around a fault 64 KiB at a time),
 * and a forked child faults the pages in again. So the wrappers that
 * nearly every process calls are put together in `.text.hot.fsprof`, which
 * the linker places at the front of the text with the start-up code
 * (build.rs links the set-up files first), and each wrapper keeps its
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

/* WRAPPER_PLACE(name) is FSPROF_COMMON_TEXT when COMMON_<name> is defined
 * below (as `~, FSPROF_COMMON_TEXT`), else nothing. */
#define WRAPPER_PLACE(name) LAYOUT_SECOND(COMMON_##name, , )
#define LAYOUT_SECOND(...) LAYOUT_SECOND_(__VA_ARGS__)
#define LAYOUT_SECOND_(a, b, ...) b

#define COMMON_open ~, FSPROF_COMMON_TEXT
#define COMMON_open64 ~, FSPROF_COMMON_TEXT
#define COMMON_openat ~, FSPROF_COMMON_TEXT
#define COMMON___open_2 ~, FSPROF_COMMON_TEXT
#define COMMON_close ~, FSPROF_COMMON_TEXT
#define COMMON_read ~, FSPROF_COMMON_TEXT
#define COMMON_write ~, FSPROF_COMMON_TEXT
#define COMMON_fstat ~, FSPROF_COMMON_TEXT
#define COMMON_stat ~, FSPROF_COMMON_TEXT
#define COMMON_lstat ~, FSPROF_COMMON_TEXT
#define COMMON_fstatat ~, FSPROF_COMMON_TEXT
#define COMMON_lseek ~, FSPROF_COMMON_TEXT
#define COMMON_fcntl ~, FSPROF_COMMON_TEXT
#define COMMON_fflush ~, FSPROF_COMMON_TEXT
#define COMMON_fclose ~, FSPROF_COMMON_TEXT
#define COMMON_fopen ~, FSPROF_COMMON_TEXT
#define COMMON_posix_fadvise ~, FSPROF_COMMON_TEXT
#define COMMON_access ~, FSPROF_COMMON_TEXT
#define COMMON_readdir ~, FSPROF_COMMON_TEXT
#define COMMON_opendir ~, FSPROF_COMMON_TEXT
#define COMMON_closedir ~, FSPROF_COMMON_TEXT
#define COMMON_dup2 ~, FSPROF_COMMON_TEXT
#define COMMON_pipe ~, FSPROF_COMMON_TEXT
#define COMMON_execve ~, FSPROF_COMMON_TEXT
#define COMMON_execvp ~, FSPROF_COMMON_TEXT

#endif
