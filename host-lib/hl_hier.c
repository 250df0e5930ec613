/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Many ranks per host (docs/hostlib.md, "Several ranks per host"): the
 * ranks of one host reduce among themselves first, through shared memory
 * (hl_team.c), and only their leader (local rank 0) takes part in the
 * network, as one member of a communicator of the hosts' leaders; then the
 * leader hands the result back. Every collective is three phases:
 *   up    the local ranks' contributions to the leader (reduced in local
 *         rank order with aggregation/'s kernels, or gathered)
 *   net   the leaders' collective (in-network, or their host ring)
 *   down  the result, and the leader's verdict, to the local ranks
 * A host's link then carries one copy of the vector per direction whatever
 * the ranks per host. fp16 and bf16 are reduced locally into fp32 and the
 * leaders reduce those fp32 sums, rounded once at the end, as the switch
 * does for one rank per host.
 *
 * Rails (INCA_HIER=rails): every local rank has a communicator of its own
 * across the hosts, and a collective of at least INCA_RAIL_MIN_BYTES (the
 * vector; the whole input of a reduce-scatter, the whole output of an
 * allgather) is split over them, every local rank carrying its share
 * through the network on its rail; the P rails run in parallel, each from
 * its own process and socket (and NIC, where a host has several), and a
 * host's link still carries one copy. Two ways to split:
 *   by steps (all-reduce, reduce, bcast): local rank l takes steps l,
 *     l + P, l + 2P, ... of the up phase (reducing every local rank's chunk
 *     of them, in local rank order, or taking the root's), carries them,
 *     packed, on its rail (all-reduce, reduce to the root's host, bcast
 *     from it), and publishes their results in the down phase; every rank
 *     reads the others'
 *   by blocks (reduce-scatter, allgather): rail l carries the blocks of
 *     the ranks of local rank l, one a host in host order, packed: its
 *     segment. A reduce-scatter reduces them inside the host (its up
 *     steps: rail k mod P's bytes of its segment, in order) and the rail's
 *     reduce-scatter leaves every rank its own block, with nothing to hand
 *     down; an allgather's rail gathers them from its ranks, and its down
 *     steps hand them to the host's other ranks
 * Every rail numbers every collective (one it does not carry takes its
 * number: hl_coll_skip), so that the manager, which plans a job's rails as
 * one, moves them all at the same collective; every rail's verdict reaches
 * every local rank (a down step of its own at least).
 *
 * Collectives in flight run their up and down phases in start order (the
 * same on every rank, so step numbers agree); the net phases of several
 * overlap on the leaders' communicator (and on each rail).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "hl_priv.h"
#include "hl_team.h"

enum hphase { HP_UP, HP_NET, HP_DOWN, HP_DONE };
enum upmode { UP_REDUCE, UP_GATHER, UP_ONE, UP_NONE };

struct hl_hreq {
	struct inca_comm *c;
	struct hl_coll_args a;
	enum hphase phase;
	double deadline_us;
	/* up: each rank's up_len bytes from up_src; at the leader into up_dst
	 * (UP_REDUCE: the accumulator; UP_GATHER: local rank l's at
	 * l x up_len; UP_ONE: local rank up_from's only) */
	enum upmode upm;
	const uint8_t *up_src;
	size_t up_len;
	int up_from;
	uint8_t *up_dst;
	uint32_t up0, upn;
	uint32_t kw, k;            /* the phase's next step to write (up: my chunk;
				      down: publish) and to read (up: take; down:
				      read the owner's): the writer runs ahead */
	int who;                   /* a step's owner: the next local rank it takes */
	/* net (leader) */
	inca_request_t *ireq;
	bool net_started;
	bool skip;                 /* rails: my rail does not carry it: its number only */
	uint64_t fallbacks0;
	/* down: down_len bytes from down_src (leader); a local rank keeps
	 * [copy_off, copy_off + copy_len) of them at down_dst */
	const uint8_t *down_src;
	size_t down_len, copy_off, copy_len;
	uint8_t *down_dst;
	uint32_t down0, downn;
	/* buffers this collective owns */
	uint8_t *acc, *tmp;
	size_t acc_cap, tmp_cap;
	int rc;
	bool ring;
	/* rails: every local rank reduces the steps it owns (k mod P) and
	 * carries them, packed in acc (mine bytes of them), on its rail; split
	 * by blocks (blk: a rank's block, in bytes), the up or the down phase
	 * moves the rails' segments (ublk, dblk) */
	bool rails;
	size_t mine;
	size_t blk;
	bool ublk, dblk;
	uint8_t *chunk;                /* blocked up steps: my bytes of one, gathered */
	inca_comm_t *net;              /* the communicator of the net phase */
	char msg[200];
};

struct hl_hier {
	struct hl_layout L;
	struct hl_team *team;          /* NULL: alone on this host */
	inca_comm_t *inner;            /* the leaders' (leader, several hosts) */
	inca_comm_t *rail;             /* rails: this local rank's (the leader's: inner) */
	bool rails;                    /* INCA_HIER=rails, and every local rank has one */
	size_t rail_min;               /* all-reduces of this many bytes take the rails */
	uint32_t up_next, down_next;   /* the next steps to hand out */
	struct hl_hreq *q[HL_MAX_INFLIGHT];   /* not completed by the caller */
	unsigned nq;
	int broken;                    /* the team failed: every call fails so */
	char broken_msg[256];
	double next_check_us;          /* polling the network: the team's next look */
	uint8_t *spare;                /* a finished collective's buffer */
	size_t spare_cap;
};

/* ---- the layout ---- */

static const char *env_nonempty(const char *name)
{
	const char *s = getenv(name);

	return s && *s ? s : NULL;
}

/* A number in the environment (hl_parse_num): 0, or -1 when unset or not one. */
static int env_num(const char *name, long *v)
{
	uint64_t u;

	if (hl_parse_num(getenv(name), INT_MAX, &u))
		return -1;
	*v = (long)u;
	return 0;
}

void hl_layout_free(struct hl_layout *L)
{
	free(L->first);
	L->first = NULL;
}

/* The host of rank (L->first: each host's first rank). */
static int layout_host(const struct hl_layout *L, int rank)
{
	int lo = 0, hi = L->nhosts - 1;

	while (lo < hi) {
		int mid = (lo + hi + 1) / 2;
		if (L->first[mid] <= rank)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

/* counts[nhosts] in rank order: fill L for rank */
static int layout_from_counts(struct hl_layout *L, const int *counts, int nhosts, int size,
			      int rank, char *err, size_t errlen)
{
	int sum = 0;

	L->first = calloc((size_t)nhosts + 1, sizeof(int));
	if (!L->first) {
		snprintf(err, errlen, "out of memory");
		return INCA_ERR_NOMEM;
	}
	L->nhosts = nhosts;
	L->maxp = 0;
	L->uniform = true;
	for (int h = 0; h < nhosts; h++) {
		if (counts[h] < 1 || counts[h] > HL_TEAM_MAX) {
			snprintf(err, errlen, "host %d has %d ranks: need 1..%d", h, counts[h],
				 HL_TEAM_MAX);
			hl_layout_free(L);
			return INCA_ERR_CONFIG;
		}
		L->first[h] = sum;
		sum += counts[h];
		if (counts[h] != counts[0])
			L->uniform = false;
		if (counts[h] > L->maxp)
			L->maxp = counts[h];
	}
	L->first[nhosts] = sum;
	if (sum != size) {
		snprintf(err, errlen, "the layout has %d ranks, the job %d", sum, size);
		hl_layout_free(L);
		return INCA_ERR_CONFIG;
	}
	L->host = layout_host(L, rank);
	L->lrank = rank - L->first[L->host];
	L->lsize = counts[L->host];
	return 0;
}

/* "3,1,2,2" */
static int parse_counts(const char *s, int **counts, int *n, char *err, size_t errlen)
{
	int cap = 0;

	*counts = NULL;
	*n = 0;
	for (const char *p = s;;) {
		char *end;
		errno = 0;
		long v = strtol(p, &end, 10);
		if (end == p || errno || v < 1 || v > HL_TEAM_MAX || (*end && *end != ',')) {
			snprintf(err, errlen, "layout '%.60s': expected ranks per host in rank "
				 "order, like 2,2,2,2 (each 1..%d)", s, HL_TEAM_MAX);
			free(*counts);
			return INCA_ERR_CONFIG;
		}
		if (*n == cap) {
			int *nc = realloc(*counts, sizeof(int) * (size_t)(cap = cap ? cap * 2 : 8));
			if (!nc) {
				free(*counts);
				snprintf(err, errlen, "out of memory");
				return INCA_ERR_NOMEM;
			}
			*counts = nc;
		}
		(*counts)[(*n)++] = (int)v;
		if (!*end)
			return 0;
		p = end + 1;
	}
}

/* The ranks per host the launcher exported, when they describe this job:
 * torchrun (LOCAL_WORLD_SIZE, with WORLD_SIZE and RANK), Open MPI
 * (OMPI_COMM_WORLD_LOCAL_SIZE) and MPICH's Hydra (MPI_LOCALNRANKS). 0:
 * none that applies. */
static int launcher_local(int size, int rank, long *lrank, const char **from)
{
	static const struct { const char *lsize, *lrank, *wsize, *wrank; } src[] = {
		{ "INCA_LOCAL_SIZE", "INCA_LOCAL_RANK", NULL, NULL },
		{ "LOCAL_WORLD_SIZE", "LOCAL_RANK", "WORLD_SIZE", "RANK" },
		{ "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
		  "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK" },
		{ "MPI_LOCALNRANKS", "MPI_LOCALRANKID", "PMI_SIZE", "PMI_RANK" },
	};
	long v, w;

	for (size_t i = 0; i < sizeof(src) / sizeof(src[0]); i++) {
		if (env_num(src[i].lsize, &v) || v < 1)
			continue;
		/* the launcher's world is this communicator's */
		if (src[i].wsize && (env_num(src[i].wsize, &w) || w != size ||
				     env_num(src[i].wrank, &w) || w != rank))
			continue;
		if (env_num(src[i].lrank, lrank))
			*lrank = -1;
		*from = src[i].lsize;
		return (int)v;
	}
	return 0;
}

int hl_layout_resolve(const struct inca_comm_attr *attr, const struct hl_group_desc *g,
		      struct hl_layout *L, char *err, size_t errlen)
{
	const char *s = attr->layout ? attr->layout : env_nonempty("INCA_LAYOUT");
	int *counts = NULL, n = 0, rc, size = attr->size, rank = attr->rank;
	long lrank = -1;
	int lsize = 0;
	const char *from = "";

	memset(L, 0, sizeof(*L));
	if (g && g->nmembers == size) {
		/* a static group of one member per rank: every rank in the
		 * network, whatever the launcher says */
		if (s || attr->local_size > 1)
			HL_INFO("rank %d: the static group has a member per rank: the layout "
				"(%s) is not used", rank, s ? s : "local_size");
		return 0;
	}
	if (s) {
		rc = parse_counts(s, &counts, &n, err, errlen);
		if (rc)
			return rc;
		from = attr->layout ? "the layout" : "INCA_LAYOUT";
	} else if (g && g->nmembers < size) {
		/* a static group of the hosts' leaders */
		bool all = true, any = false;
		for (int i = 0; i < g->nmembers; i++) {
			all &= g->members[i].nranks > 0;
			any |= g->members[i].nranks > 0;
		}
		if (any && !all) {
			snprintf(err, errlen, "members: give \"ranks\" for every member or none");
			return INCA_ERR_CONFIG;
		}
		if (!any && size % g->nmembers) {
			snprintf(err, errlen, "the group has %d members but size is %d (a group "
				 "of hosts: give each member its \"ranks\", or INCA_LAYOUT)",
				 g->nmembers, size);
			return INCA_ERR_CONFIG;
		}
		counts = malloc(sizeof(int) * (size_t)g->nmembers);
		if (!counts) {
			snprintf(err, errlen, "out of memory");
			return INCA_ERR_NOMEM;
		}
		n = g->nmembers;
		for (int i = 0; i < n; i++)
			counts[i] = any ? g->members[i].nranks : size / g->nmembers;
		from = "the group's members";
	} else {
		lsize = attr->local_size;
		lrank = attr->local_size ? attr->local_rank : -1;
		from = "local_size";
		if (!lsize)
			lsize = launcher_local(size, rank, &lrank, &from);
		if (lsize <= 1)
			return 0;   /* one rank per host, or nothing said */
		if (size % lsize || (lrank >= 0 && lrank != rank % lsize)) {
			HL_INFO("rank %d: %s says %d ranks per host (local rank %ld), not a "
				"layout by host in rank order of this job's %d ranks: one member "
				"per rank", rank, from, lsize, lrank, size);
			return 0;
		}
		n = size / lsize;
		counts = malloc(sizeof(int) * (size_t)n);
		if (!counts) {
			snprintf(err, errlen, "out of memory");
			return INCA_ERR_NOMEM;
		}
		for (int i = 0; i < n; i++)
			counts[i] = lsize;
	}
	rc = layout_from_counts(L, counts, n, size, rank, err, errlen);
	free(counts);
	if (rc) {
		char tmp[256];
		snprintf(tmp, sizeof(tmp), "%s", err);
		snprintf(err, errlen, "%s: %s", from, tmp);
	}
	return rc;
}

/* ---- the requests ---- */

static uint32_t nsteps(size_t len)
{
	return len ? (uint32_t)((len + HL_TEAM_CHUNK - 1) / HL_TEAM_CHUNK) : 1;
}

static bool is_leader(const struct hl_hier *h)
{
	return h->L.lrank == 0;
}

static int host_of(const struct hl_hier *h, int rank)
{
	return layout_host(&h->L, rank);
}

/* this host's leader (local rank 0) */
static int leader_rank(const struct hl_hier *h)
{
	return h->L.first[h->L.host];
}

/* The local rank that takes step k of r's up phase and publishes its down
 * step: the leader, or with rails local rank k mod P. */
static int step_owner(const struct hl_hier *h, const struct hl_hreq *r, uint32_t k)
{
	return r->rails ? (int)(k % (uint32_t)h->L.lsize) : 0;
}

/* Where step k's bytes are in its owner's buffers: with rails its steps
 * packed one after the other. */
static size_t step_at(const struct hl_hier *h, const struct hl_hreq *r, uint32_t k)
{
	return (size_t)(r->rails ? k / (uint32_t)h->L.lsize : k) * HL_TEAM_CHUNK;
}

/* the bytes of step k of a phase moving total bytes (0 for an empty
 * phase's one step) */
static size_t step_len(size_t total, uint32_t k)
{
	size_t off = (size_t)k * HL_TEAM_CHUNK;

	return total > off ? (total - off < HL_TEAM_CHUNK ? total - off : HL_TEAM_CHUNK) : 0;
}

/* The bytes of step k of r's up (down: false) phase. Split by blocks,
 * step k is rail k mod P's bytes from (k / P) x HL_TEAM_CHUNK of its
 * segment (H blocks). */
static size_t phase_len(const struct hl_hier *h, const struct hl_hreq *r, bool up, uint32_t k)
{
	if (up ? r->ublk : r->dblk)
		return step_len(r->blk * (size_t)h->L.nhosts, k / (uint32_t)h->L.lsize);
	return step_len(up ? r->up_len : r->down_len, k);
}

/* Split by blocks: copy len bytes from offset p of rail l's segment (seg
 * points at them) to the caller's buffer of every rank's blocks (to_user),
 * or from it. The block of local rank l of host hh is rank hh x P + l's. */
static void seg_copy(const struct hl_hier *h, const struct hl_hreq *r, int l, size_t p,
		     uint8_t *seg, uint8_t *user, size_t len, bool to_user)
{
	size_t P = (size_t)h->L.lsize;

	while (len) {
		size_t hh = p / r->blk, o = p % r->blk, n = r->blk - o < len ? r->blk - o : len;
		uint8_t *u = user + (hh * P + (size_t)l) * r->blk + o;
		if (to_user)
			memcpy(u, seg, n);
		else
			memcpy(seg, u, n);
		seg += n;
		p += n;
		len -= n;
	}
}

/* Split by steps: the bytes of a phase of total bytes that this local
 * rank's steps (k mod P) hold */
static size_t rail_share(const struct hl_hier *h, size_t total)
{
	size_t m = 0;

	for (uint32_t k = (uint32_t)h->L.lrank; k < nsteps(total); k += (uint32_t)h->L.lsize)
		m += step_len(total, k);
	return m;
}

/* A buffer of n bytes: the spare when it is large enough (its pages in
 * memory already), else a new one. */
static uint8_t *take_buf(struct hl_hier *h, size_t n, size_t *cap)
{
	uint8_t *p;

	if (h->spare && h->spare_cap >= n) {
		p = h->spare;
		*cap = h->spare_cap;
		h->spare = NULL;
		h->spare_cap = 0;
		return p;
	}
	p = malloc(n ? n : 1);
	*cap = n;
	return p;
}

static void give_buf(struct hl_hier *h, uint8_t *p, size_t cap)
{
	if (!p)
		return;
	if (cap > h->spare_cap) {
		free(h->spare);
		h->spare = p;
		h->spare_cap = cap;
	} else {
		free(p);
	}
}

static void req_free(struct hl_hier *h, struct hl_hreq *r)
{
	give_buf(h, r->acc, r->acc_cap);
	give_buf(h, r->tmp, r->tmp_cap);
	free(r->chunk);
	free(r);
}

/* the dtype the leaders reduce in: the accumulator's */
static enum agg_dtype net_dtype(enum agg_dtype dt)
{
	return agg_dtype_acc_size(dt) == agg_dtype_size(dt) ? dt : AGG_DTYPE_FP32;
}

/* Set the phases up (hl_hier_start). */
static int plan_req(struct inca_comm *c, struct hl_hreq *r)
{
	struct hl_hier *h = c->hier;
	const struct hl_coll_args *a = &r->a;
	size_t es = agg_dtype_size(a->dtype), as = agg_dtype_acc_size(a->dtype);
	size_t n = a->count, N = (size_t)c->size, P = (size_t)h->L.lsize;
	size_t H = (size_t)h->L.nhosts;
	bool lead = is_leader(h);
	uint8_t *out = a->recvbuf;
	const uint8_t *in = a->sendbuf == INCA_IN_PLACE ? out : a->sendbuf;
	int hr;

	r->upm = UP_REDUCE;
	r->up_from = -1;
	/* the rails take what is large enough, of every collective below:
	 * the vector, or the whole input (reduce-scatter) or output
	 * (allgather) */
	size_t size = a->coll == AGG_COLL_REDUCE_SCATTER || a->coll == AGG_COLL_ALLGATHER ?
		      N * n * es : n * es;
	r->rails = h->rails && n && size >= h->rail_min;
	switch (a->coll) {
	case AGG_COLL_ALLREDUCE:
		r->up_src = in;
		r->up_len = n * es;
		if (r->rails) {
			r->mine = rail_share(h, n * es);
			r->up_dst = r->acc = take_buf(h, r->mine / es * as, &r->acc_cap);
			if (!r->acc || (as != es && !(r->tmp = take_buf(h, r->mine, &r->tmp_cap))))
				return INCA_ERR_NOMEM;
			r->down_src = as != es ? r->tmp : r->acc;
		} else if (lead) {
			if (as == es) {
				r->up_dst = out;
			} else if (!(r->up_dst = r->acc = take_buf(h, n * as, &r->acc_cap))) {
				return INCA_ERR_NOMEM;
			}
			r->down_src = out;
		}
		r->down_len = n * es;
		r->down_dst = out;
		r->copy_len = n * es;
		break;
	case AGG_COLL_REDUCE:
		r->up_src = in;
		r->up_len = n * es;
		hr = host_of(h, a->root);
		if (r->rails) {
			/* my steps reduced, to the root's host on my rail; there
			 * every rank's steps to the root */
			r->mine = rail_share(h, n * es);
			r->up_dst = r->acc = take_buf(h, r->mine / es * as, &r->acc_cap);
			if (!r->acc || (as != es && hr == h->L.host &&
					!(r->tmp = take_buf(h, r->mine, &r->tmp_cap))))
				return INCA_ERR_NOMEM;
			if (hr == h->L.host) {
				r->down_src = as != es ? r->tmp : r->acc;
				r->down_len = n * es;
				if (c->rank == a->root) {
					r->down_dst = out;
					r->copy_len = n * es;
				}
			}
			break;
		}
		if (lead) {
			if (as == es && c->rank == a->root)
				r->up_dst = out;
			else if (!(r->up_dst = r->acc = take_buf(h, n * as, &r->acc_cap)))
				return INCA_ERR_NOMEM;
		}
		if (hr == h->L.host && a->root != leader_rank(h)) {
			/* the root is not its host's leader: it hands the result over */
			r->down_len = n * es;
			if (c->rank == a->root) {
				r->down_dst = out;
				r->copy_len = n * es;
			}
			if (lead && !(r->tmp = take_buf(h, n * es, &r->tmp_cap)))
				return INCA_ERR_NOMEM;
			r->down_src = r->tmp;
		}
		break;
	case AGG_COLL_REDUCE_SCATTER:
		r->up_src = in;
		r->up_len = N * n * es;
		if (r->rails) {
			/* my segment reduced (the blocks of my rail's ranks), the
			 * rail's reduce-scatter leaves my block at its start */
			r->blk = n * es;
			r->ublk = true;
			r->mine = H * n * es;
			r->up_dst = r->acc = take_buf(h, H * n * as, &r->acc_cap);
			if (!r->acc || !(r->chunk = malloc(HL_TEAM_CHUNK)))
				return INCA_ERR_NOMEM;
			r->down_len = 0;
			break;
		}
		if (lead && !(r->up_dst = r->acc = take_buf(h, N * n * as, &r->acc_cap)))
			return INCA_ERR_NOMEM;
		if (lead && as != es && !(r->tmp = take_buf(h, P * n * es, &r->tmp_cap)))
			return INCA_ERR_NOMEM;
		r->down_len = P * n * es;
		r->down_dst = out;
		r->copy_off = (size_t)h->L.lrank * n * es;
		r->copy_len = n * es;
		break;
	case AGG_COLL_ALLGATHER:
		r->upm = UP_GATHER;
		r->up_src = a->sendbuf == INCA_IN_PLACE ? out + (size_t)c->rank * n * es : in;
		r->up_len = n * es;
		if (r->rails) {
			/* my rail gathers my block and its other ranks' into my
			 * segment; the down phase hands the segments round */
			r->upm = UP_NONE;
			r->blk = n * es;
			r->dblk = true;
			r->mine = H * n * es;
			r->down_src = r->acc = take_buf(h, r->mine, &r->acc_cap);
			if (!r->acc)
				return INCA_ERR_NOMEM;
			r->down_dst = out;
			break;
		}
		if (lead) {
			if (h->L.uniform) {
				r->up_dst = out + (size_t)leader_rank(h) * n * es;
			} else {
				size_t blk = (size_t)h->L.maxp * n * es;
				r->tmp = take_buf(h, blk * (1 + (size_t)h->L.nhosts), &r->tmp_cap);
				if (!r->tmp)
					return INCA_ERR_NOMEM;
				memset(r->tmp, 0, blk);
				r->up_dst = r->tmp;
			}
			r->down_src = out;
		}
		r->down_len = N * n * es;
		r->down_dst = out;
		r->copy_len = N * n * es;
		break;
	case AGG_COLL_BCAST:
		hr = host_of(h, a->root);
		r->upm = UP_NONE;
		if (r->rails) {
			/* my steps of the root's vector, from the root's host on
			 * my rail; every rank takes every rail's */
			r->mine = rail_share(h, n * es);
			if (!(r->acc = take_buf(h, r->mine, &r->acc_cap)))
				return INCA_ERR_NOMEM;
			if (hr == h->L.host) {
				r->upm = UP_ONE;
				r->up_from = a->root - h->L.first[hr];
				r->up_src = out;
				r->up_len = n * es;
				r->up_dst = r->acc;
			}
			r->down_src = r->acc;
			r->down_len = n * es;
			if (c->rank != a->root) {
				r->down_dst = out;
				r->copy_len = n * es;
			}
			break;
		}
		if (hr == h->L.host && a->root != leader_rank(h)) {
			r->upm = UP_ONE;
			r->up_from = a->root - h->L.first[hr];
			r->up_src = out;
			r->up_len = n * es;
			r->up_dst = out;
		}
		r->down_src = out;
		r->down_len = n * es;
		if (c->rank != a->root) {
			r->down_dst = out;
			r->copy_len = n * es;
		}
		break;
	default:
		return INCA_ERR_INVAL;
	}
	r->upn = r->upm == UP_NONE ? 0 : nsteps(r->up_len);
	r->downn = nsteps(r->down_len);
	if (r->ublk)
		r->upn = (uint32_t)P * nsteps(H * r->blk);
	if (r->dblk)
		r->downn = (uint32_t)P * nsteps(H * r->blk);
	/* every rail's verdict to every local rank: a down step each */
	if (r->rails && r->downn < P)
		r->downn = (uint32_t)P;
	return 0;
}

int hl_hier_start(struct inca_comm *c, const struct hl_coll_args *a, struct hl_hreq **out)
{
	struct hl_hier *h = c->hier;
	struct hl_hreq *r;
	int rc;

	if (h->broken)
		return hl_fail(c, h->broken, "%s", h->broken_msg);
	if (h->nq == HL_MAX_INFLIGHT)
		return hl_fail(c, INCA_ERR_BUSY, "%s: %d collectives in flight already",
			       hl_coll_name(a->coll), HL_MAX_INFLIGHT);
	r = calloc(1, sizeof(*r));
	if (!r)
		return hl_fail(c, INCA_ERR_NOMEM, "%s: out of memory", hl_coll_name(a->coll));
	r->c = c;
	r->a = *a;
	rc = plan_req(c, r);
	if (rc) {
		req_free(h, r);
		return hl_fail(c, rc, "%s: out of memory", hl_coll_name(a->coll));
	}
	/* the leader's local phase ends by the deadline, its network phase up
	 * to a deadline later: a local rank waits for its verdict that long,
	 * and 2 s more, so that it hears why; with rails every rank, the
	 * leader too, may wait so for another's rail */
	bool first = is_leader(h) && !h->rails;
	r->deadline_us = c->now_us(c) + (double)c->timeout_ms * 1000 * (first ? 1 : 2) +
			 (first ? 0 : 2e6);
	r->up0 = h->up_next;
	h->up_next += r->upn;
	r->down0 = h->down_next;
	h->down_next += r->downn;
	r->phase = r->upn ? HP_UP : is_leader(h) || h->rails ? HP_NET : HP_DOWN;
	h->q[h->nq++] = r;
	*out = r;
	return 0;
}

/* What a wait is for, when nothing can move. */
struct need {
	bool set;
	enum hl_team_stream st;
	int lrank;
	uint32_t n;
	unsigned count;                /* the waits found (the first is kept) */
};

/* The oldest collective's wait is the one to sleep on: a newer one's
 * counter may not move before the oldest is done. */
static void set_need(struct need *need, enum hl_team_stream st, int lrank, uint32_t n)
{
	if (!need->set)
		*need = (struct need){ true, st, lrank, n, 0 };
	need->count++;
}

static void leader_take(struct hl_hreq *r, int l, size_t off, size_t len, const uint8_t *src)
{
	const struct hl_coll_args *a = &r->a;

	switch (r->upm) {
	case UP_REDUCE: {
		size_t es = agg_dtype_size(a->dtype), as = agg_dtype_acc_size(a->dtype);
		uint8_t *acc = r->up_dst + off / es * as;
		if (l == 0) {
			if (acc != src)
				agg_acc_load(a->dtype, acc, src, len / es);
		} else {
			agg_acc_reduce(a->dtype, a->op, acc, src, len / es);
		}
		break;
	}
	case UP_GATHER:
		if (r->up_dst + (size_t)l * r->up_len + off != src)
			memcpy(r->up_dst + (size_t)l * r->up_len + off, src, len);
		break;
	case UP_ONE:
		if (l == r->up_from)
			memcpy(r->up_dst + off, src, len);
		break;
	case UP_NONE:
		break;
	}
}

static bool contributes(const struct hl_hreq *r, int l)
{
	return r->upm == UP_REDUCE || r->upm == UP_GATHER || (r->upm == UP_ONE && l == r->up_from);
}

static void after_up(struct hl_hier *h, struct hl_hreq *r)
{
	r->kw = r->k = 0;
	r->who = 0;
	r->phase = is_leader(h) || h->rails ? HP_NET : HP_DOWN;
}

/* Is every other local rank past step n - 1 of stream st? If not, need
 * names the first that is not. */
static bool others_reached(struct hl_hier *h, enum hl_team_stream st, uint32_t n,
			   struct need *need)
{
	for (int l = 0; l < h->L.lsize; l++)
		if (l != h->L.lrank && !hl_team_reached(h->team, st, l, n)) {
			set_need(need, st, l, n);
			return false;
		}
	return true;
}

/* Move the up phase as far as it goes without waiting, on two cursors:
 * this rank's chunks of the steps others own, written as far ahead as the
 * buffers allow (the writer's counter), and the steps it owns, every
 * rank's chunk taken in local rank order (the reader's counter). With
 * rails every rank does both; on one cursor the ranks took turns, one
 * waiting while the other reduced, a wake-up a step. */
static bool advance_up(struct hl_hier *h, struct hl_hreq *r, struct need *need)
{
	bool moved = false;
	int P = h->L.lsize, me = h->L.lrank;

	while (r->kw < r->upn) {
		uint32_t s = r->up0 + r->kw;
		size_t off = (size_t)r->kw * HL_TEAM_CHUNK, len = phase_len(h, r, true, r->kw);
		int own = step_owner(h, r, r->kw);
		if (own != me && contributes(r, me) && len) {
			/* my buffer of step s was an earlier step's: written
			 * again once every rank has taken that one */
			if (!others_reached(h, HL_TEAM_UP_READ, hl_team_reuse(s), need))
				break;
			uint8_t *b = hl_team_buf(h->team, HL_TEAM_UP, me, s);
			if (r->ublk)
				seg_copy(h, r, own, step_at(h, r, r->kw), b, (uint8_t *)r->up_src, len,
					 false);
			else
				memcpy(b, r->up_src + off, len);
		}
		if (h->team)
			hl_team_post_one(h->team, HL_TEAM_UP, s);
		r->kw++;
		moved = true;
	}
	while (r->k < r->upn) {
		uint32_t s = r->up0 + r->k;
		size_t off = (size_t)r->k * HL_TEAM_CHUNK, len = phase_len(h, r, true, r->k);
		if (step_owner(h, r, r->k) == me) {
			/* mine: every rank's chunk, in local rank order */
			size_t at = step_at(h, r, r->k);
			for (; r->who < P; r->who++) {
				int l = r->who;
				if (l == me) {
					const uint8_t *src = r->chunk;
					if (contributes(r, l) && len && r->ublk)
						seg_copy(h, r, me, at, r->chunk, (uint8_t *)r->up_src,
							 len, false);
					else if (!r->ublk)
						src = r->up_src + off;
					if (contributes(r, l) && len)
						leader_take(r, l, at, len, src);
					continue;
				}
				if (!hl_team_reached(h->team, HL_TEAM_UP, l, s + 1)) {
					set_need(need, HL_TEAM_UP, l, s + 1);
					return moved;
				}
				if (contributes(r, l) && len)
					leader_take(r, l, at, len,
						    hl_team_buf(h->team, HL_TEAM_UP, l, s));
			}
			r->who = 0;
		}
		if (h->team)
			hl_team_post_one(h->team, HL_TEAM_UP_READ, s);
		r->c->stats.local_bytes += len;
		r->k++;
		moved = true;
	}
	if (r->kw < r->upn)
		return moved;
	after_up(h, r);
	return true;
}

static void net_fail(struct hl_hreq *r, int rc, const char *what)
{
	r->rc = rc;
	snprintf(r->msg, sizeof(r->msg), "%s (%s): %.150s", what,
		 r->rails ? "this local rank's rail" : "the hosts' leaders",
		 inca_comm_errmsg(r->net));
}

static void team_break(struct hl_hier *h, int rc, const char *why);

/* Start the leaders' collective. */
static void net_start(struct hl_hier *h, struct hl_hreq *r)
{
	const struct hl_coll_args *a = &r->a;
	inca_comm_t *in = r->net = r->rails ? h->rail : h->inner;
	enum agg_dtype nd = net_dtype(a->dtype);
	size_t n = a->count, es = agg_dtype_size(a->dtype);
	int rc = 0, hr;
	struct inca_stats st;

	r->net_started = true;
	/* with rails every rail numbers every collective of the job, in
	 * start order, whether it carries it or not: the manager moves all
	 * the rails at one collective */
	if (r->rails ? !r->mine : h->rails && !is_leader(h)) {
		r->skip = true;
		r->net = h->rail;        /* the leaders' communicator at the leader */
		if (h->rail && (rc = hl_coll_skip(h->rail))) {
			/* this rail no longer numbers as the others (its plan
			 * broken, or no cut in time): every later call of the
			 * host would disagree; the host's ranks fail together */
			char why[200];
			snprintf(why, sizeof(why), "local rank %d's rail: %.150s", h->L.lrank,
				 inca_comm_errmsg(h->rail));
			team_break(h, rc, why);
		}
		return;
	}
	if (!in) {
		/* one host: the local phase was everything (an allgather's
		 * segment is my own block) */
		if (r->rails && a->coll == AGG_COLL_ALLGATHER)
			memcpy(r->acc, r->up_src, r->blk);
		return;
	}
	if (!inca_comm_stats(in, &st))
		r->fallbacks0 = st.fallbacks;
	switch (a->coll) {
	case AGG_COLL_ALLREDUCE:
		if (r->rails) {
			rc = inca_iallreduce(in, INCA_IN_PLACE, r->acc, r->mine / es,
					     (inca_dtype_t)nd, (inca_op_t)a->op, &r->ireq);
			break;
		}
		rc = inca_iallreduce(in, INCA_IN_PLACE, r->up_dst, n, (inca_dtype_t)nd,
				     (inca_op_t)a->op, &r->ireq);
		break;
	case AGG_COLL_REDUCE:
		hr = host_of(h, a->root);
		if (r->rails) {
			rc = inca_ireduce(in, hr == h->L.host ? INCA_IN_PLACE : r->acc,
					  hr == h->L.host ? r->acc : NULL, r->mine / es,
					  (inca_dtype_t)nd, (inca_op_t)a->op, hr, &r->ireq);
			break;
		}
		rc = inca_ireduce(in, hr == h->L.host ? INCA_IN_PLACE : r->up_dst,
				  hr == h->L.host ? r->up_dst : NULL, n, (inca_dtype_t)nd,
				  (inca_op_t)a->op, hr, &r->ireq);
		break;
	case AGG_COLL_REDUCE_SCATTER:
		if (r->rails)
			rc = inca_ireduce_scatter(in, INCA_IN_PLACE, r->acc, n, (inca_dtype_t)nd,
						  (inca_op_t)a->op, &r->ireq);
		else if (h->L.uniform)
			rc = inca_ireduce_scatter(in, INCA_IN_PLACE, r->up_dst,
						  (size_t)h->L.lsize * n, (inca_dtype_t)nd,
						  (inca_op_t)a->op, &r->ireq);
		else
			rc = inca_iallreduce(in, INCA_IN_PLACE, r->up_dst,
					     (size_t)r->c->size * n, (inca_dtype_t)nd,
					     (inca_op_t)a->op, &r->ireq);
		break;
	case AGG_COLL_ALLGATHER:
		if (r->rails)
			rc = inca_iallgather(in, r->up_src, r->acc, n, (inca_dtype_t)a->dtype,
					     &r->ireq);
		else if (h->L.uniform)
			rc = inca_iallgather(in, INCA_IN_PLACE, a->recvbuf,
					     (size_t)h->L.lsize * n, (inca_dtype_t)a->dtype,
					     &r->ireq);
		else
			rc = inca_iallgather(in, r->tmp,
					     r->tmp + (size_t)h->L.maxp * n * es,
					     (size_t)h->L.maxp * n, (inca_dtype_t)a->dtype,
					     &r->ireq);
		break;
	case AGG_COLL_BCAST:
		if (r->rails) {
			rc = inca_ibcast(in, r->acc, r->mine / es, (inca_dtype_t)a->dtype,
					 host_of(h, a->root), &r->ireq);
			break;
		}
		rc = inca_ibcast(in, a->recvbuf, n, (inca_dtype_t)a->dtype, host_of(h, a->root),
				 &r->ireq);
		break;
	default:
		rc = INCA_ERR_INVAL;
	}
	if (rc)
		net_fail(r, rc, hl_coll_name(a->coll));
}

/* The leaders' collective is done: the result where the down phase and
 * the leader's caller want it. */
static void net_done(struct hl_hier *h, struct hl_hreq *r)
{
	const struct hl_coll_args *a = &r->a;
	size_t n = a->count, es = agg_dtype_size(a->dtype), as = agg_dtype_acc_size(a->dtype);
	uint8_t *out = a->recvbuf;
	struct inca_stats st;

	if (r->skip)
		return;   /* nothing ran: the verdict is the leader's */
	if (r->net && !inca_comm_stats(r->net, &st) && st.fallbacks > r->fallbacks0)
		r->ring = true;
	if (r->rc)
		return;
	switch (a->coll) {
	case AGG_COLL_ALLREDUCE:
		if (r->rails) {
			if (as != es)
				agg_acc_store(a->dtype, r->tmp, r->acc, r->mine / es);
			break;
		}
		if (r->up_dst != out)
			agg_acc_store(a->dtype, out, r->up_dst, n);
		break;
	case AGG_COLL_REDUCE:
		if (host_of(h, a->root) != h->L.host)
			break;
		if (r->rails) {
			if (as != es)
				agg_acc_store(a->dtype, r->tmp, r->acc, r->mine / es);
			break;
		}
		if (r->c->rank == a->root) {
			if (r->up_dst != out)
				agg_acc_store(a->dtype, out, r->up_dst, n);
		} else {
			agg_acc_store(a->dtype, r->tmp, r->up_dst, n);
		}
		break;
	case AGG_COLL_REDUCE_SCATTER: {
		size_t P = (size_t)h->L.lsize;
		if (r->rails) {
			/* my block, at the start of my segment */
			if (as != es)
				agg_acc_store(a->dtype, out, r->acc, n);
			else
				memcpy(out, r->acc, n * es);
			break;
		}
		uint8_t *blk = r->up_dst + (h->L.uniform ? 0 : (size_t)leader_rank(h) * n * as);
		if (as != es) {
			agg_acc_store(a->dtype, r->tmp, blk, P * n);
			blk = r->tmp;
		}
		r->down_src = blk;
		memmove(out, blk, n * es);
		break;
	}
	case AGG_COLL_ALLGATHER:
		if (!h->L.uniform) {
			const uint8_t *all = r->tmp + (size_t)h->L.maxp * n * es;
			for (int hh = 0; hh < h->L.nhosts; hh++)
				for (int l = 0; l < h->L.first[hh + 1] - h->L.first[hh]; l++)
					memcpy(out + (size_t)(h->L.first[hh] + l) * n * es,
					       all + ((size_t)hh * h->L.maxp + l) * n * es, n * es);
		}
		break;
	default:
		break;
	}
}

static bool advance_net(struct hl_hier *h, struct hl_hreq *r, unsigned wait_us)
{
	int done = 1, rc;

	if (!r->net_started) {
		net_start(h, r);
		if (r->ireq)
			wait_us = 0;
	}
	if (r->ireq) {
		rc = inca_test_timeout(r->ireq, wait_us, &done);
		if (!done)
			return false;
		r->ireq = NULL;
		if (rc)
			net_fail(r, rc, hl_coll_name(r->a.coll));
	}
	net_done(h, r);
	r->phase = HP_DOWN;
	r->kw = r->k = 0;
	return true;
}

/* The down phase on two cursors, as the up phase: the steps this rank
 * owns published as far ahead as the buffers allow (the writer's
 * counter), the others' read in order (the reader's). */
static bool advance_down(struct hl_hier *h, struct hl_hreq *r, struct need *need)
{
	bool moved = false;
	int me = h->L.lrank;

	if (!h->team) {
		r->phase = HP_DONE;
		return true;
	}
	while (r->kw < r->downn) {
		uint32_t s = r->down0 + r->kw;
		size_t off = (size_t)r->kw * HL_TEAM_CHUNK, len = phase_len(h, r, false, r->kw);
		if (step_owner(h, r, r->kw) == me) {
			/* my down buffer of step s was an earlier step's: free
			 * once every local rank has read that one; its note,
			 * the team's one for the step, once this rank has too
			 * (with rails another rank may have owned that step:
			 * the reader below moves on without waiting for this) */
			if (!hl_team_reached(h->team, HL_TEAM_DOWN_READ, me, hl_team_reuse(s)) ||
			    !others_reached(h, HL_TEAM_DOWN_READ, hl_team_reuse(s), need))
				break;
			struct hl_team_note *nt = hl_team_note(h->team, s);
			nt->rc = r->rc;
			nt->flags = r->ring ? HL_TEAM_NOTE_RING : 0;
			snprintf(nt->msg, sizeof(nt->msg), "%s", r->rc ? r->msg : "");
			if (!r->rc && len) {
				size_t at = step_at(h, r, r->kw);
				const uint8_t *src = r->down_src + at;
				memcpy(hl_team_buf(h->team, HL_TEAM_DOWN, me, s), src, len);
				if (r->dblk)
					seg_copy(h, r, me, at, (uint8_t *)src, r->down_dst, len, true);
				else if (r->rails && r->down_dst)
					memcpy(r->down_dst + off, src, len);
			}
		}
		hl_team_post_one(h->team, HL_TEAM_DOWN, s);
		r->kw++;
		moved = true;
	}
	while (r->k < r->downn) {
		uint32_t s = r->down0 + r->k;
		size_t off = (size_t)r->k * HL_TEAM_CHUNK, len = phase_len(h, r, false, r->k);
		int own = step_owner(h, r, r->k);
		if (own != me) {
			if (!hl_team_reached(h->team, HL_TEAM_DOWN, own, s + 1)) {
				set_need(need, HL_TEAM_DOWN, own, s + 1);
				return moved;
			}
			const struct hl_team_note *nt = hl_team_note(h->team, s);
			if (nt->rc && !r->rc) {
				r->rc = nt->rc;
				snprintf(r->msg, sizeof(r->msg), "%.180s", nt->msg);
			}
			if (nt->flags & HL_TEAM_NOTE_RING)
				r->ring = true;
			if (r->dblk) {
				if (!r->rc && len)
					seg_copy(h, r, own, step_at(h, r, r->k),
						 hl_team_buf(h->team, HL_TEAM_DOWN, own, s),
						 r->down_dst, len, true);
			} else {
				/* the part of [off, off + len) this rank keeps */
				size_t lo = off > r->copy_off ? off : r->copy_off;
				size_t hi = off + len < r->copy_off + r->copy_len ? off + len :
					    r->copy_off + r->copy_len;
				if (!r->rc && r->down_dst && hi > lo)
					memcpy(r->down_dst + (lo - r->copy_off),
					       hl_team_buf(h->team, HL_TEAM_DOWN, own, s) + (lo - off),
					       hi - lo);
			}
		}
		hl_team_post_one(h->team, HL_TEAM_DOWN_READ, s);
		r->c->stats.local_bytes += len;
		r->k++;
		moved = true;
	}
	if (r->kw < r->downn)
		return moved;
	r->phase = HP_DONE;
	return true;
}

/* The team failed (a local rank gone, a deadline): every collective in
 * flight fails, and every later call. */
static void team_break(struct hl_hier *h, int rc, const char *why)
{
	h->broken = rc;
	snprintf(h->broken_msg, sizeof(h->broken_msg), "the ranks of this host can no longer "
		 "work together: %.190s", why);
	hl_team_break(h->team, why);
	for (unsigned i = 0; i < h->nq; i++) {
		struct hl_hreq *r = h->q[i];
		if (r->phase == HP_DONE)
			continue;
		r->phase = HP_DONE;
		if (!r->rc) {
			r->rc = rc;
			snprintf(r->msg, sizeof(r->msg), "%.199s", h->broken_msg);
		}
	}
}

/* One pass over the collectives in flight, in start order: up phases one
 * after the other, the leaders' collectives started in that order (the
 * same on every leader) and progressed through the oldest, down phases in
 * order. *net: the oldest whose leaders' collective is in flight. */
static bool pass(struct hl_hier *h, struct need *need, struct hl_hreq **net)
{
	bool moved = false, up_free = true, net_free = true, down_free = true;

	*net = NULL;
	for (unsigned i = 0; i < h->nq; i++) {
		struct hl_hreq *r = h->q[i];
		if (r->phase == HP_UP && up_free)
			moved |= advance_up(h, r, need);
		if (r->phase == HP_UP)
			up_free = false;
		if (r->phase == HP_NET && net_free) {
			if (!r->net_started) {
				net_start(h, r);
				moved = true;
			}
			if (r->ireq && !*net)
				*net = r;
			else if (!r->ireq)
				moved |= advance_net(h, r, 0);
		}
		if (r->phase == HP_UP || (r->phase == HP_NET && !r->net_started))
			net_free = false;
		if (r->phase == HP_DOWN && down_free)
			moved |= advance_down(h, r, need);
		if (r->phase != HP_DONE)
			down_free = false;
	}
	if (*net && advance_net(h, *net, 0)) {
		*net = NULL;
		moved = true;
	}
	return moved;
}

int hl_hier_progress(struct hl_hreq *target, double budget_us)
{
	struct inca_comm *c = target->c;
	struct hl_hier *h = c->hier;
	double end = c->now_us(c) + budget_us;

	for (;;) {
		struct need need = { 0 };
		struct hl_hreq *net;
		/* with rails a rank may wait on several ranks at once (another
		 * collective's owner, a writer of its own steps): it then
		 * sleeps until any rank posts */
		uint32_t posts = h->rails ? hl_team_posts(h->team) : 0;
		bool moved = pass(h, &need, &net);
		if (target->phase == HP_DONE)
			return 1;
		double now = c->now_us(c);
		for (unsigned i = 0; i < h->nq; i++)
			if (h->q[i]->phase != HP_DONE && now > h->q[i]->deadline_us &&
			    h->q[i]->phase != HP_NET) {
				team_break(h, INCA_ERR_TIMEOUT, "the deadline passed in the local "
					   "phase of a collective (a local rank or its leader late)");
				return 1;
			}
		if (moved)
			continue;
		if (now >= end)
			return 0;
		if (net) {
			/* the network has the first say; the team is looked at
			 * every 200 µs, its ranks' lives every 20 ms */
			double w = end - now < 200 ? end - now : 200;
			advance_net(h, net, need.set ? (unsigned)w : (unsigned)(end - now));
			if (need.set && h->team && now >= h->next_check_us) {
				char err[200];
				int rc = hl_team_check(h->team, need.lrank, err, sizeof(err));
				h->next_check_us = now + 20000;
				if (rc < 0) {
					team_break(h, rc, err);
					return 1;
				}
			}
			continue;
		}
		if (need.set) {
			char err[200];
			double until = end < now + 50000 ? end : now + 50000;
			int rc = h->rails && need.count > 1 ?
				 hl_team_wait_post(h->team, posts, need.lrank, until, err, sizeof(err)) :
				 hl_team_wait(h->team, need.st, need.lrank, need.n, until, err,
					      sizeof(err));
			if (rc < 0) {
				team_break(h, rc, err);
				return 1;
			}
		}
	}
}

int hl_hier_finish(struct hl_hreq *r)
{
	struct inca_comm *c = r->c;
	struct hl_hier *h = c->hier;
	int rc = r->rc;
	unsigned i;

	for (i = 0; i < h->nq && h->q[i] != r; i++)
		;
	if (i < h->nq) {
		memmove(&h->q[i], &h->q[i + 1], sizeof(h->q[0]) * (h->nq - i - 1));
		h->nq--;
	}
	if (rc) {
		hl_fail(c, rc, "%s: %s", hl_coll_name(r->a.coll), r->msg);
	} else {
		c->stats.collectives++;
		c->stats.hier_calls++;
		c->stats.rail_calls += r->rails;
		if (r->ring)
			c->stats.fallbacks++;
	}
	req_free(h, r);
	return rc;
}

/* ---- the communicator ---- */

/* Job-unique, the same on the ranks of one host. */
static void team_name(const struct inca_comm_attr *attr, const struct hl_group_desc *g,
		      const struct hl_layout *L, char *name, size_t len)
{
	char key[256];

	if (attr->manager_url && *attr->manager_url)
		snprintf(key, sizeof(key), "m|%s|%s", attr->manager_url, attr->job ? attr->job : "");
	else
		snprintf(key, sizeof(key), "s|%u|%u|%s", g ? g->switch_ip : 0,
			 g ? g->group_id : 0, attr->job ? attr->job : "");
	snprintf(name, len, "/inca-%u-%08x-%08x-h%d", (unsigned)getuid(), hl_fnv1a(key),
		 attr->epoch, L->host);
}

/* The communicator a local rank carries its share on (rails): local rank
 * 0's is the leaders' communicator; local rank l's is a static group's
 * rails[l - 1] or the manager's job "<job>.rail<l>", H members each. */
static int rail_create(const struct inca_comm_attr *attr, struct hl_hier *h,
		       struct hl_group_desc *g, const struct hl_transport_ops *tp,
		       inca_comm_t **out, char *err, size_t errlen)
{
	struct inca_comm_attr ia = *attr;
	struct hl_group_desc rg, *gp = NULL;
	char job[128];
	int rc;

	ia.rank = h->L.host;
	ia.size = h->L.nhosts;
	ia.hier = INCA_HIER_OFF;
	ia.layout = NULL;
	ia.local_size = 0;
	if (h->L.lrank > 0 && g) {
		rg = g->rails[h->L.lrank - 1];
		memset(&g->rails[h->L.lrank - 1], 0, sizeof(rg));
		gp = &rg;
	} else if (h->L.lrank > 0) {
		snprintf(job, sizeof(job), "%s.rail%d", attr->job ? attr->job : "", h->L.lrank);
		ia.job = job;
	}
	if (g && h->L.lrank == 0) {
		rg = *g;
		memset(g, 0, sizeof(*g));
		gp = &rg;
	}
	/* at the manager the rails are one job's: planned together */
	rc = hl_comm_create_rail(&ia, tp, gp, h->L.lrank, h->rails ? h->L.lsize : 0, out);
	if (rc)
		snprintf(err, errlen, "%s", inca_last_errmsg());
	return rc;
}

/* Rails (INCA_HIER=rails): as many ranks on every host, and a static
 * group names a rail for each local rank past the first. Otherwise the
 * leader scheme, said once; an error only for a static group without
 * its rails (the same file on every rank: they all say so). */
static int rails_setup(const struct inca_comm_attr *attr, struct hl_hier *h,
		       const struct hl_group_desc *g, char *err, size_t errlen)
{
	uint64_t v;
	const char *s = getenv("INCA_RAIL_MIN_BYTES");

	h->rail_min = 256 * 1024;
	if (attr->hier != INCA_HIER_RAILS)
		return 0;
	if (s && *s) {
		if (hl_parse_num(s, SIZE_MAX, &v)) {
			snprintf(err, errlen, "INCA_RAIL_MIN_BYTES: expected a number of bytes, "
				 "got '%s'", s);
			return INCA_ERR_CONFIG;
		}
		h->rail_min = (size_t)v;
	}
	if (!h->L.uniform) {
		if (attr->rank == 0)
			HL_WARN("INCA_HIER=rails needs as many ranks on every host: the hosts' "
				"leaders carry every call");
		return 0;
	}
	if (h->L.lsize < 2)
		return 0;
	if (g && h->L.nhosts > 1 && g->nrails < h->L.lsize - 1) {
		snprintf(err, errlen, "INCA_HIER=rails with %d ranks a host: the group lists %d "
			 "rails, it needs %d (\"rails\": one group for each local rank past the "
			 "first)", h->L.lsize, g->nrails, h->L.lsize - 1);
		return INCA_ERR_CONFIG;
	}
	for (int k = 0; g && h->L.nhosts > 1 && k < h->L.lsize - 1; k++)
		if (g->rails[k].nmembers != h->L.nhosts) {
			snprintf(err, errlen, "INCA_HIER=rails: rails[%d] has %d members, the "
				 "layout %d hosts (one member per host, in host order)", k,
				 g->rails[k].nmembers, h->L.nhosts);
			return INCA_ERR_CONFIG;
		}
	if (!g && h->L.nhosts > 1 && strlen(attr->job ? attr->job : "") + 8 > 47) {
		snprintf(err, errlen, "INCA_HIER=rails: the job name '%s' is too long for its "
			 "rails' jobs at the manager ('<job>.rail<l>', 47 characters at most)",
			 attr->job);
		return INCA_ERR_CONFIG;
	}
	h->rails = true;
	return 0;
}

/* Which calls take the rails must be the same on every host: each host's
 * ranks use its leader's INCA_RAIL_MIN_BYTES, and the hosts compare theirs
 * with one all-reduce on every rail (every rail numbers it, as any
 * collective). */
static int rails_agree(struct hl_hier *h, char *err, size_t errlen)
{
	int64_t v[2] = { (int64_t)(h->rail_min > INT64_MAX ? INT64_MAX : h->rail_min), 0 };
	v[1] = -v[0];
	int rc = inca_allreduce(h->rail, INCA_IN_PLACE, v, 2, INCA_INT64, INCA_MAX);

	if (rc) {
		snprintf(err, errlen, "local rank %d's rail, comparing INCA_RAIL_MIN_BYTES: %.150s",
			 h->L.lrank, inca_comm_errmsg(h->rail));
		return rc;
	}
	if (v[0] != -v[1]) {
		snprintf(err, errlen, "INCA_RAIL_MIN_BYTES differs across the hosts (from %lld to "
			 "%lld bytes; each host's leader's counts): set the same for every rank",
			 (long long)-v[1], (long long)v[0]);
		return INCA_ERR_CONFIG;
	}
	return 0;
}

/* The local ranks' verdicts on a step of creation (step s of both
 * streams): the leader gathers them and tells every local rank the first
 * failure, so that a host's ranks fail together (one whose rail failed
 * would otherwise leave the others to find it gone at their first call). */
static int team_agree(struct hl_hier *h, uint32_t s, int rc, double until, char *err,
		      size_t errlen)
{
	char why[200];
	int w;

	if (!is_leader(h)) {
		struct hl_team_note *nt = (struct hl_team_note *)hl_team_buf(h->team, HL_TEAM_UP,
									     h->L.lrank, s);
		nt->rc = rc;
		nt->flags = 0;
		snprintf(nt->msg, sizeof(nt->msg), "%.199s", rc ? err : "");
		hl_team_post(h->team, HL_TEAM_UP, s);
		w = hl_team_wait(h->team, HL_TEAM_DOWN, 0, s + 1, until, why, sizeof(why));
		if (!rc && w == 1 && hl_team_note(h->team, s)->rc) {
			rc = hl_team_note(h->team, s)->rc;
			snprintf(err, errlen, "%.250s", hl_team_note(h->team, s)->msg);
		} else if (!rc && w != 1) {
			rc = w ? w : INCA_ERR_TIMEOUT;
			snprintf(err, errlen, "the host's leader (rank %d) did not say how its "
				 "rails' check went%s%.150s", leader_rank(h), w ? ": " : " by the deadline",
				 w ? why : "");
		}
		hl_team_post(h->team, HL_TEAM_DOWN, s);
		return rc;
	}
	for (int l = 1; l < h->L.lsize; l++) {
		w = hl_team_wait(h->team, HL_TEAM_UP, l, s + 1, until, why, sizeof(why));
		const struct hl_team_note *nl =
			(const struct hl_team_note *)hl_team_buf(h->team, HL_TEAM_UP, l, s);
		if (rc)
			continue;
		if (w == 1 && nl->rc) {
			rc = nl->rc;
			snprintf(err, errlen, "local rank %d (rank %d): %.180s", l, leader_rank(h) + l,
				 nl->msg);
		} else if (w != 1) {
			rc = w ? w : INCA_ERR_TIMEOUT;
			snprintf(err, errlen, "local rank %d (rank %d) did not check its rail%s%.150s",
				 l, leader_rank(h) + l, w ? ": " : " by the deadline", w ? why : "");
		}
	}
	hl_team_post(h->team, HL_TEAM_UP, s);
	struct hl_team_note *nt = hl_team_note(h->team, s);
	nt->rc = rc;
	nt->flags = 0;
	snprintf(nt->msg, sizeof(nt->msg), "%.199s", rc ? err : "");
	hl_team_post(h->team, HL_TEAM_DOWN, s);
	return rc;
}

int hl_hier_create(const struct inca_comm_attr *attr, struct hl_layout *L,
		   struct hl_group_desc *g, const struct hl_transport_ops *tp, inca_comm_t **out,
		   char *err, size_t errlen)
{
	struct inca_comm *c = calloc(1, sizeof(*c));
	struct hl_hier *h = calloc(1, sizeof(*h));
	char name[96];
	int rc = 0, *ranks = NULL;

	*out = NULL;
	if (!c || !h) {
		free(c);
		free(h);
		hl_layout_free(L);
		if (g)
			hl_group_free(g);
		snprintf(err, errlen, "out of memory");
		return INCA_ERR_NOMEM;
	}
	h->L = *L;
	memset(L, 0, sizeof(*L));
	c->hier = h;
	c->rank = attr->rank;
	c->size = attr->size;
	snprintf(c->job, sizeof(c->job), "%s", attr->job ? attr->job : "");
	c->tp = tp;
	c->timeout_ms = attr->timeout_ms ? attr->timeout_ms : 30000;
	c->now_us = hl_clock_us;
	double deadline = hl_clock_us(NULL) + (double)c->timeout_ms * 1000;

	rc = rails_setup(attr, h, g, err, errlen);
	if (rc)
		goto fail;
	if (h->L.lsize > 1) {
		team_name(attr, g, &h->L, name, sizeof(name));
		ranks = malloc(sizeof(int) * (size_t)h->L.lsize);
		if (!ranks) {
			snprintf(err, errlen, "out of memory");
			rc = INCA_ERR_NOMEM;
			goto fail;
		}
		for (int l = 0; l < h->L.lsize; l++)
			ranks[l] = leader_rank(h) + l;
		rc = hl_team_open(name, h->L.lrank, h->L.lsize, h->rails, ranks, c->rank,
				  deadline, &h->team, err, errlen);
		free(ranks);
		if (rc)
			goto fail;
	}
	/* the leader joins the network as its host, and with rails every
	 * local rank its rail, at once; the others tell the leader how that
	 * went (up step 0), the leader tells them all (down step 0) */
	h->down_next = 1;
	if (h->rails)
		h->up_next = 1;
	if (h->L.nhosts > 1 && (is_leader(h) || h->rails)) {
		rc = rail_create(attr, h, g, tp, is_leader(h) ? &h->inner : &h->rail, err, errlen);
		if (is_leader(h))
			h->rail = h->inner;
	}
	if (h->rails && !is_leader(h)) {
		struct hl_team_note *nt = (struct hl_team_note *)hl_team_buf(h->team, HL_TEAM_UP,
									     h->L.lrank, 0);
		nt->rc = rc;
		nt->flags = 0;
		snprintf(nt->msg, sizeof(nt->msg), "%.199s", rc ? err : "");
		hl_team_post(h->team, HL_TEAM_UP, 0);
	}
	if (is_leader(h)) {
		/* the others' rails, each with a deadline of its own from about
		 * now: one deadline for them all */
		double until = hl_clock_us(NULL) + (double)c->timeout_ms * 1000 + 2e6;
		for (int l = 1; h->rails && l < h->L.lsize; l++) {
			char why[200];
			int w = hl_team_wait(h->team, HL_TEAM_UP, l, 1, until, why, sizeof(why));
			const struct hl_team_note *nl =
				(const struct hl_team_note *)hl_team_buf(h->team, HL_TEAM_UP, l, 0);
			if (rc)
				continue;
			if (w == 1 && nl->rc) {
				rc = nl->rc;
				snprintf(err, errlen, "local rank %d (rank %d) could not join its "
					 "rail: %.180s", l, leader_rank(h) + l, nl->msg);
			} else if (w != 1) {
				rc = w ? w : INCA_ERR_TIMEOUT;
				snprintf(err, errlen, "local rank %d (rank %d) did not join its rail "
					 "by the deadline%s%.150s", l, leader_rank(h) + l,
					 w ? ": " : "", w ? why : "");
			}
		}
		if (h->rails)
			hl_team_post(h->team, HL_TEAM_UP, 0);
		if (h->team) {
			struct hl_team_note *nt = hl_team_note(h->team, 0);
			nt->rc = rc;
			nt->flags = 0;
			snprintf(nt->msg, sizeof(nt->msg), "%.199s", rc ? err : "");
			/* the threshold: the leader's on every local rank */
			uint64_t min = h->rail_min;
			memcpy(hl_team_buf(h->team, HL_TEAM_DOWN, 0, 0), &min, sizeof(min));
			hl_team_post(h->team, HL_TEAM_DOWN, 0);
		}
		if (rc)
			goto fail;
	} else {
		/* the leader joins the network with a deadline of its own,
		 * from now */
		char mine[256];
		snprintf(mine, sizeof(mine), "%s", rc ? err : "");
		int w = hl_team_wait(h->team, HL_TEAM_DOWN, 0, 1, hl_clock_us(NULL) +
				     (double)c->timeout_ms * 1000 * (h->rails ? 2 : 1) + 2e6, err,
				     errlen);
		if (rc) {
			snprintf(err, errlen, "%s", mine);   /* my rail's error first */
		} else if (w == 1) {
			const struct hl_team_note *nt = hl_team_note(h->team, 0);
			uint64_t min;
			memcpy(&min, hl_team_buf(h->team, HL_TEAM_DOWN, 0, 0), sizeof(min));
			h->rail_min = (size_t)min;
			if ((rc = nt->rc))
				snprintf(err, errlen, "the host's leader (rank %d) could not join: "
					 "%.180s", leader_rank(h), nt->msg);
		} else if (w == 0) {
			snprintf(err, errlen, "the host's leader (rank %d) did not join the network "
				 "by the deadline", leader_rank(h));
			rc = INCA_ERR_TIMEOUT;
		} else {
			rc = w;
		}
		hl_team_post(h->team, HL_TEAM_DOWN, 0);
		if (rc)
			goto fail;
	}
	if (h->rails && h->L.nhosts > 1) {
		/* every rail's compare is one call of the rail: it may take its
		 * deadline */
		double until = hl_clock_us(NULL) + (double)c->timeout_ms * 1000 * 2 + 2e6;
		rc = team_agree(h, 1, rails_agree(h, err, errlen), until, err, errlen);
		h->up_next = h->down_next = 2;
		if (rc)
			goto fail;
	}
	if (g)
		hl_group_free(g);
	HL_INFO("rank %d/%d: local rank %d of %d on host %d of %d (%s)%s%s", c->rank, c->size,
		h->L.lrank, h->L.lsize, h->L.host, h->L.nhosts,
		h->L.uniform ? "same ranks on every host" : "uneven",
		is_leader(h) ? ", this host's leader" : "",
		h->rails ? ", a rail each" : "");
	*out = c;
	return 0;
fail:
	if (g)
		hl_group_free(g);
	hl_hier_destroy(c);
	free(c);
	return rc;
}

void hl_hier_destroy(struct inca_comm *c)
{
	struct hl_hier *h = c->hier;

	if (!h)
		return;
	/* collectives in flight: the other local ranks must not wait for
	 * this one; the leaders' requests go with their communicator */
	if (h->nq && !h->broken)
		hl_team_break(h->team, "its communicator was destroyed with collectives in "
			      "flight");
	for (unsigned i = 0; i < h->nq; i++)
		req_free(h, h->q[i]);
	if (h->rail != h->inner)
		inca_comm_destroy(h->rail);
	inca_comm_destroy(h->inner);
	hl_team_close(h->team);
	hl_layout_free(&h->L);
	free(h->spare);
	free(h);
	c->hier = NULL;
}

void hl_hier_stats(const struct inca_comm *c, struct inca_stats *st)
{
	struct hl_hier *h = c->hier;
	struct inca_stats mine = c->stats;

	if (h->rail)
		inca_comm_stats(h->rail, st);
	else
		memset(st, 0, sizeof(*st));
	st->collectives = mine.collectives;
	st->fallbacks = mine.fallbacks;
	st->hier_calls = mine.hier_calls;
	st->local_bytes = mine.local_bytes;
	st->rail_calls = mine.rail_calls;
}

const char *hl_hier_transport(const struct inca_comm *c)
{
	return c->hier->rail ? inca_comm_transport(c->hier->rail) :
	       c->tp ? c->tp->name : "none";
}
