/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The INCA communicator behind an MPI communicator: created collectively on
 * its INCA_MPI_OFFLOAD_AFTER-th offloadable call (every rank counts the same
 * calls, so every rank decides there), cached as an
 * attribute, released with the communicator (its group kept for a later
 * communicator of the same ranks: the pool, below); and the recovery when the
 * switch fails, which makes every rank finish the failed operation the same
 * way (from a rank that got its result, or redone through PMPI).
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "im_priv.h"

/* point-to-point tags on a mapped communicator's private shadow */
#define IM_TAG_NOTICE 0x1c0   /* "I could not finish operation seq" */
#define IM_TAG_DATA   0x1c1   /* "I finished operation seq", maybe with its result */
#define IM_TAG_REDO   0x1c2   /* "redo operation seq with us" */
#define IM_TAG_DRAIN  0x1c3   /* "I am leaving the communicator" */
#define IM_DATA_HDR   8       /* uint32 seq, uint32 1 (the result follows,
				 or nothing another rank needs) or 0 (this
				 rank's result is only its own), the result */

static int im_keyval = MPI_KEYVAL_INVALID;
static struct im_comm *im_comms;
static unsigned im_nshadow;    /* communicators with a shadow: ones to serve */
static unsigned im_ncreated;   /* communicators this process created (rank 0) */
static bool im_ending;         /* MPI_Finalize: nothing more is kept */

/* An INCA communicator gone for good: its collectives counted first. */
static void inca_done(inca_comm_t *inca)
{
	struct inca_stats st;

	if (inca && !inca_comm_stats(inca, &st)) {
		im_host_first.calls += st.hier_calls;
		im_host_first.rails += st.rail_calls;
		im_host_first.all += st.collectives;
	}
	inca_comm_destroy(inca);
}

/*
 * The pool (INCA_MPI_POOL): the INCA communicators of freed offloaded
 * communicators, newest first, each with its ranks as MPI_COMM_WORLD
 * numbers them. A new communicator of the same ranks in the same order
 * takes one instead of creating a group through the manager. Every rank of
 * a freed communicator keeps it or none does: they all drained before the
 * free (so none has a call in flight there, and they all see the same
 * state). A new communicator takes the group rank 0 names, if every rank
 * still has it; otherwise it creates its own and the kept ones stay.
 */
struct im_pooled {
	inca_comm_t *inca;
	int size;
	int *world;
	char job[48];
	struct im_pooled *next;
};
static struct im_pooled *im_pool;
static unsigned im_npooled;

/* comm's ranks as MPI_COMM_WORLD numbers them, or NULL (a rank outside
 * it, or no memory) */
static int *world_ranks(MPI_Comm comm, int size)
{
	MPI_Group g, wg;
	int *r = malloc(sizeof(int) * (size_t)size), *w = malloc(sizeof(int) * (size_t)size);
	bool ok = r && w && PMPI_Comm_group(comm, &g) == MPI_SUCCESS;

	if (ok) {
		if (PMPI_Comm_group(MPI_COMM_WORLD, &wg) == MPI_SUCCESS) {
			for (int i = 0; i < size; i++)
				r[i] = i;
			ok = PMPI_Group_translate_ranks(g, size, r, wg, w) == MPI_SUCCESS;
			PMPI_Group_free(&wg);
		} else {
			ok = false;
		}
		PMPI_Group_free(&g);
	}
	for (int i = 0; ok && i < size; i++)
		ok = w[i] != MPI_UNDEFINED;
	free(r);
	if (!ok) {
		free(w);
		return NULL;
	}
	return w;
}

static void pooled_free(struct im_pooled *e)
{
	inca_done(e->inca);
	free(e->world);
	free(e);
}

/* Every kept group let go (MPI_Finalize, or the manager refused a new one
 * while some were kept). */
static void pool_flush(void)
{
	struct im_pooled *e;

	while ((e = im_pool)) {
		im_pool = e->next;
		pooled_free(e);
	}
	im_npooled = 0;
}

/* Keep ic's INCA communicator for a later one of the same ranks: true if
 * kept (the oldest kept one goes when the pool is full). */
static bool pool_park(struct im_comm *ic)
{
	struct im_pooled *e, **p;

	if (!im_cfg.pool || im_ending || !ic->inca || ic->state != IM_OFFLOADED || ic->head ||
	    !getenv("INCA_MANAGER"))
		return false;
	e = calloc(1, sizeof(*e));
	if (!e || !(e->world = world_ranks(ic->comm, ic->size))) {
		free(e);
		return false;
	}
	e->inca = ic->inca;
	e->size = ic->size;
	snprintf(e->job, sizeof(e->job), "%s", ic->job);
	e->next = im_pool;
	im_pool = e;
	if (++im_npooled > im_cfg.pool) {
		for (p = &im_pool; (*p)->next; p = &(*p)->next)
			;
		pooled_free(*p);
		*p = NULL;
		im_npooled--;
	}
	return true;
}

/* The kept entry for these ranks (named job, or the newest if job is
 * NULL): the link that points at it, or NULL. */
static struct im_pooled **pool_find(const int *world, int size, const char *job)
{
	for (struct im_pooled **p = &im_pool; *p; p = &(*p)->next)
		if ((*p)->size == size && !memcmp((*p)->world, world, sizeof(int) * (size_t)size) &&
		    (!job || !strcmp((*p)->job, job)))
			return p;
	return NULL;
}

static int agree_min(MPI_Comm shadow, int v);

/* ic takes a freed communicator's group, if every rank has the one rank 0
 * names; collective on ic->shadow. */
static bool pool_take(struct im_comm *ic)
{
	char job[sizeof(ic->job)] = "";
	struct im_pooled **p = NULL, *e;
	int *world = im_npooled ? world_ranks(ic->comm, ic->size) : NULL;

	if (ic->rank == 0 && world && (p = pool_find(world, ic->size, NULL)))
		snprintf(job, sizeof(job), "%s", (*p)->job);
	PMPI_Bcast(job, sizeof(job), MPI_CHAR, 0, ic->shadow);
	if (!job[0]) {
		free(world);
		return false;
	}
	p = world ? pool_find(world, ic->size, job) : NULL;
	free(world);
	if (!agree_min(ic->shadow, p != NULL))
		return false;
	e = *p;
	*p = e->next;
	im_npooled--;
	ic->inca = e->inca;
	snprintf(ic->job, sizeof(ic->job), "%s", e->job);
	e->inca = NULL;
	pooled_free(e);
	return true;
}

static void comm_free(struct im_comm *ic)
{
	struct im_comm **p;

	for (p = &im_comms; *p; p = &(*p)->next)
		if (*p == ic) {
			*p = ic->next;
			break;
		}
	if (!pool_park(ic)) {
		im_abandon_active(ic);
		inca_done(ic->inca);
	}
	ic->inca = NULL;
	if (ic->shadow != MPI_COMM_NULL) {
		PMPI_Comm_free(&ic->shadow);
		im_nshadow--;
	}
	free(ic->big.buf);
	for (int i = 0; i < IM_PIPE_MAX; i++)
		free(ic->ring[i].buf);
	free(ic->scratch);
	free(ic->join.in);
	free(ic);
}

static int attr_delete(MPI_Comm comm, int keyval, void *value, void *extra)
{
	(void)comm;
	(void)keyval;
	(void)extra;
	comm_free(value);
	return MPI_SUCCESS;
}

/* Everything the ranks must agree on: the minimum of v over comm. */
static int agree_min(MPI_Comm shadow, int v)
{
	int all = v;

	PMPI_Allreduce(&v, &all, 1, MPI_INT, MPI_MIN, shadow);
	return all;
}

/* Rank 0 names the job: the launcher's job, its host, pid and a counter,
 * so that communicators of one run and of several runs never collide. */
static void job_name(struct im_comm *ic)
{
	char host[16] = "";

	if (ic->rank == 0) {
		gethostname(host, sizeof(host) - 1);
		for (char *s = host; *s; s++)
			if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
			      (*s >= '0' && *s <= '9') || *s == '-'))
				*s = '-';
		snprintf(ic->job, sizeof(ic->job), "%.12s.%.12s.%d.%u", im_cfg.job_prefix, host,
			 (int)getpid() % 1000000, ++im_ncreated);
	}
	PMPI_Bcast(ic->job, sizeof(ic->job), MPI_CHAR, 0, ic->shadow);
}

/* The lowest rank whose ok is 0 tells why; rank 0 logs it. */
static void say_why_not(struct im_comm *ic, bool ok, const char *why)
{
	char msg[256];
	int first = ok ? ic->size : ic->rank, lowest = first;

	PMPI_Allreduce(&first, &lowest, 1, MPI_INT, MPI_MIN, ic->shadow);
	if (lowest >= ic->size)
		return;
	snprintf(msg, sizeof(msg), "%s", why ? why : "");
	PMPI_Bcast(msg, sizeof(msg), MPI_CHAR, lowest, ic->shadow);
	if (ic->rank == 0)
		im_log(1, "communicator of %d ranks (job %s) not offloaded: rank %d: %s",
		       ic->size, ic->job, lowest, msg);
}

/* With the manager, a rank needs its address before it registers: a rank
 * that cannot register would leave the others waiting for it. */
static bool have_address(const char **why)
{
	const char *ifname = getenv("INCA_IFNAME");
	struct ifaddrs *ifa, *i;
	bool found = false;

	if (getenv("INCA_LOCAL_IP"))
		return true;
	if (!ifname) {
		*why = "set INCA_IFNAME (the data interface) or INCA_LOCAL_IP";
		return false;
	}
	if (getifaddrs(&ifa) == 0) {
		for (i = ifa; i && !found; i = i->ifa_next)
			found = i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
				!strcmp(i->ifa_name, ifname);
		freeifaddrs(ifa);
	}
	if (!found)
		*why = "INCA_IFNAME names no interface with an IPv4 address";
	return found;
}

static bool static_group(void)
{
	return getenv("INCA_CONFIG") || getenv("INCA_SWITCH");
}

/* A static group outlives jobs: rank 0 draws this job's epoch (unless
 * INCA_EPOCH names one), so that its collectives never meet an earlier
 * job's on the switch. */
static uint32_t job_epoch(struct im_comm *ic)
{
	uint32_t e = 0;

	if (ic->rank == 0 && !getenv("INCA_EPOCH"))
		e = inca_epoch_new();
	PMPI_Bcast(&e, 1, MPI_UINT32_T, 0, ic->shadow);
	return e;
}

/*
 * The ranks per host of comm, from MPI's own view (MPI_COMM_TYPE_SHARED),
 * for libinca's host-first collectives: "3,1,2,2" in rank order when the
 * ranks of each host are numbered one after the other, else NULL (every
 * rank a member of the switch's group). buf: room for the string.
 */
static const char *comm_layout(struct im_comm *ic, char *buf, size_t len)
{
	MPI_Comm node;
	int lrank = 0, lsize = 1, lo = ic->rank, hi = ic->rank, block, *mine = NULL;
	const char *res = NULL;

	int rc = PMPI_Comm_split_type(ic->shadow, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);

	/* every rank makes the same calls: they agree first */
	if (!agree_min(ic->shadow, rc == MPI_SUCCESS)) {
		if (rc == MPI_SUCCESS)
			PMPI_Comm_free(&node);
		return NULL;
	}
	PMPI_Comm_rank(node, &lrank);
	PMPI_Comm_size(node, &lsize);
	PMPI_Allreduce(&ic->rank, &lo, 1, MPI_INT, MPI_MIN, node);
	PMPI_Allreduce(&ic->rank, &hi, 1, MPI_INT, MPI_MAX, node);
	PMPI_Comm_free(&node);
	block = hi - lo + 1 == lsize && lo == ic->rank - lrank;
	if (!agree_min(ic->shadow, block))
		return NULL;
	/* every rank's host size, in rank order: a host's first rank says it */
	mine = malloc(sizeof(int) * (size_t)ic->size);
	if (!agree_min(ic->shadow, mine != NULL)) {
		free(mine);
		return NULL;
	}
	int me = lrank == 0 ? lsize : 0;
	PMPI_Allgather(&me, 1, MPI_INT, mine, 1, MPI_INT, ic->shadow);
	size_t n = 0;
	buf[0] = 0;
	for (int r = 0; r < ic->size && n < len; r++)
		if (mine[r])
			n += (size_t)snprintf(buf + n, len - n, "%s%d", n ? "," : "", mine[r]);
	if (n < len && lsize > 0)
		res = buf;
	free(mine);
	return res;
}

/* The offload_after-th offloadable call on comm (all its ranks are in
 * it): decide. */
static void comm_decide(struct im_comm *ic)
{
	struct inca_comm_attr attr = { 0 };
	const char *why = NULL;
	bool ok = true;
	int rc = INCA_OK, inter = 0;

	ic->state = IM_PASSTHROUGH;
	PMPI_Comm_test_inter(ic->comm, &inter);
	if (inter || ic->size < 2)
		return;     /* nothing to offload: stays PMPI's */
	if (PMPI_Comm_dup(ic->comm, &ic->shadow) != MPI_SUCCESS) {
		ic->shadow = MPI_COMM_NULL;
		return;
	}
	im_nshadow++;
	job_name(ic);
	if (getenv("INCA_MANAGER")) {
		ok = have_address(&why);
	} else {
		ok = static_group() && ic->comm == MPI_COMM_WORLD;
		why = static_group() ? "a static group (INCA_CONFIG/INCA_SWITCH) serves "
				       "MPI_COMM_WORLD only; set INCA_MANAGER for others"
				     : "neither INCA_MANAGER nor a static group is set";
	}
	/* and on INCA_MPI_PASS_SETTLED: off on one rank, off on all */
	int agreed = agree_min(ic->shadow, ok ? 1 + (int)im_cfg.pass_settled : 0);
	if (!agreed) {
		say_why_not(ic, ok, why);
		return;
	}
	ic->pass_settled = agreed == 2;
	if (ic->rank == 0 && !ic->pass_settled)
		im_log(2, "communicator of %d ranks: INCA_MPI_PASS_SETTLED=0 on a rank: its calls "
		       "passed through always wait nonblocking", ic->size);
	double t0 = im_now_us();
	if (getenv("INCA_MANAGER") && pool_take(ic)) {
		ic->state = IM_OFFLOADED;
		if (ic->rank == 0) {
			im_groups.reused++;
			im_log(1, "communicator of %d ranks offloaded to INCA (job %s, a freed "
			       "communicator's group, transport %s, %.1f ms)", ic->size, ic->job,
			       inca_comm_transport(ic->inca), (im_now_us() - t0) / 1000);
		}
		return;
	}
	attr.rank = ic->rank;
	attr.size = ic->size;
	/* several ranks per host: MPI knows which; numbered host by host, they
	 * reduce inside the host first, else every rank is a member */
	char *layout = malloc((size_t)ic->size * 5 + 1);
	attr.layout = agree_min(ic->shadow, layout != NULL) ?
		      comm_layout(ic, layout, (size_t)ic->size * 5 + 1) : NULL;
	if (!attr.layout)
		attr.hier = INCA_HIER_OFF;
	attr.job = getenv("INCA_MANAGER") ? ic->job : NULL;
	attr.epoch = getenv("INCA_MANAGER") ? 0 : job_epoch(ic);
	attr.fallback = INCA_FALLBACK_OFF;    /* recovery is ours: ranks must agree */
	attr.timeout_ms = im_cfg.create_timeout_ms;
	rc = inca_comm_create(&attr, &ic->inca);
	ok = agree_min(ic->shadow, rc == INCA_OK);
	/* a rank keeps freed communicators' groups: jobs on the manager, with
	 * their slots, that may be why it refused; let them go and ask again,
	 * as a new job (the ranks that got in left the first) */
	if (!ok && agree_min(ic->shadow, -(int)im_npooled) < 0) {
		if (ic->rank == 0)
			im_log(1, "communicator of %d ranks: creating its group failed while "
			       "freed communicators' groups were kept: they are let go, and "
			       "it is tried once more", ic->size);
		inca_comm_destroy(ic->inca);
		ic->inca = NULL;
		pool_flush();
		/* every rank of this communicator has left its kept groups' jobs
		 * before any asks again (else the manager may still count them) */
		(void)agree_min(ic->shadow, 1);
		job_name(ic);
		rc = inca_comm_create(&attr, &ic->inca);
		ok = agree_min(ic->shadow, rc == INCA_OK);
	}
	free(layout);
	double create_ms = (im_now_us() - t0) / 1000;
	if (!ok) {
		say_why_not(ic, rc == INCA_OK, rc == INCA_OK ? NULL : inca_last_errmsg());
		inca_comm_destroy(ic->inca);
		ic->inca = NULL;
		return;
	}
	ic->state = IM_OFFLOADED;
	if (ic->rank == 0) {
		im_groups.created++;
		im_log(1, "communicator of %d ranks offloaded to INCA (job %s, transport %s, "
		       "%.1f ms to create)", ic->size, ic->job, inca_comm_transport(ic->inca),
		       create_ms);
	}
}

struct im_comm *im_comm_get(MPI_Comm comm)
{
	struct im_comm *ic;
	int flag = 0;

	if (!im_cfg.enabled || comm == MPI_COMM_NULL)
		return NULL;
	if (im_keyval == MPI_KEYVAL_INVALID &&
	    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, attr_delete, &im_keyval, NULL))
		return NULL;
	PMPI_Comm_get_attr(comm, im_keyval, &ic, &flag);
	if (!flag) {
		int size;
		PMPI_Comm_size(comm, &size);
		/* with the per-rank notice table: nothing to allocate later */
		ic = calloc(1, sizeof(*ic) + 2 * (size_t)size * sizeof(ic->seen[0]));
		if (!ic)
			return NULL;      /* the same on no rank: but no memory is fatal anyway */
		ic->comm = comm;
		ic->shadow = MPI_COMM_NULL;
		ic->size = size;
		PMPI_Comm_rank(comm, &ic->rank);
		ic->next = im_comms;
		im_comms = ic;
		PMPI_Comm_set_attr(comm, im_keyval, ic);
	}
	/* every rank makes the same offloadable calls on comm in the same
	 * order: they reach the decision together */
	if (ic->state == IM_UNDECIDED && ++ic->calls >= im_cfg.offload_after)
		comm_decide(ic);
	return ic->state == IM_OFFLOADED || ic->state == IM_FAILED ? ic : NULL;
}

enum im_pass im_comm_pass(MPI_Comm comm, struct im_comm **icp)
{
	struct im_comm *ic;
	int flag = 0;

	if (icp)
		*icp = NULL;
	if (im_keyval == MPI_KEYVAL_INVALID || comm == MPI_COMM_NULL)
		return IM_PASS_MPI;
	PMPI_Comm_get_attr(comm, im_keyval, &ic, &flag);
	if (!flag || (ic->state != IM_OFFLOADED && ic->state != IM_FAILED))
		return IM_PASS_MPI;
	if (ic->head)
		im_finish_active(ic);
	if (icp)
		*icp = ic;
	/*
	 * MPI's blocking call when a call that every rank had to enter came
	 * after the last offloaded operation and none of those operations
	 * failed: then no rank can miss one (this rank need not serve), and
	 * every rank decides alike. A failure of one of them is known to
	 * every rank by then (a recovery waits for every rank's answer before
	 * its rank goes on); a failure of a later operation, which a rank
	 * that left a broadcast or reduce early may report before this rank
	 * enters it, does not count here. Otherwise MPI's nonblocking call,
	 * serving a rank that missed the last result; once the communicator
	 * failed, always, the form a rank redoing a call on it uses.
	 */
	return ic->pass_settled && ic->settled_seq == ic->seq &&
			       (!ic->failed_at || ic->failed_at > ic->seq)
		       ? IM_PASS_SETTLED
		       : IM_PASS_SERVE;
}

void im_comm_settled(struct im_comm *ic)
{
	ic->settled_seq = ic->seq;
}

/* Some rank says (or this one found) that operation seq failed. */
static void mark_failed(struct im_comm *ic, uint32_t seq)
{
	if (!seq)
		seq = 1;
	if (!ic->failed_at || seq < ic->failed_at)
		ic->failed_at = seq;
}

void *im_comm_scratch(struct im_comm *ic, size_t bytes)
{
	if (bytes > ic->scratch_cap) {
		void *p = realloc(ic->scratch, bytes);
		if (!p)
			return NULL;
		ic->scratch = p;
		ic->scratch_cap = bytes;
	}
	return ic->scratch;
}

/* What this rank keeps of its operation seq, or NULL. */
static struct im_kept *kept(struct im_comm *ic, uint32_t seq)
{
	struct im_kept *k = &ic->ring[seq % IM_PIPE_MAX];

	if (seq && ic->big.seq == seq)
		return &ic->big;
	return seq && k->seq == seq ? k : NULL;
}

static void send_kept(struct im_comm *ic, const struct im_kept *k, int r)
{
	if (k->len != SIZE_MAX)
		PMPI_Send(k->buf, (int)(IM_DATA_HDR + k->len), MPI_BYTE, r, IM_TAG_DATA,
			  ic->shadow);
}

void im_keep_result(struct im_op *op)
{
	struct im_comm *ic = op->ic;
	size_t len = op->share ? op->bytes : 0;
	uint32_t hdr[2] = { op->seq, op->share };
	struct im_kept *k;

	ic->done_seq = op->seq;
	ic->join.valid = false;
	/* a rank that completed this one has every call before it, except
	 * pipelined ones: a call that ran alone is needed no more, or alone */
	if (op->pipelined) {
		ic->big.seq = 0;
		k = &ic->ring[op->seq % IM_PIPE_MAX];
	} else {
		for (int i = 0; i < IM_PIPE_MAX; i++)
			ic->ring[i].seq = 0;
		k = &ic->big;
	}
	k->seq = op->seq;
	if (IM_DATA_HDR + len > k->cap) {
		void *p = realloc(k->buf, IM_DATA_HDR + len);
		if (!p) {
			k->len = SIZE_MAX;   /* cannot help a rank that missed it */
			return;
		}
		k->buf = p;
		k->cap = IM_DATA_HDR + len;
	}
	memcpy(k->buf, hdr, sizeof(hdr));
	if (len)
		memcpy((uint8_t *)k->buf + IM_DATA_HDR, op->out, len);
	k->len = len;
	if (op->share || !op->in_bytes || op->redone)
		return;
	/* this rank's result is not another's: keep its input, to redo the
	 * call with a rank that missed its own (REDO) */
	struct im_join *j = &ic->join;
	if (op->saved_in) {
		/* in place: the copy is in the scratch buffer; trade buffers */
		void *t = j->in;
		size_t cap = j->in_cap;
		j->in = ic->scratch;
		j->in_cap = ic->scratch_cap;
		ic->scratch = t;
		ic->scratch_cap = cap;
		op->saved_in = NULL;
	} else {
		if (op->in_bytes > j->in_cap) {
			void *p = realloc(j->in, op->in_bytes);
			if (!p)
				return;
			j->in = p;
			j->in_cap = op->in_bytes;
		}
		memcpy(j->in, op->in, op->in_bytes);
	}
	j->kind = im_blocking(op->kind);
	j->count = j->kind == IM_REDUCE ? op->a.scount : op->a.rcount;
	j->type = j->kind == IM_REDUCE ? op->a.stype : op->a.rtype;
	j->op = op->a.op;
	j->root = op->a.root;
	j->valid = true;
}

/* A NOTICE from rank src: remember it, and if src misses the result this
 * rank has, send it. */
static void on_notice(struct im_comm *ic, int src, uint32_t seq)
{
	if (seq > ic->seen[src])
		ic->seen[src] = seq;
	mark_failed(ic, seq);
	if (ic->state == IM_OFFLOADED) {
		ic->state = IM_FAILED;
		im_log(2, "rank %d: rank %d reports the switch failed at operation %u",
		       ic->rank, src, seq);
	}
	const struct im_kept *k = kept(ic, seq);
	if (k) {
		send_kept(ic, k, src);
		ic->seen[ic->size + src] = seq;
	} else if (seq > ic->done_seq) {
		ic->owed = true;    /* answered when it finishes here */
	}
}

void im_answer_owed(struct im_comm *ic)
{
	if (!ic->owed || ic->failed_synced)
		return;
	ic->owed = false;
	for (int r = 0; r < ic->size; r++) {
		uint32_t s = ic->seen[r];
		const struct im_kept *k = kept(ic, s);
		if (k && ic->seen[ic->size + r] != s) {
			send_kept(ic, k, r);
			ic->seen[ic->size + r] = s;
		}
		ic->owed |= s > ic->done_seq;
	}
}

/* A REDO from a rank that missed operation seq, whose result is only
 * that rank's (this rank answered DATA 0): redo it together on the shadow
 * with this rank's kept input; the communicator is MPI's from now on, on
 * every rank. */
static void on_redo(struct im_comm *ic, uint32_t seq)
{
	struct im_join *j = &ic->join;
	void *out = NULL;
	MPI_Aint lb, extent = 0;

	mark_failed(ic, seq);
	if (seq != ic->done_seq || !j->valid || ic->joined_seq == seq)
		return;
	ic->joined_seq = seq;
	if (j->kind == IM_REDUCE) {
		/* never the root: a root that finished answered DATA 1 */
		PMPI_Reduce(j->in, NULL, j->count, j->type, j->op, j->root, ic->shadow);
	} else {
		PMPI_Type_get_extent(j->type, &lb, &extent);
		out = malloc(j->count > 0 ? (size_t)j->count * (size_t)extent : 1);
		PMPI_Reduce_scatter_block(j->in, out, j->count, j->type, j->op, ic->shadow);
		free(out);
	}
	ic->state = IM_FAILED;
	ic->failed_synced = true;
	im_log(2, "rank %d: redid operation %u with the ranks that missed it; the communicator "
	       "(job %s) goes through MPI", ic->rank, seq, ic->job);
}

/* Handle every pending NOTICE and REDO on ic (not DATA: only a recovery
 * asks). */
static void serve(struct im_comm *ic)
{
	MPI_Status st;
	int flag = 1;

	im_answer_owed(ic);
	while (flag && !ic->failed_synced) {
		uint32_t seq;
		PMPI_Iprobe(MPI_ANY_SOURCE, IM_TAG_NOTICE, ic->shadow, &flag, &st);
		if (flag) {
			PMPI_Recv(&seq, 1, MPI_UINT32_T, st.MPI_SOURCE, IM_TAG_NOTICE, ic->shadow,
				  MPI_STATUS_IGNORE);
			on_notice(ic, st.MPI_SOURCE, seq);
			continue;
		}
		PMPI_Iprobe(MPI_ANY_SOURCE, IM_TAG_REDO, ic->shadow, &flag, &st);
		if (flag) {
			PMPI_Recv(&seq, 1, MPI_UINT32_T, st.MPI_SOURCE, IM_TAG_REDO, ic->shadow,
				  MPI_STATUS_IGNORE);
			on_redo(ic, seq);
		}
	}
}

static void serve_others(const struct im_comm *self)
{
	for (struct im_comm *ic = im_comms; ic; ic = ic->next)
		if (ic != self && (ic->state == IM_OFFLOADED ||
					       (ic->state == IM_FAILED && !ic->failed_synced)))
			serve(ic);
}

/* At most every IM_SERVE_EVERY_US: a probe runs MPI's progress engine
 * (with mpi_yield_when_idle, a sched_yield), which cost a small offloaded
 * all-reduce ~50 µs of its ~120 on the lab testbed when done on every call;
 * once a millisecond it still cost an 8 B all-reduce with 2 ranks a host
 * (8 ranks on one CPU, every probe a yield to 7 others) 185 µs against 128
 * once every 10 ms (2026-11-27, AMD EPYC). A notice waits at most this
 * long on a rank that keeps calling (a recovery follows a switch timeout of
 * a second); one that computed between calls serves it as it enters the
 * next. */
#define IM_SERVE_EVERY_US 10000.0

void im_serve_all(void)
{
	static double last_us = -IM_SERVE_EVERY_US;

	if (!im_nshadow)
		return;           /* nothing was offloaded: nobody to answer */
	double now = im_now_us();

	if (now - last_us < IM_SERVE_EVERY_US)
		return;
	last_us = now;
	serve_others(NULL);
}

int im_recover(struct im_op *op)
{
	struct im_comm *ic = op->ic;
	uint32_t k = op->seq;
	int rc;

	mark_failed(ic, k);
	if (ic->state == IM_OFFLOADED) {
		ic->state = IM_FAILED;
		im_log(1, "rank %d: the switch path failed (%s); this and later collectives "
		       "on the communicator (job %s) go through MPI", ic->rank,
		       op->inca_err ? inca_comm_errmsg(ic->inca) : "another rank says so",
		       ic->job);
	}
	if (ic->failed_synced)
		return im_redo(op, false);   /* begun before the communicator went to MPI */
	im_answer_owed(ic);

	MPI_Request *sends = calloc((size_t)ic->size, sizeof(*sends));
	uint8_t *answered = calloc((size_t)ic->size, 2);   /* then: answered DATA 0 */
	uint8_t *data = NULL;
	int pending = ic->size - 1;

	if (!sends || !answered) {
		free(sends);
		free(answered);
		return MPI_ERR_NO_MEM;
	}
	uint8_t *only_own = answered + ic->size;
	for (int r = 0; r < ic->size; r++) {
		sends[r] = MPI_REQUEST_NULL;
		if (r != ic->rank)
			PMPI_Isend(&op->seq, 1, MPI_UINT32_T, r, IM_TAG_NOTICE, ic->shadow, &sends[r]);
		ic->seen[ic->size + r] = k;   /* this notice is our answer about k */
	}
	/* notices that came before this recovery */
	for (int r = 0; r < ic->size; r++)
		if (r != ic->rank && ic->seen[r] == k) {
			answered[r] = 1;
			pending--;
		}
	/* every other rank answers: it failed at k too (NOTICE k), or it
	 * finished k (DATA k: with the result if it is everyone's); an
	 * earlier operation's REDO may come too */
	while (pending > 0 && !ic->failed_synced) {
		MPI_Status st;
		int flag = 0, len;
		uint32_t seq;

		PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, ic->shadow, &flag, &st);
		if (!flag) {
			serve_others(ic);
			continue;
		}
		if (st.MPI_TAG == IM_TAG_NOTICE) {
			PMPI_Recv(&seq, 1, MPI_UINT32_T, st.MPI_SOURCE, IM_TAG_NOTICE, ic->shadow,
				  MPI_STATUS_IGNORE);
			on_notice(ic, st.MPI_SOURCE, seq);
			if (seq == k && !answered[st.MPI_SOURCE]) {
				answered[st.MPI_SOURCE] = 1;
				pending--;
			}
		} else if (st.MPI_TAG == IM_TAG_DATA) {
			uint32_t hdr[2];
			uint8_t *buf;
			PMPI_Get_count(&st, MPI_BYTE, &len);
			buf = malloc(len > 0 ? (size_t)len : 1);
			PMPI_Recv(buf ? buf : (void *)hdr, buf ? len : 0, MPI_BYTE, st.MPI_SOURCE,
				  IM_TAG_DATA, ic->shadow, MPI_STATUS_IGNORE);
			if (!buf || len < IM_DATA_HDR) {
				free(buf);
				continue;
			}
			memcpy(hdr, buf, sizeof(hdr));
			if (hdr[0] == k && !answered[st.MPI_SOURCE]) {
				answered[st.MPI_SOURCE] = 1;
				pending--;
				if (!hdr[1])
					only_own[st.MPI_SOURCE] = 1;
				else if (!data && (size_t)len - IM_DATA_HDR == (op->share ? op->bytes : 0))
					data = buf, buf = NULL;
			}
			free(buf);
		} else if (st.MPI_TAG == IM_TAG_REDO) {
			PMPI_Recv(&seq, 1, MPI_UINT32_T, st.MPI_SOURCE, IM_TAG_REDO, ic->shadow,
				  MPI_STATUS_IGNORE);
			on_redo(ic, seq);
		} else if (st.MPI_TAG == IM_TAG_DRAIN) {
			/* a rank that finished everything is leaving */
			PMPI_Recv(&seq, 1, MPI_UINT32_T, st.MPI_SOURCE, IM_TAG_DRAIN, ic->shadow,
				  MPI_STATUS_IGNORE);
			ic->drains++;
		} else {
			/* not ours: shadow carries only our tags */
			PMPI_Recv(NULL, 0, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, ic->shadow,
				  MPI_STATUS_IGNORE);
		}
	}
	PMPI_Waitall(ic->size, sends, MPI_STATUSES_IGNORE);
	free(sends);
	if (ic->failed_synced) {
		/* this rank redid an earlier operation with others while it
		 * waited: the communicator is MPI's on every rank */
		free(answered);
		free(data);
		return im_redo(op, false);
	}
	if (data) {
		/* a rank finished k and its result is everyone's (or, for a
		 * reduce, the root finished: the others need nothing); a
		 * broadcast's root already has it (its buffer may be read-only) */
		size_t n = op->share ? op->bytes : 0;
		if (n && !(im_blocking(op->kind) == IM_BCAST && ic->rank == op->a.root))
			memcpy(op->out, data + IM_DATA_HDR, n);
		free(data);
		free(answered);
		im_log(2, "rank %d: operation %u's result came from a rank that had it",
		       ic->rank, k);
		im_keep_result(op);
		return MPI_SUCCESS;
	}
	/* nobody has what k left this rank without: every rank redoes it on
	 * the shadow, those that finished it with their kept input (REDO),
	 * and from now on every rank knows the communicator is MPI's */
	for (int r = 0; r < ic->size; r++)
		if (only_own[r])
			PMPI_Send(&k, 1, MPI_UINT32_T, r, IM_TAG_REDO, ic->shadow);
	free(answered);
	ic->failed_synced = true;
	rc = im_redo(op, true);
	if (rc == MPI_SUCCESS)
		ic->done_seq = k;
	return rc;
}

/*
 * Serve the others until every rank of each of ics[0..n-1] is leaving it
 * too. Point to point (DRAIN to every other rank), not a barrier on the
 * shadow: a rank that finished an operation whose result is only its own
 * may still be asked to redo it on the shadow (REDO) while it waits here,
 * and the ranks that redid it must meet it there in the same order. Every
 * rank of a communicator that was offloaded drains, whatever its state.
 */
static void drain_many(struct im_comm **ics, int n)
{
	uint32_t zero = 0;
	size_t nreq = 0, k = 0;
	bool done = false;

	for (int i = 0; i < n; i++) {
		if (ics[i]->head)
			im_finish_active(ics[i]);
		nreq += (size_t)ics[i]->size;
	}
	MPI_Request *sends = malloc(sizeof(*sends) * (nreq ? nreq : 1));
	for (int i = 0; i < n; i++)
		for (int r = 0; r < ics[i]->size; r++) {
			MPI_Request *q = sends ? &sends[k++] : &(MPI_Request){ 0 };
			*q = MPI_REQUEST_NULL;
			if (r != ics[i]->rank)
				PMPI_Isend(&zero, 1, MPI_UINT32_T, r, IM_TAG_DRAIN, ics[i]->shadow, q);
			if (!sends && *q != MPI_REQUEST_NULL)
				PMPI_Wait(q, MPI_STATUS_IGNORE);
		}
	while (!done) {
		done = true;
		for (int i = 0; i < n; i++) {
			struct im_comm *ic = ics[i];
			MPI_Status st;
			int flag = 1;
			uint32_t v;

			while (ic->drains < ic->size - 1 && flag) {
				PMPI_Iprobe(MPI_ANY_SOURCE, IM_TAG_DRAIN, ic->shadow, &flag, &st);
				if (flag) {
					PMPI_Recv(&v, 1, MPI_UINT32_T, st.MPI_SOURCE, IM_TAG_DRAIN,
						  ic->shadow, MPI_STATUS_IGNORE);
					ic->drains++;
				}
			}
			if (ic->drains < ic->size - 1) {
				done = false;
				serve(ic);
			}
		}
		if (!done)
			serve_others(NULL);
	}
	if (sends)
		PMPI_Waitall((int)nreq, sends, MPI_STATUSES_IGNORE);
	free(sends);
}

static bool needs_drain(const struct im_comm *ic)
{
	return ic->shadow != MPI_COMM_NULL && ic->state != IM_PASSTHROUGH &&
	       ic->state != IM_UNDECIDED;
}

void im_comm_release(MPI_Comm comm)
{
	struct im_comm *ic;
	int flag = 0;

	if (im_keyval == MPI_KEYVAL_INVALID || comm == MPI_COMM_NULL)
		return;
	PMPI_Comm_get_attr(comm, im_keyval, &ic, &flag);
	if (!flag)
		return;
	if (needs_drain(ic))
		drain_many(&ic, 1);
	PMPI_Comm_delete_attr(comm, im_keyval);   /* frees ic */
}

void im_comm_release_all(void)
{
	struct im_comm *ic, **all;
	int n = 0;

	im_ending = true;
	/* every communicator's ranks drain at once: no order to agree on */
	for (ic = im_comms; ic; ic = ic->next)
		n += needs_drain(ic);
	all = malloc(sizeof(*all) * (size_t)(n ? n : 1));
	n = 0;
	for (ic = im_comms; ic && all; ic = ic->next)
		if (needs_drain(ic))
			all[n++] = ic;
	if (all)
		drain_many(all, n);
	else
		for (ic = im_comms; ic; ic = ic->next)
			if (needs_drain(ic))
				drain_many(&ic, 1);
	free(all);
	while ((ic = im_comms)) {
		int flag = 0;
		void *v;
		if (ic->comm != MPI_COMM_NULL &&
		    PMPI_Comm_get_attr(ic->comm, im_keyval, &v, &flag) == MPI_SUCCESS && flag)
			PMPI_Comm_delete_attr(ic->comm, im_keyval);   /* frees ic */
		if (im_comms == ic)
			comm_free(ic);
	}
	pool_flush();
	if (im_keyval != MPI_KEYVAL_INVALID)
		PMPI_Comm_free_keyval(&im_keyval);
}
