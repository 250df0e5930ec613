/* SPDX-License-Identifier: BSD-3-Clause */
/* Owners of one host address in different processes (the udp and xdp
 * transports): their lock files under /run/inca and the network namespace
 * that makes an address or interface unique. */
#ifndef HL_SHARED_H
#define HL_SHARED_H

#define HL_RUN_DIR "/run/inca"

/* The inode of a namespace file such as /proc/self/ns/net; 0 if unknown. */
unsigned long hl_ns_inode(const char *path);

/* flock(LOCK_EX) the file at path (created in HL_RUN_DIR if needed),
 * waiting at most wait_ms: holders only set up or tear down shared state.
 * Returns the fd (close it to unlock), -ETIMEDOUT or another -errno. */
int hl_run_lock(const char *path, int wait_ms);

#endif
