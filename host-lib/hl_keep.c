/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Kept inputs: a collective this rank completed in-network may not have
 * completed at every rank (a result that reached this rank and not
 * another when the switch or tree died). Should the others need it on the
 * ring, this rank runs it again there from its input, a "replay" whose
 * results it drops (hl_coll_recover). So the input of every collective
 * completed in-network is kept until every rank has completed it (seen
 * from the stream's frontier: kept_prune) or INCA_KEEP / INCA_KEEP_MB are
 * exceeded (then the oldest goes, and this rank can no longer replay from
 * it: "lost"). Where the ranks agree on where the ring starts: with a
 * manager, the plan's cut (hl_plan.c); on a static group, the ring's own
 * agreement at the fallback (hl_ring_agree).
 *
 * The buffers are reused: the spare (the last dropped input's, its pages
 * already in memory) serves the next keep or in-place copy.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "hl_priv.h"

#define KEEP_DEFAULT 8
#define KEEP_MB_DEFAULT 256
#define POPULATE_MIN (1u << 20)

void hl_keep_init(struct inca_comm *c)
{
	struct hl_keep *k = &c->keep;
	const char *s;

	k->max = KEEP_DEFAULT;
	k->bytes_max = (size_t)KEEP_MB_DEFAULT << 20;
	if ((s = getenv("INCA_KEEP")))
		k->max = (unsigned)atoi(s);
	if ((s = getenv("INCA_KEEP_MB")))
		k->bytes_max = (size_t)atol(s) << 20;
}

static void buffer_free(uint8_t *p, size_t cap)
{
	if (p && cap >= POPULATE_MIN)
		munmap(p, cap);
	else
		free(p);
}

void hl_keep_free(struct inca_comm *c)
{
	struct hl_keep *k = &c->keep;

	for (unsigned i = 0; i < k->n; i++)
		buffer_free(k->kept[i].in, k->kept[i].cap);
	free(k->kept);
	k->kept = NULL;
	k->n = k->cap = 0;
	k->bytes = 0;
	buffer_free(k->spare, k->spare_cap);
	k->spare = NULL;
	k->spare_cap = 0;
}

static void spare_put(struct hl_keep *k, uint8_t *p, size_t cap)
{
	if (!p)
		return;
	if (k->spare_cap >= cap) {
		buffer_free(p, cap);
		return;
	}
	buffer_free(k->spare, k->spare_cap);
	k->spare = p;
	k->spare_cap = cap;
}

static void note_lost(struct hl_keep *k, uint32_t seq)
{
	if (!k->lost_any || hl_seq_diff(seq, k->lost) > 0) {
		k->lost = seq;
		k->lost_any = true;
	}
}

/* i held no more: lost (INCA_KEEP, INCA_KEEP_MB) or every rank completed
 * it; either way this rank cannot replay it from now on */
static void drop(struct hl_keep *k, unsigned i)
{
	struct hl_kept *e = &k->kept[i];

	note_lost(k, e->seq);
	k->bytes -= e->bytes;
	spare_put(k, e->in, e->cap);
	memmove(e, e + 1, sizeof(*e) * (k->n - i - 1));
	k->n--;
}

/* Drop the kept inputs every rank has completed. A result of packet g
 * here means every member sent g, and a member sends g only once it has
 * the result of g - W (self-clocking, docs/protocol.md 3.1): with every
 * result below the frontier F here, every rank has every result below
 * F - W, so a collective whose packets end there is complete everywhere
 * and no recovery will replay it. Within one stream only: a reset moves
 * the frontier without results. Most back-to-back large collectives thus
 * keep one input, and its buffer comes back as the next one's spare
 * (memory already touched: on a VM the first write to a fresh 16 MiB
 * costs tens of ms, a copy into warm memory about one). */
static void prune(struct inca_comm *c)
{
	struct hl_keep *k = &c->keep;
	uint64_t front, w = c->stream.window;

	if (!k->n || !hl_plan_keep_begin(c))
		return;         /* (a plan's cut pending: hl_plan.c) */
	front = hl_stream_frontier(c);
	for (unsigned i = 0; i < k->n;)
		if (k->kept[i].gen == c->stream_gen && k->kept[i].gend + w <= front)
			drop(k, i);
		else
			i++;
	hl_plan_keep_end(c);
}

uint8_t *hl_keep_buffer(struct inca_comm *c, size_t n, size_t *cap)
{
	struct hl_keep *k = &c->keep;
	uint8_t *p;

	prune(c);
	if (k->spare && k->spare_cap >= n) {
		p = k->spare;
		*cap = k->spare_cap;
		k->spare = NULL;
		k->spare_cap = 0;
		return p;
	}
	*cap = n ? n : 1;
	if (n < POPULATE_MIN)
		return malloc(*cap);
	/* large: mapped with its pages in (one call instead of a page fault
	 * per 4 KiB: those cost 5% of a 16 MiB all-reduce at 200 Mbit/s on a
	 * VM); freed by buffer_free */
	p = mmap(NULL, *cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
		 -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void hl_keep_unbuffer(struct inca_comm *c, uint8_t *p, size_t cap)
{
	spare_put(&c->keep, p, cap);
}

void hl_keep_put(struct inca_comm *c, struct hl_kept *e)
{
	struct hl_keep *k = &c->keep;

	if (k->max == 0 || e->bytes > k->bytes_max) {
		note_lost(k, e->seq);
		hl_keep_unbuffer(c, e->in, e->cap);
		e->in = NULL;
		hl_plan_position(c);
		return;
	}
	/* the oldest go for room, unless a plan's cut is pending (then the
	 * collectives in flight, at most INCA_MAX_INFLIGHT, may go past
	 * INCA_KEEP and INCA_KEEP_MB until it is applied) */
	if (hl_plan_keep_begin(c)) {
		while (k->n && (k->n >= k->max || k->bytes + e->bytes > k->bytes_max))
			drop(k, 0);
		hl_plan_keep_end(c);
	}
	if (k->n == k->cap) {
		unsigned cap = k->cap ? 2 * k->cap : 8;
		void *p = realloc(k->kept, sizeof(*k->kept) * cap);
		if (!p) {
			e->bytes = k->bytes_max + 1;
			hl_keep_put(c, e);        /* counted as lost */
			return;
		}
		k->kept = p;
		k->cap = cap;
	}
	k->kept[k->n++] = *e;
	k->bytes += e->bytes;
	e->in = NULL;
	hl_plan_position(c);
}

void hl_keep_lost(struct inca_comm *c, uint32_t seq)
{
	note_lost(&c->keep, seq);
}

void hl_keep_ring_done(struct inca_comm *c, uint32_t seq)
{
	struct hl_keep *k = &c->keep;

	if (!k->ring_any || hl_seq_diff(seq, k->ring_low) < 0 ||
	    (k->lost_any && hl_seq_diff(k->ring_low, k->lost) <= 0)) {
		k->ring_low = seq;
		k->ring_any = true;
	}
}

/* Older than this many collectives before the next: long complete at
 * every rank (at most INCA_MAX_INFLIGHT are in flight), and kept out of
 * the comparisons, which wrap at 2^31. */
#define KEEP_HORIZON (1u << 30)

uint32_t hl_keep_from(struct inca_comm *c)
{
	struct hl_keep *k = &c->keep;
	uint32_t horizon = c->next_seq - KEEP_HORIZON;
	/* the oldest this rank holds an input of: kept, or a collective
	 * still in the stream (hl_coll_recover replays from its input) */
	uint32_t from = hl_coll_oldest(c);

	for (unsigned i = 0; i < k->n; i++)
		if (hl_seq_diff(k->kept[i].seq, from) < 0)
			from = k->kept[i].seq;
	/* a collective completed on the ring needs no replay: one that
	 * joined on the ring, or ran there since a cut, can replay "from"
	 * the oldest of them (else a dead tree's cut would ask it for inputs
	 * of collectives that never ran on the tree) */
	if (k->ring_any) {
		uint32_t r = (uint32_t)hl_seq_diff(c->next_seq, k->ring_low) > KEEP_HORIZON ?
			     horizon : k->ring_low;
		if (hl_seq_diff(r, from) < 0)
			from = r;
	}
	/* but nothing up to the latest completed in-network whose input is
	 * not held: lost (too large, INCA_KEEP=0, INCA_KEEP_MB), dropped as
	 * every rank completed it, or never kept */
	if (k->lost_any && (uint32_t)hl_seq_diff(c->next_seq, k->lost) <= KEEP_HORIZON &&
	    hl_seq_diff(k->lost + 1, from) > 0)
		from = k->lost + 1;
	return from;
}

void hl_keep_drop_before(struct inca_comm *c, uint32_t from)
{
	struct hl_keep *k = &c->keep;

	for (unsigned i = 0; i < k->n;)
		if (hl_seq_diff(k->kept[i].seq, from) < 0)
			drop(k, i);      /* every rank completed it */
		else
			i++;
}
