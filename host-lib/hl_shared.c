/* SPDX-License-Identifier: BSD-3-Clause */
/* Owners of one host address in different processes: lock files under
 * /run/inca and the network namespace's identity (hl_shared.h). */
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hl_shared.h"

unsigned long hl_ns_inode(const char *path)
{
	struct stat st;

	return stat(path, &st) ? 0 : (unsigned long)st.st_ino;
}

int hl_run_lock(const char *path, int wait_ms)
{
	struct timespec ms = { 0, 1000 * 1000 };
	int fd, e;

	if (mkdir(HL_RUN_DIR, 0755) && errno != EEXIST)
		return -errno;
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	for (int waited = 0; flock(fd, LOCK_EX | LOCK_NB); waited++) {
		e = errno;
		if ((e != EWOULDBLOCK && e != EINTR) || waited >= wait_ms) {
			close(fd);
			return e == EWOULDBLOCK ? -ETIMEDOUT : -e;
		}
		nanosleep(&ms, NULL);
	}
	return fd;
}
