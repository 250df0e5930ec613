/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inca-manager's model: the topology (switches, hosts, links, tenants),
 * the tree builder (a pure function), jobs and the groups they hold on
 * switches, quotas, the HTTP API as a function of (method, path, token,
 * body), and persistence. The HTTP server (manager.c) and the tests call
 * the same functions.
 */
#ifndef INCA_MGR_H
#define INCA_MGR_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define MGR_NAME_LEN   48
#define MGR_TOKEN_LEN  128
#define MGR_HASH_LEN   32            /* SHA-256 */
#define MGR_MAX_SWITCHES 1024
#define MGR_MAX_HOSTS  65536
#define MGR_MAX_TENANTS 64

/* ---- topology (topo.c) ---- */

enum mgr_role { MGR_LEAF = 0, MGR_SPINE = 1 };

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
	uint8_t *link;               /* [leaf * nswitches + spine] */
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
static inline bool mgr_linked(const struct mgr_topo *t, int leaf, int spine)
{
	return t->link[(size_t)leaf * (size_t)t->nswitches + (size_t)spine];
}

/* ---- trees (tree.c): pure ---- */

/* What is used on each switch now (indexed like topo->switches). */
struct mgr_load {
	uint32_t *slots;
	uint32_t *groups;
	bool *down;                  /* NULL: all up */
};

struct mgr_tree {
	int root;                    /* switch index: the only switch, or the spine */
	int nleaves;                 /* 0: single switch */
	int *leaves;                 /* switch indices, ascending */
	int *leaf_of_rank;           /* per rank: its leaf (single switch: root) */
	int *index_in_leaf;          /* per rank: its member index at its leaf */
	int *leaf_fanin;             /* per leaf: ranks under it */
};

/*
 * Build the reduction tree for ranks on hosts[0..n-1] (host indices, rank
 * order), each switch needing one group and window slots. One leaf holds
 * them all: that leaf alone. Otherwise every leaf involved plus one spine
 * linked to all of them, the least loaded (slots used / max, then name).
 * Returns 0, or -1 with why filled (no common spine, capacity, a switch
 * down).
 */
int mgr_tree_build(const struct mgr_topo *t, const int *hosts, int n,
		   const struct mgr_load *load, uint32_t window, struct mgr_tree *out,
		   char *why, size_t whylen);
void mgr_tree_free(struct mgr_tree *tr);

/* ---- the manager's state (state.c) ---- */

enum mgr_job_state { JOB_WAITING, JOB_PROGRAMMING, JOB_READY, JOB_FAILED };

struct mgr_rank {
	bool registered, left;
	uint32_t ip, qpn;            /* qpn: unique on ip among the live jobs */
	uint32_t ring_ip;            /* the fallback ring's network; 0: ip */
	uint32_t ring_port;          /* unique on the ring's address; 0: none (old state) */
	int host;
};

/* What the manager hands out per host address when a rank does not ask:
 * QPNs from MGR_QPN_FIRST (below it are the QPNs RoCE reserves and the
 * static examples' 17.. stay usable), ring ports from MGR_RING_PORT_FIRST. */
#define MGR_QPN_FIRST        17
#define MGR_RING_PORT_FIRST  18515
/* Longest a heartbeat or a rank's GET may be held (long-poll). */
#define MGR_WAIT_MS_MAX      30000

/* One group of a job on one switch. */
struct mgr_group {
	int sw;                      /* switch index */
	uint32_t qpn, qkey;
	int parent;                  /* index in job->groups, -1: root */
	uint16_t rank_in_parent;
	uint32_t version;            /* the switch's desired version that has it */
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
	struct mgr_job *next;
};

struct mgr_switch_state {
	uint32_t version;            /* desired */
	uint32_t applied;            /* what its agent reports */
	double last_seen;            /* 0: never since start */
	bool up, ever;
	char last_error[256];
	json_t *counters;            /* from the last heartbeat */
};

struct mgr_failure {
	double t;
	char what[MGR_NAME_LEN];
	char reason[200];
};

struct mgr {
	struct mgr_topo topo;
	uint8_t admin_hash[MGR_HASH_LEN];   /* SHA-256 of the admin token */
	pthread_mutex_t lock;
	pthread_cond_t changed;      /* broadcast on every version or job state change */
	bool stopping;               /* held requests answer at once */
	struct mgr_switch_state *sw;
	struct mgr_job *jobs;
	uint32_t next_group_id;
	struct mgr_failure failures[256];
	unsigned nfailures;
	/* settings */
	double dead_after_s, lease_s, start_time;
	uint32_t default_window, default_elems, default_mtu;
	/* persistence */
	void *db;                    /* sqlite3 */
	char db_path[256];
	/* metrics */
	uint64_t requests, requests_refused, tree_builds;
	uint64_t polls_held, polls_woken, polls_timed_out, wakeups;
	unsigned polls_holding;      /* long-polls waiting now */
	uint64_t saves;
	double save_s_last, save_s_max;
	double tree_build_s_last, tree_build_s_max;
	/* clock, replaceable by tests */
	double (*now)(void);
};

int mgr_init(struct mgr *m, const char *topo_path, const char *db_path,
	     const char *admin_token, char *err, size_t errlen);
void mgr_fini(struct mgr *m);
double mgr_clock(void);

/* The API. method "GET"/"POST"/"DELETE", path "/v1/...", token the bearer
 * token (NULL: none), body JSON text or NULL. Returns the HTTP status; the
 * response body (JSON, or Prometheus text for /metrics) is malloc'ed in
 * *resp and its type in *ctype. */
int mgr_api(struct mgr *m, const char *method, const char *path, const char *token,
	    const char *body, char **resp, const char **ctype);

/* Periodic work: switches missing heartbeats, leases, readiness. */
void mgr_tick(struct mgr *m);

/* Answer every held request (shutdown). */
void mgr_stop(struct mgr *m);

/* Persistence: the whole state as one JSON document in SQLite. */
int mgr_save(struct mgr *m);
int mgr_load(struct mgr *m, char *err, size_t errlen);
void mgr_db_close(struct mgr *m);
void mgr_job_free(struct mgr_job *j);

const char *mgr_job_state_name(enum mgr_job_state s);
void mgr_ip_str(uint32_t ip, char buf[16]);
int mgr_parse_ip(const char *s, uint32_t *out);

#endif /* INCA_MGR_H */
