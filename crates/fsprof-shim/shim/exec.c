/* Programs that drop privileges. A workload started as root that switches
 * to another user (setpriv, su, a daemon's own setuid) and then execs
 * cannot join the run: the run directory is root's alone. The new image
 * would only load the shim to find nothing to write to, so the exec
 * wrappers take the shim out of the environment it is given (LD_PRELOAD
 * minus the shim, FSPROF_SHM) and record in the control file which program
 * was started unprofiled, as which user. Execs by the run's own user pass
 * through untouched. */
#define _GNU_SOURCE
#include <errno.h>
#include <spawn.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "interpose.h"
#include "run.h"
#include "util.h"

extern char **environ;

/* The effective user an exec would run the new image as, if that user
 * cannot join the run; 0 when the exec may keep the shim. */
static int leaves_run(uint32_t *euid)
{
    if (!g_run.ok)
        return 0;
    *euid = (uint32_t)syscall(SYS_geteuid);
    return *euid != g_run.uid && *euid != 0;
}

static int starts_with(const char *s, const char *prefix)
{
    while (*prefix)
        if (*s++ != *prefix++)
            return 0;
    return 1;
}

static int is_shim(const char *item, size_t n)
{
    static const char tag[] = "libfsprof_shim";
    for (size_t i = 0; i + sizeof tag - 1 <= n; i++)
        if (memcmp(item + i, tag, sizeof tag - 1) == 0)
            return 1;
    return 0;
}

/* Writes "LD_PRELOAD=<value minus the shim>" to out (room for strlen(e)+1);
 * 0 if nothing is left. */
static int strip_preload(const char *e, char *out)
{
    const char *v = e + sizeof "LD_PRELOAD=" - 1;
    size_t n = fsprof_cat(out, 0, (size_t)-1, "LD_PRELOAD="), start = n;
    while (*v) {
        size_t len = strcspn(v, " :");
        if (len && !is_shim(v, len)) {
            if (n > start)
                out[n++] = ' ';
            memcpy(out + n, v, len);
            n += len;
        }
        v += len;
        if (*v)
            v++;
    }
    out[n] = 0;
    return n > start;
}

/* A copy of envp without the shim, in its own mapping (no malloc: the
 * caller may be a vfork child); NULL if there is nothing to take out or no
 * memory (then the exec goes ahead as asked). */
struct env_copy {
    char **env;
    size_t map_len;
};

static struct env_copy strip_env(char *const envp[])
{
    struct env_copy c = {NULL, 0};
    size_t n = 0, preload = 0, found = 0;
    for (; envp && envp[n]; n++) {
        if (starts_with(envp[n], "LD_PRELOAD=")) {
            preload += strlen(envp[n]) + 1;
            found++;
        } else if (starts_with(envp[n], FSPROF_ENV "=")) {
            found++;
        }
    }
    if (!found)
        return c;
    size_t len = ((n + 1) * sizeof(char *) + preload + 4095) & ~(size_t)4095;
    char **vec = (char **)syscall(SYS_mmap, 0, len, PROT_READ | PROT_WRITE,
                                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (vec == MAP_FAILED)
        return c;
    char *text = (char *)(vec + n + 1);
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (starts_with(envp[i], FSPROF_ENV "="))
            continue;
        if (starts_with(envp[i], "LD_PRELOAD=")) {
            if (strip_preload(envp[i], text)) {
                vec[j++] = text;
                text += strlen(text) + 1;
            }
            continue;
        }
        vec[j++] = envp[i];
    }
    vec[j] = NULL;
    c.env = vec;
    c.map_len = len;
    return c;
}

static void release(struct env_copy *c)
{
    if (c->env) {
        int saved = errno;
        syscall(SYS_munmap, c->env, c->map_len);
        errno = saved;
    }
}

/* The environment an exec of `what` should pass: envp itself, or a copy
 * without the shim when the new image cannot join the run (recorded). */
static char *const *env_for(const char *what, char *const envp[], struct env_copy *c)
{
    uint32_t euid;
    c->env = NULL;
    if (!leaves_run(&euid))
        return envp;
    int saved = errno;
    fsprof_lost(FSPROF_LOST_EXEC, 0, euid, what);
    *c = strip_env(envp);
    errno = saved;
    return c->env ? c->env : envp;
}

/* The body of an exec-family wrapper: returns `call`, run with `env`, the
 * environment `envp` as an exec of `what` should pass it (env_for). */
#define WITH_ENV(what, envp, call)                                                       \
    struct env_copy c_;                                                                  \
    char *const *env = env_for((what), (envp), &c_);                                     \
    int r_ = (call);                                                                     \
    release(&c_);                                                                        \
    return r_

static int (*real_execve)(const char *, char *const[], char *const[]) REAL_PLACE(execve);
WRAPPER(execve) int execve(const char *path, char *const argv[], char *const envp[])
{
    WITH_ENV(path, envp, REAL(execve)(path, argv, env));
}

static int (*real_execvpe)(const char *, char *const[], char *const[]) REAL_PLACE(execvpe);
WRAPPER(execvpe) int execvpe(const char *file, char *const argv[], char *const envp[])
{
    WITH_ENV(file, envp, REAL(execvpe)(file, argv, env));
}

static int (*real_execveat)(int, const char *, char *const[], char *const[], int) REAL_PLACE(execveat);
WRAPPER(execveat)
int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags)
{
    WITH_ENV(path, envp, REAL(execveat)(dirfd, path, argv, env, flags));
}

static int (*real_fexecve)(int, char *const[], char *const[]) REAL_PLACE(fexecve);
WRAPPER(fexecve) int fexecve(int fd, char *const argv[], char *const envp[])
{
    WITH_ENV(argv[0] ? argv[0] : "(fexecve)", envp, REAL(fexecve)(fd, argv, env));
}

/* The forms without an envp use environ; they are forwarded to the forms
 * with one only when the shim must be taken out. */
#define WITHOUT_ENVP(name, with_envp)                                                    \
    static int (*real_##name)(const char *, char *const[]) REAL_PLACE(name);             \
    WRAPPER(name) int name(const char *what, char *const argv[])                         \
    {                                                                                    \
        uint32_t euid;                                                                   \
        if (!leaves_run(&euid))                                                          \
            return REAL(name)(what, argv);                                               \
        return with_envp(what, argv, environ);                                           \
    }
WITHOUT_ENVP(execv, execve)
WITHOUT_ENVP(execvp, execvpe)

/* execl, execlp, execle: their arguments as an argv. */
#define ARGV_FROM_VA(first, ap, after)                                                   \
    size_t n_ = 1;                                                                       \
    va_list count_;                                                                      \
    va_copy(count_, ap);                                                                 \
    while (va_arg(count_, char *))                                                       \
        n_++;                                                                            \
    va_end(count_);                                                                      \
    char *argv_[n_ + 1];                                                                 \
    argv_[0] = (char *)(first);                                                          \
    for (size_t i_ = 1; i_ <= n_; i_++)                                                  \
        argv_[i_] = va_arg(ap, char *);                                                  \
    after

WRAPPER(execl) int execl(const char *path, const char *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    ARGV_FROM_VA(arg, ap, va_end(ap));
    return execv(path, argv_);
}

WRAPPER(execlp) int execlp(const char *file, const char *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    ARGV_FROM_VA(arg, ap, va_end(ap));
    return execvp(file, argv_);
}

WRAPPER(execle) int execle(const char *path, const char *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    ARGV_FROM_VA(arg, ap, char *const *envp = va_arg(ap, char *const *); va_end(ap));
    return execve(path, argv_, envp);
}

static int (*real_posix_spawn)(pid_t *, const char *, const posix_spawn_file_actions_t *,
                               const posix_spawnattr_t *, char *const[], char *const[])
    REAL_PLACE(posix_spawn);
WRAPPER(posix_spawn)
int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                const posix_spawnattr_t *at, char *const argv[], char *const envp[])
{
    WITH_ENV(path, envp, REAL(posix_spawn)(pid, path, fa, at, argv, env));
}

static int (*real_posix_spawnp)(pid_t *, const char *, const posix_spawn_file_actions_t *,
                                const posix_spawnattr_t *, char *const[], char *const[])
    REAL_PLACE(posix_spawnp);
WRAPPER(posix_spawnp)
int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                 const posix_spawnattr_t *at, char *const argv[], char *const envp[])
{
    WITH_ENV(file, envp, REAL(posix_spawnp)(pid, file, fa, at, argv, env));
}

/* The exec a forked child ends with (record.h, g_before_first_fork). */
static void before_first_fork(void)
{
    (void)REAL(execve);
    (void)REAL(execvp);
    (void)REAL(execvpe);
    (void)REAL(execv);
}

__attribute__((constructor)) static void set_fork_hook(void)
{
    g_before_first_fork[FSPROF_FORK_HOOK_EXEC] = before_first_fork;
}
