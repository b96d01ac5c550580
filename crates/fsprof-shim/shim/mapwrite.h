/* The bytes of pages written through shared file mappings, for
 * `fsprof trace --data full` (mapwrite.c). */
#ifndef FSPROF_MAPWRITE_H
#define FSPROF_MAPWRITE_H

#include <stddef.h>

#include "record.h"

/* A file mapping was made: followed if it is shared and writable. */
HIDDEN void fsprof_mapwrite_remember(void *addr, size_t len, int prot, int flags);
/* Before msync(addr, len): the written pages' bytes into the trace. */
HIDDEN void fsprof_mapwrite_sync(void *addr, size_t len);
/* Before munmap(addr, len): the same, then the range is not followed. */
HIDDEN void fsprof_mapwrite_unmap(void *addr, size_t len);

#endif
