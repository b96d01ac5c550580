/* The FUSE round-trip floor: a libfuse low-level daemon that does no work.
 *
 * It serves one directory holding one empty file, "f", answers every
 * request from constants (no lower file system, no allocation, no
 * caching: entry and attribute timeouts 0, like `fsprof mount
 * --observe-all`), on one thread (fuse_session_loop). What a request costs
 * through it is what any FUSE daemon pays before doing anything: the
 * kernel's queueing, the two context switches, the copies through
 * /dev/fuse. bench/mount_bench.py --floor times N fstat() calls (one
 * GETATTR each) through it and through the real daemons.
 *
 * Build: cc -O2 fuse_floor.c $(pkg-config --cflags --libs fuse3)
 * Run:   fuse_floor MOUNTPOINT   (foreground; unmount with fusermount3 -u)
 */
#define FUSE_USE_VERSION 34
#include <fuse_lowlevel.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define FILE_INO 2

static void attr_of(fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	if (ino == FUSE_ROOT_ID) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
	} else {
		st->st_mode = S_IFREG | 0644;
		st->st_nlink = 1;
	}
}

static void floor_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	if (parent != FUSE_ROOT_ID || strcmp(name, "f") != 0) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	memset(&e, 0, sizeof(e));
	e.ino = FILE_INO;
	attr_of(FILE_INO, &e.attr);
	fuse_reply_entry(req, &e);
}

static void floor_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	(void)fi;
	attr_of(ino, &st);
	fuse_reply_attr(req, &st, 0.0);
}

static void floor_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	fuse_reply_open(req, fi);
}

static void floor_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	(void)ino, (void)size, (void)off, (void)fi;
	fuse_reply_buf(req, NULL, 0);
}

static void floor_ok(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino, (void)fi;
	fuse_reply_err(req, 0);
}

static const struct fuse_lowlevel_ops ops = {
	.lookup = floor_lookup,
	.getattr = floor_getattr,
	.open = floor_open,
	.read = floor_read,
	.flush = floor_ok,
	.release = floor_ok,
};

int main(int argc, char **argv)
{
	char *args_v[] = {argv[0], NULL};
	struct fuse_args args = FUSE_ARGS_INIT(1, args_v);
	struct fuse_session *se;
	int ret;

	if (argc != 2) {
		fprintf(stderr, "usage: %s MOUNTPOINT\n", argv[0]);
		return 2;
	}
	se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
	if (!se || fuse_session_mount(se, argv[1]) != 0)
		return 1;
	fuse_set_signal_handlers(se);
	ret = fuse_session_loop(se);
	fuse_remove_signal_handlers(se);
	fuse_session_unmount(se);
	fuse_session_destroy(se);
	return ret ? 1 : 0;
}
