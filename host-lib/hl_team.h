/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A local team: the ranks of one job on one host, over one shared-memory
 * segment (hl_team.c). Two streams of numbered steps carry data; each step
 * has an owner (local rank 0, the leader, or with rails the local rank the
 * caller names):
 *   up    every other rank publishes a chunk of step s; the owner takes them
 *   down  the owner publishes a chunk of step s; every other rank reads it
 * Each rank owns two counters per stream, futex words in the segment: the
 * writer's (HL_TEAM_UP, HL_TEAM_DOWN) passes step s once the rank has
 * written its chunk of it (up) or published it as its owner (down), or has
 * nothing to write there; the reader's (HL_TEAM_UP_READ, HL_TEAM_DOWN_READ)
 * once it has taken every rank's chunk as the step's owner (up) or read
 * the owner's (down), or has nothing to read there. A step's buffers, and
 * its note, may be written again once every rank's reader's counter is
 * past that step (hl_team_reuse). hl_team_post passes both at once (the
 * handshakes); a collective's steps pass them apart (hl_team_post_one),
 * so that a rank writes its chunks of the steps other ranks own ahead of
 * its own steps, which it takes meanwhile: with rails one counter for
 * both kept the ranks taking turns, step by step.
 * HL_TEAM_SLOTS buffers per rank and stream let steps s + 1 ..
 * s + HL_TEAM_SLOTS - 1 be written while step s is read. The segment's name is unlinked once every
 * local rank has it mapped, so a crash leaves nothing in /dev/shm; a
 * segment left by a crash before that is reclaimed by the next job.
 */
#ifndef HL_TEAM_H
#define HL_TEAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* bytes a step carries, and the buffers per rank and stream: a writer
 * runs up to HL_TEAM_SLOTS steps ahead of its reader, so that many small
 * collectives in flight (each one step) pass without a wake-up each */
#define HL_TEAM_CHUNK (16u * 1024u)
#define HL_TEAM_SLOTS 32u
/* most ranks of one job on one host */
#define HL_TEAM_MAX 256

enum hl_team_stream {
	HL_TEAM_UP = 0, HL_TEAM_DOWN = 1,             /* the writers' counters, the buffers */
	HL_TEAM_UP_READ = 2, HL_TEAM_DOWN_READ = 3,   /* the readers' counters */
};
#define HL_TEAM_COUNTERS 4

/* what a down step's owner says of it beside its data */
struct hl_team_note {
	int32_t rc;            /* the collective's result at the step's owner */
	uint32_t flags;        /* HL_TEAM_NOTE_* */
	char msg[200];         /* rc != 0: the leader's error message */
};
#define HL_TEAM_NOTE_RING 1u   /* the in-network phase ran on the host ring */

struct hl_team;

/*
 * Make (local rank 0) or join the team's segment /dev/shm/<name> and wait
 * until all lsize ranks have joined, up to deadline_us (hl_clock_us). The
 * caller's global rank is recorded and checked by the leader: ranks[l]
 * must be local rank l's. rails: every rank may own down steps (a down
 * buffer per rank; without, the leader's only). A rank that finds a team
 * made for another lsize or rails fails it at once, and the leader and the
 * ranks already in fail too (INCA_ERR_CONFIG, with its reason). 0, or a
 * negative INCA code with err set.
 */
int hl_team_open(const char *name, int lrank, int lsize, bool rails, const int *ranks,
		 int my_rank, double deadline_us, struct hl_team **out, char *err, size_t errlen);
void hl_team_close(struct hl_team *t);

/* local rank lrank's buffer for step s of a stream (HL_TEAM_CHUNK bytes;
 * the down stream has the leader's only unless the team has rails) */
uint8_t *hl_team_buf(struct hl_team *t, enum hl_team_stream st, int lrank, uint32_t s);
/* The buffer of step s is step s - HL_TEAM_SLOTS's: its writer may fill it
 * once every other rank's reader's counter has reached (hl_team_reached)
 * this step number. */
static inline uint32_t hl_team_reuse(uint32_t s)
{
	return s - HL_TEAM_SLOTS + 1;
}
struct hl_team_note *hl_team_note(struct hl_team *t, uint32_t s);
/* This rank has done step s of stream st (HL_TEAM_UP or HL_TEAM_DOWN), as
 * writer and as reader (both counters become s + 1). */
void hl_team_post(struct hl_team *t, enum hl_team_stream st, uint32_t s);
/* One counter (any of the four) becomes s + 1. */
void hl_team_post_one(struct hl_team *t, enum hl_team_stream counter, uint32_t s);
/* Has local rank lrank's counter passed every step below n? */
int hl_team_reached(struct hl_team *t, enum hl_team_stream st, int lrank, uint32_t n);
/*
 * Wait until it has, at most until until_us: 1 reached, 0 not yet, or
 * INCA_ERR_PEER when that rank's process is gone (err says so). Spins a
 * few microseconds, then sleeps on the futex: a late rank costs no CPU.
 */
int hl_team_wait(struct hl_team *t, enum hl_team_stream st, int lrank, uint32_t n,
		 double until_us, char *err, size_t errlen);

/*
 * Rails teams (made with rails): every post is also counted team-wide. A
 * rank that waits for several things at once reads hl_team_posts() before
 * it looks, then sleeps in hl_team_wait_post until any rank posts (1), at
 * most until until_us (0), or INCA_ERR_PEER when local rank lrank (the one
 * it waits for first) is gone or the team broken (err says so).
 */
uint32_t hl_team_posts(struct hl_team *t);
int hl_team_wait_post(struct hl_team *t, uint32_t seen, int lrank, double until_us, char *err,
		      size_t errlen);

/* Is local rank lrank alive and the team whole? 0, or INCA_ERR_PEER with
 * err saying why. */
int hl_team_check(struct hl_team *t, int lrank, char *err, size_t errlen);
/* This rank gives up on the team (a local rank gone, a deadline): every
 * rank waiting in it, or later, gets INCA_ERR_PEER and why. */
void hl_team_break(struct hl_team *t, const char *why);

#endif /* HL_TEAM_H */
