/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inca-manager's model and the functions over it, one section per file:
 * names, addresses and tokens (addr.c, token.c), the topology (topo.c),
 * the tree builder (tree.c, a pure function), the manager object and its
 * long-poll (mgr.c), logging and the failure log (log.c), jobs' lives
 * (jobs.c), allocation (alloc.c), the HTTP API as a function of (method,
 * path, token, body) (api.c and api.h's files), and persistence
 * (persist.c). The HTTP server (manager.c) and the tests call the same
 * functions. Functions that can fail return 0 or -1 with a message in an
 * (err, errlen) buffer; API handlers return an HTTP status.
 */
#ifndef INCA_MGR_H
#define INCA_MGR_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "inca/agg.h"
#include "inca_json.h"

#define MGR_NAME_LEN   48
#define MGR_TOKEN_LEN  128
#define MGR_HASH_LEN   32            /* SHA-256 */
#define MGR_MAX_SWITCHES 1024
#define MGR_MAX_HOSTS  65536
/* A job's ranks: its tree's groups hold at most AGG_MAX_MEMBERS each. */
#define MGR_MAX_JOB_RANKS 65536
#define MGR_MAX_TENANTS 64
/* What a topology gives when it does not say (and max_groups' maximum). */
#define MGR_DEFAULT_MAX_GROUPS   1024
#define MGR_DEFAULT_MAX_SLOTS    65536
#define MGR_DEFAULT_TENANT_SLOTS 4096
#define MGR_DEFAULT_TENANT_JOBS  64

/* ---- names and addresses (addr.c), tokens (token.c) ---- */

/* "10.0.0.1"; an address in host byte order. */
void mgr_ip_str(uint32_t ip, char buf[16]);
/* A unicast dotted quad: 0, or -1. */
int mgr_parse_ip(const char *s, uint32_t *out);
/* Names of switches, hosts, tenants and jobs: 1..MGR_NAME_LEN-1 of
 * a-z A-Z 0-9 - _ . */
#define MGR_NAME_RULE "1..47 characters of a-z A-Z 0-9 - _ ."
bool mgr_valid_name(const char *s);

/* ---- topology (topo.c) ---- */

/* Three tiers: hosts hang off leaves, leaves link to spines, spines (of
 * several pods) to super-spines. A tier may be missing above the leaves. */
enum mgr_role { MGR_LEAF = 0, MGR_SPINE = 1, MGR_SUPERSPINE = 2 };
#define MGR_TIERS 3

struct mgr_switch {
	char name[MGR_NAME_LEN];
	enum mgr_role role;
	uint32_t ip;                 /* host byte order */
	uint32_t max_groups, max_slots;
};

struct mgr_host {
	char name[MGR_NAME_LEN];
	uint32_t ip;
	int leaf;                    /* index in switches[] */
};

struct mgr_tenant {
	char name[MGR_NAME_LEN];
	uint8_t token_hash[MGR_HASH_LEN];   /* SHA-256 of the token */
	uint32_t max_slots_per_switch;
	uint32_t max_jobs;
};

struct mgr_topo {
	int nswitches, nhosts, ntenants;
	struct mgr_switch *switches;
	struct mgr_host *hosts;
	struct mgr_tenant tenants[MGR_MAX_TENANTS];
	uint8_t *link;               /* [lower * nswitches + upper] */
	int **up;                    /* per switch: the switches of the tier above it linked to it, */
	int *nup;                    /*   ascending, ending with -1 */
	int **down;                  /* per switch: those of the tier below */
	int *ndown;
};

/* Parse and validate; on error err says "FILE: line L: FIELD: what was
 * expected" and -1 is returned. */
int mgr_topo_load(struct mgr_topo *t, const char *path, char *err, size_t errlen);
int mgr_topo_parse(struct mgr_topo *t, json_t *root, const char *origin, char *err,
		   size_t errlen);
void mgr_topo_free(struct mgr_topo *t);
/* Tokens are kept and compared as SHA-256 digests. A secret (16..127
 * characters) is hashed; "sha256:" and 64 hex digits is a digest given as
 * such, so that files need not hold the secret. 0, or -1 with why. */
int mgr_token_digest(const char *spec, uint8_t out[MGR_HASH_LEN], char *why, size_t whylen);
void mgr_token_hash(const char *token, uint8_t out[MGR_HASH_LEN]);
bool mgr_token_matches(const char *token, const uint8_t hash[MGR_HASH_LEN]);
int mgr_topo_host_by_ip(const struct mgr_topo *t, uint32_t ip);
int mgr_topo_switch_by_name(const struct mgr_topo *t, const char *name);
const char *mgr_role_name(enum mgr_role r);
/* lower (a leaf or spine) is linked to upper (a spine or super-spine). */
static inline bool mgr_linked(const struct mgr_topo *t, int lower, int upper)
{
	return t->link[(size_t)lower * (size_t)t->nswitches + (size_t)upper];
}
/* Fill up/down from link (the loader does it; again after link changes). */
int mgr_topo_index_links(struct mgr_topo *t);

/*
 * A generated fat-tree (for the tree builder's bench and the simulator,
 * tests/sim): tiers 1, one leaf with every host; tiers 2, spines first,
 * then the leaves, every leaf linked to every spine; tiers 3, super-spines
 * (plane k: k x supers_per_plane ..), spines (pod p's spine of plane k),
 * then leaves, each spine linked to every leaf of its pod and to every
 * super-spine of its plane. Hosts h0, h1, ... (10.0.0.1 on) fill the
 * leaves in order, hosts_per_leaf each; a three-tier fabric's last pod is
 * full of leaves. Switch s is <role>s at 10.255.0.0 + s, with the default
 * group limit and 2^24 slots.
 */
struct mgr_fat_tree {
	int tiers;                   /* 1, 2 or 3 */
	int hosts;
	int hosts_per_leaf;          /* tiers 2, 3 */
	int spines;                  /* tier 2: in all; tier 3: a pod's (one a plane) */
	int leaves_per_pod;          /* tier 3 */
	int supers_per_plane;        /* tier 3 */
};
/* 0 (links indexed; mgr_topo_free frees it), or -1 with why. */
int mgr_topo_fat_tree(struct mgr_topo *t, const struct mgr_fat_tree *ft, char *why,
		      size_t whylen);

/* ---- trees (tree.c): pure ---- */

/* What is used on each switch now (indexed like topo->switches). */
struct mgr_load {
	uint32_t *slots;
	uint32_t *groups;
	bool *down;                  /* NULL: all up */
	const uint8_t *link_down;    /* [lower * nswitches + upper]: links reported down
					(the lower switch's port towards the upper one);
					NULL: none */
};

/* One switch of a tree: it holds one group of the job. */
struct mgr_tree_node {
	int sw;                      /* switch index */
	int parent;                  /* node index; -1: the root */
	int child_index;             /* its member index in the parent's group */
	int fanin;                   /* ranks under it */
	int nchildren;               /* 0: a leaf, whose members are ranks */
};

struct mgr_tree {
	int nnodes;                  /* 1: a single switch */
	int depth;                   /* 1, 2 or 3 switches from a rank to the root */
	struct mgr_tree_node *nodes; /* [0] the root; then a tier at a time down to the
					leaves, each tier in ascending switch index */
	int *node_of_rank;           /* per rank: its leaf's node */
	int *index_in_leaf;          /* per rank: its member index at its leaf */
};

/*
 * Build the reduction tree for ranks on hosts[0..n-1] (host indices, rank
 * order), each switch needing one group and window slots. One leaf holds
 * them all: that leaf alone. Else every leaf involved plus one spine linked
 * to all of them, the least loaded (slots used / max, then index). Else
 * three tiers: a super-spine (least loaded first that works) and, under it,
 * spines covering the leaves — per step the spine linked to it that covers
 * the most leaves not yet covered, the least loaded among equals. Returns
 * 0, or -1 with why filled (no common parent, capacity, a switch down).
 */
int mgr_tree_build(const struct mgr_topo *t, const int *hosts, int n,
		   const struct mgr_load *load, uint32_t window, struct mgr_tree *out,
		   char *why, size_t whylen);
void mgr_tree_free(struct mgr_tree *tr);
/* The node under node `node` (a child of it) that rank r is under; -1 when
 * r is not under node. */
int mgr_tree_child_toward(const struct mgr_tree *tr, int node, int r);

/* ---- the manager's state ---- */

/* waiting for its ranks; its tree being programmed; ready (in-network);
 * failed (kept for its reason: only states saved by an older manager);
 * on the host ring (no tree: refused, full, no path, down). */
enum mgr_job_state { MGR_JOB_WAITING, MGR_JOB_PROGRAMMING, MGR_JOB_READY, MGR_JOB_FAILED,
		     MGR_JOB_RING };

struct mgr_rank {
	bool registered, left;
	uint32_t ip, qpn;            /* qpn: unique on ip among the live jobs */
	uint32_t ring_ip;            /* the fallback ring's network; 0: ip */
	uint32_t ring_port;          /* unique on the ring's address; 0: none (old state) */
	int host;
	/* its answer to the job's plan (plans.c): the plan it acknowledged,
	 * the next collective it would start, the first it has not completed,
	 * the first it can replay (its inputs kept) */
	uint32_t ack_plan, ack_next, ack_first, ack_keep;
};

/* What the manager hands out per host address when a rank does not ask:
 * QPNs from MGR_QPN_FIRST (below it are the QPNs RoCE reserves and the
 * static examples' 17.. stay usable), ring ports from MGR_RING_PORT_FIRST. */
#define MGR_QPN_FIRST        17
#define MGR_RING_PORT_FIRST  18515
/* Longest a heartbeat or a rank's GET may be held (long-poll). */
#define MGR_WAIT_MS_MAX      30000

/*
 * A held request (long-poll), parked on what it waits for: a rank's state
 * request on its job (until the job's plan_ver moves on from plan_ver, or,
 * with plan_ver -1, until the job is ready, on the ring or failed), a
 * heartbeat on its switch (until the switch's desired version is not
 * `applied`). No thread waits meanwhile: whoever parked it (the HTTP front
 * end suspends the connection) is told through wake, m->lock held, once it
 * may be answered (the condition holds, its time is up, its job went, the
 * manager stops), and asks again with resumed set.
 */
struct mgr_parked {
	/* the caller's */
	void (*hold)(struct mgr_parked *p);   /* NULL, or called as it parks (lock held) */
	void (*wake)(struct mgr_parked *p);   /* called as it is unparked (lock held) */
	void *owner;
	bool resumed;                         /* asking again: answer at once */
	/* the model's */
	bool parked, timed_out;
	struct mgr_parked *next, **pprev;
	struct mgr_job *job;                  /* NULL: a heartbeat on switch sw */
	int sw;
	uint32_t applied;
	long long plan_ver;
	double until;                         /* m->now() */
	long wait_ms;
};

/* One group of a job on one switch: groups[g] is tree.nodes[g]'s. */
struct mgr_group {
	int sw;                      /* switch index */
	uint32_t qpn, qkey;
	int parent;                  /* index in job->groups, -1: root */
	uint16_t rank_in_parent;
	uint32_t version;            /* the switch's desired version that has it */
};

/* A plan that was cut and then replaced (struct mgr_job's past). */
#define MGR_PAST_PLANS 8
struct mgr_past_plan {
	uint32_t epoch, cut_seq, cut_from, cut_ver;
	bool ring, dead;
	char cut_error[200];
	char reason[256];            /* the job's reason while it was the plan */
};

struct mgr_job {
	char id[MGR_NAME_LEN];
	int tenant;
	int size;
	enum mgr_job_state state;
	char reason[256];
	uint32_t group_id;
	uint32_t window, elems_per_pkt, mtu;
	struct mgr_rank *ranks;
	int ngroups;
	struct mgr_group *groups;
	struct mgr_tree tree;
	bool have_tree;
	double created, lease_until, ready_at, registered_at;
	/*
	 * The plan (plans.c, docs/manager.md "Plans"): where the collectives
	 * run, epoch `plan` (1 the first; 0: none yet), on its tree or on the
	 * ranks' host ring. A new plan takes effect at the cut, agreed by
	 * every rank: the collectives before cut_seq run on the ring (the old
	 * plan was the ring, or a tree that died: plan_dead, the ranks replay
	 * from cut_from, the first one not every rank completed), those from
	 * cut_seq on on this plan. Plan 1 needs no cut.
	 */
	uint32_t plan;
	bool plan_ring, plan_dead, cut_done;
	uint32_t cut_seq, cut_from;
	uint32_t plan_ver;           /* moves on with every change ranks wait for */
	uint32_t cut_ver;            /* plan_ver when the cut was made (0: none, or saved
					by a manager that did not keep it) */
	/* the last plans that were cut and then replaced, oldest first (saved
	 * with the job): a rank that did not see one's cut before the next
	 * plan began gets it first (mgr_job_unseen_cut): every rank applies
	 * every cut, across a restart of the manager too */
	struct mgr_past_plan past[MGR_PAST_PLANS];
	int npast;
	char cut_error[200];         /* the cut cannot be made: why */
	double retry_at;             /* on the ring after a stall: a tree not before */
	uint64_t retry_gen;          /* capacity_gen at its last try for a tree */
	double plan_at;              /* when the plan was made (not saved) */
	double stall_at;             /* a rank said its tree stopped answering (not saved) */
	int stall_rank;
	uint32_t stall_ms;
	unsigned stalls;             /* moves to the ring on a stall in a row, each tree
					lasting under STALL_QUIET_S: the retry backs off
					(not saved) */
	uint64_t saved_sig;          /* persist.c: what its rows hold; 0: no rows */
	int dirty_lo, dirty_hi;      /* ranks whose own fields changed since the save
					(mgr_rank_touched); -1: none */
	struct mgr_parked *parked;   /* its ranks' held state requests */
	/*
	 * Rails (docs/manager.md, "Rails"): a job with P ranks a host is P
	 * jobs at the manager, the hosts' leaders' `<job>` (rail 0) and
	 * `<job>.rail<l>` for local rank l, H ranks each: a family, planned as
	 * one (every rail on a tree of its own or every rail on the ring,
	 * never some of each; one cut for all). nrails 0: a job of its own.
	 */
	int nrails, rail;
	bool rebuild_due;            /* jobs.c: its tree lost a switch or link (this pass) */
	struct mgr_job *next;
};

/* Rails a job may have (local ranks a host). */
#define MGR_MAX_RAILS 256

struct mgr_switch_state {
	uint32_t version;            /* desired */
	uint32_t applied;            /* what its agent reports */
	double last_seen;            /* 0: never since start */
	double busy_at_seen;         /* m->busy_s then */
	bool up, ever;
	uint32_t saved_version;      /* persist.c: what its row holds */
	char last_error[256];
	json_t *counters;            /* from the last heartbeat */
	struct mgr_parked *parked;   /* its held heartbeat(s) */
};

/* The failure log keeps the last MGR_FAILURES_KEPT entries. */
#define MGR_FAILURES_KEPT 256

struct mgr_failure {
	double t;
	char what[MGR_NAME_LEN];
	char reason[200];
};

struct mgr {
	struct mgr_topo topo;
	uint8_t admin_hash[MGR_HASH_LEN];   /* SHA-256 of the admin token */
	pthread_mutex_t lock;
	pthread_cond_t changed;      /* broadcast when a synchronous caller's request is woken */
	bool stopping;               /* held requests answer at once */
	uint64_t swept;              /* wakeups at the last mgr_wake_due */
	double busy_s;               /* time spent handling requests, in all: a switch's
					silence counts only the time the manager could hear
					it (a burst of thousands of requests is not its fault) */
	struct mgr_switch_state *sw;
	struct mgr_job *jobs;
	uint32_t next_group_id;
	struct mgr_failure failures[MGR_FAILURES_KEPT];
	unsigned nfailures;
	/* settings */
	double dead_after_s, lease_s, start_time;
	uint32_t default_window, default_elems, default_mtu;
	/* persistence */
	void *db;                    /* sqlite3 */
	void *stmt[16];              /* its prepared statements, by their SQL's address */
	const char *stmt_sql[16];
	char db_path[256];
	char (*gone)[MGR_NAME_LEN];  /* jobs removed since the last save */
	int ngone, gone_cap;
	unsigned failures_saved;     /* nfailures at the last save */
	uint32_t saved_next_group_id;
	/* metrics */
	uint64_t requests, requests_refused, tree_builds, rank_polls;
	uint64_t plans_tree, plans_ring, rebuilds, stall_reports;
	uint64_t capacity_gen;       /* moves on when slots may have freed or a switch came back */
	uint8_t *link_down;          /* [lower * nswitches + upper]: the lower switch reports
					its port towards the upper one down (heartbeats'
					"unreachable"; not saved: the next heartbeat says) */
	uint64_t polls_held, polls_woken, polls_timed_out, wakeups;
	unsigned polls_holding;      /* long-polls waiting now */
	uint64_t saves;
	double save_s_last, save_s_max;
	double tree_build_s_last, tree_build_s_max;
	/* clock, replaceable by tests */
	double (*now)(void);
};

/* ---- the manager object (mgr.c), the model's pieces (model.c) ---- */

int mgr_init(struct mgr *m, const char *topo_path, const char *db_path,
	     const char *admin_token, char *err, size_t errlen);
void mgr_fini(struct mgr *m);
double mgr_clock(void);
const char *mgr_job_state_name(enum mgr_job_state s);
void mgr_job_free(struct mgr_job *j);
/* Answer every held request (shutdown). */
void mgr_stop(struct mgr *m);
/* A desired version or a job's state changed: the held requests are
 * looked at again (mgr_wake_due) before the lock is let go. */
void mgr_changed(struct mgr *m);
/* Whether parked request p may be answered now (its condition holds). */
bool mgr_parked_done(struct mgr *m, const struct mgr_parked *p);
/* Park p (its job or sw, applied, plan_ver set) for wait_ms; lock held. */
void mgr_park(struct mgr *m, struct mgr_parked *p, long wait_ms);
/* Take p off its list, counted as woken or timed out, and call its wake. */
void mgr_unpark(struct mgr *m, struct mgr_parked *p, bool timed_out);
/* Unpark every request whose condition holds or whose time is up (all of
 * them when stopping): O(parked), integer compares. Lock held. */
void mgr_wake_due(struct mgr *m);

/* ---- logging and the failure log (log.c) ---- */

/* One line on stderr, "inca-manager: " first. */
__attribute__((format(printf, 1, 2)))
void mgr_log(const char *fmt, ...);
/* Record a failure of what (a switch, a job) and log it. */
__attribute__((format(printf, 3, 4)))
void mgr_failure(struct mgr *m, const char *what, const char *fmt, ...);

/* ---- jobs (jobs.c) and allocation (alloc.c) ---- */

struct mgr_job *mgr_job_find(struct mgr *m, const char *id);
/* Remove a job and its groups: the switches lose them at their next
 * heartbeat. */
void mgr_job_teardown(struct mgr *m, struct mgr_job *j);
/* Programming → ready once every switch of its tree applied its groups. */
void mgr_job_check_ready(struct mgr *m, struct mgr_job *j);
/* Periodic work: switches missing heartbeats, leases, readiness. */
void mgr_tick(struct mgr *m);
/* All ranks are in: tree, quota, slots, groups (a new group id); the job
 * programming. 0, or -1 with j->reason and no groups (plans.c decides). */
int mgr_job_allocate(struct mgr *m, struct mgr_job *j);
/* Slots and groups the jobs hold on switch s. */
void mgr_switch_usage(struct mgr *m, int s, uint32_t *slots, uint32_t *groups);
/*
 * A rank's QPN (ring false: per rank address) or ring port (ring true: per
 * ring address). value_holder: the job (and *rank) holding v on addr
 * besides rank self_rank of self, or NULL. value_free: the lowest value in
 * first..max nobody else holds, 0; or -1 when there is none.
 */
struct mgr_job *mgr_rank_value_holder(struct mgr *m, bool ring, uint32_t addr, uint32_t v,
				      const struct mgr_job *self, int self_rank, int *rank);
int mgr_rank_value_free(struct mgr *m, bool ring, uint32_t addr, const struct mgr_job *self,
			int self_rank, uint32_t first, uint32_t max, uint32_t *out);

/* ---- plans (plans.c) ---- */

/* A new plan for j: its tree if one can be built (programming), else the
 * ring (reason says why); dead: its previous plan was a tree that failed.
 * The caller saves. */
void mgr_job_replan(struct mgr *m, struct mgr_job *j, bool dead);
/* Remove j's groups from its switches (their slots free again). */
void mgr_job_release(struct mgr *m, struct mgr_job *j);
/* Rank r acknowledged plan `plan` at (next, first, keep): 0, or an HTTP
 * status with why. The cut is made once every rank has. */
int mgr_job_ack(struct mgr *m, struct mgr_job *j, int r, uint32_t plan, uint32_t next,
		uint32_t first, uint32_t keep, char *why, size_t whylen);
/* The oldest plan that was cut and replaced whose cut a rank whose view
 * is plan version ver has not seen (NULL: none; ver <= 0: no view yet). */
const struct mgr_past_plan *mgr_job_unseen_cut(const struct mgr_job *j, long long ver);
/* Rank r saw no results from the tree of plan `plan` for ms: noted. */
void mgr_job_stall(struct mgr *m, struct mgr_job *j, int r, uint32_t plan, uint32_t ms);
/* Jobs whose stall was noted dead_after ago while every switch of their
 * tree still heartbeats go to the ring. Whether any did. */
bool mgr_jobs_stalled(struct mgr *m);
/* Switch lower reports its link to upper (the tier above) down or back:
 * noted for the tree builder; down: the jobs whose tree crosses it get a
 * tree that avoids it, else the host ring; back: jobs on the ring try
 * again. Caller holds the lock and saves. */
void mgr_link_changed(struct mgr *m, int lower, int upper, bool down);
/* Jobs on the ring whose tree can be built now go back in-network (tried
 * again only when capacity_gen moved on). Whether any did. */
bool mgr_jobs_retry(struct mgr *m);
/* j's family (its rails, j among them) in rail order into f (MGR_MAX_RAILS
 * entries; a rail not registered yet: NULL); its size, nrails (1: a job
 * of its own, f[0] = j). */
int mgr_job_family(struct mgr *m, struct mgr_job *j, struct mgr_job **f);
/* The first rail of f[0..n-1] that is there (n: none). A family is
 * counted, or tried, at that one. */
static inline int mgr_family_first(struct mgr_job *const *f, int n)
{
	int l = 0;

	while (l < n && !f[l])
		l++;
	return l;
}
/* Every rail of j's family here and all their ranks registered. */
bool mgr_family_complete(struct mgr *m, struct mgr_job *j);
/* A rank of j left, or j went (teardown: then its rails): the cut may be
 * due without them. */
void mgr_job_cut_check(struct mgr *m, struct mgr_job *j);
/* The tenant's jobs, a job's rails counting as one. */
unsigned mgr_tenant_jobs(struct mgr *m, int tenant);

/* ---- the API (api.c) ---- */

/* method "GET"/"POST"/"DELETE", path "/v1/...", token the bearer token
 * (NULL: none), body JSON text or NULL. Returns the HTTP status; the
 * response body (JSON, or Prometheus text for /metrics) is malloc'ed in
 * *resp and its type in *ctype. */
int mgr_api(struct mgr *m, const char *method, const char *path, const char *token,
	    const char *body, char **resp, const char **ctype);
/* The same for a front end that parks held requests: MGR_PARKED (0) means
 * held, *park linked where it waits (its hold called); once its wake is
 * called, call again with park->resumed set for the answer. mgr_api is
 * this with the calling thread waiting on m->changed. */
#define MGR_PARKED 0
int mgr_api_request(struct mgr *m, const char *method, const char *path, const char *token,
		    const char *body, struct mgr_parked *park, char **resp, const char **ctype);

/* ---- persistence (persist.c) ---- */

/*
 * The state as rows in SQLite (jobs, ranks, groups, switches' versions,
 * failures, meta), brought up to date in one transaction per call: only
 * the jobs that changed since the last save are rewritten. 0, or -1 (logged;
 * the next call tries again).
 */
int mgr_save(struct mgr *m);
int mgr_load(struct mgr *m, char *err, size_t errlen);
void mgr_db_close(struct mgr *m);
/* Rank r's own fields (registration, leave, acknowledgement) changed: its
 * row is written at the next save. */
static inline void mgr_rank_touched(struct mgr_job *j, int r)
{
	if (j->dirty_lo < 0 || r < j->dirty_lo)
		j->dirty_lo = r;
	if (r > j->dirty_hi)
		j->dirty_hi = r;
}
/* A job leaves the state (mgr_job_teardown): its rows go at the next save. */
void mgr_persist_gone(struct mgr *m, const char *id);

#endif /* INCA_MGR_H */
