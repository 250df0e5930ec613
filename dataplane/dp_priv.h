/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inca-switch internals shared by the dataplane's files: the types first
 * (configuration, counters, queues, workers, groups, the switch), then one
 * section of declarations per file. One header on purpose (about 510
 * lines): the files share the same few structs, and one header keeps the
 * folder free of include loops.
 */
#ifndef DP_PRIV_H
#define DP_PRIV_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <rte_common.h>
#include <rte_ether.h>
#include <rte_log.h>
#include <rte_mbuf.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>
#include <rte_spinlock.h>

#include "inca/agg.h"

extern int dp_logtype;
#define DP_LOG(level, ...) \
	rte_log(RTE_LOG_##level, dp_logtype, "inca-switch: " __VA_ARGS__)

#define DP_MAX_PORTS    32
#define DP_MAX_WORKERS  16
#define DP_MAX_GROUPS   1024
#define DP_BURST        32
/* with an idle back-off: keep polling this long after the last packet */
#define DP_IDLE_SPIN_US 200
#define DP_NUM_TC       8
#define DP_TC_SLOTS     2048     /* packets per (worker, port, TC) egress queue */
#define DP_NO_PORT      0xffffu  /* mbuf ingress index of packets the switch made */
#define DP_NO_QPN       0xffffffffu  /* no QPN (they have 24 bits) */
#define DP_HANDOFF_SIZE 4096     /* packets queued to another worker */
#define DP_MAX_FRAME    9216     /* largest frame received or sent, without FCS */

/* Drop reasons of the switch itself (the aggregation engine's reasons come
 * from AGG_ERRORS). X(name, "counter") */
#define DP_DROPS(X) \
	X(RUNT,           "runt") \
	X(MULTI_SEGMENT,  "multi_segment") \
	X(NO_MBUF,        "no_mbuf") \
	X(HANDOFF_FULL,   "handoff_full") \
	X(EGRESS_FULL,    "egress_full") \
	X(HAIRPIN,        "l2_same_port") \
	X(LOCAL_UNHANDLED,"local_unhandled") \
	X(ARP_INVALID,    "arp_invalid") \
	X(NO_ROUTE,       "result_no_route") \
	X(NOT_CONTRIB,    "not_contribution") \
	X(LINK_LOCAL,     "link_local") \
	X(PFC_MALFORMED,  "pfc_malformed") \
	X(PFC_WATCHDOG,   "pfc_watchdog_ingress")

/* Why an egress queue refused or discarded a packet, counted per
 * (port, TC). X(name, "counter") */
#define DP_QDROPS(X) \
	X(LOSSY_FULL,     "lossy_queue_full") \
	X(RING_FULL,      "queue_slots_full") \
	X(HEADROOM,       "lossless_headroom_exceeded") \
	X(WATCHDOG,       "pfc_watchdog")

enum dp_qdrop {
	DP_Q_OK = 0,
#define DP_X_QENUM(n, c) DP_QDROP_##n,
	DP_QDROPS(DP_X_QENUM)
#undef DP_X_QENUM
	DP_QDROP_END
};
#define DP_QDROP_COUNT (DP_QDROP_END - 1)
extern const char *const dp_qdrop_names[DP_QDROP_END];

enum dp_drop {
#define DP_X_ENUM(n, c) DP_DROP_##n,
	DP_DROPS(DP_X_ENUM)
#undef DP_X_ENUM
	DP_DROP_COUNT
};
extern const char *const dp_drop_names[DP_DROP_COUNT];

/* ---- configuration (dp_config.c) ---- */

struct dp_port_cfg {
	uint64_t rate_bps;       /* 0: line rate, no shaping */
	uint32_t queue_bytes;    /* egress queue limit (tail drop beyond); 0: by rate */
	bool set;                /* named in the config file */
};

/* Link impairment emulated by the switch on every port, both directions
 * (for kernels without tc netem): probabilities scaled to 2^32. */
struct dp_impair {
	uint32_t loss;
	uint32_t duplicate;
	uint32_t reorder;            /* egress: held back behind the next packet */
	bool on;
};

enum dp_wd_action { DP_WD_DROP, DP_WD_FORWARD, DP_WD_ALERT };

/* Lossless fabric: classification, queues, PFC, ECN, CNP, watchdog. */
struct dp_qos_cfg {
	uint8_t dscp_tc[64];
	uint8_t lossless_mask;       /* bit t: TC t is lossless */
	uint8_t strict_mask;         /* bit t: TC t is served by strict priority */
	uint8_t wrr_weight[DP_NUM_TC];
	bool pfc;                    /* send and honour PFC on lossless TCs */
	uint32_t xoff_bytes, xon_bytes, headroom_bytes;
	uint16_t pause_quanta;       /* in the XOFF frames the switch sends */
	bool ecn;
	bool ecn_lossy;              /* mark ECT frames of lossy TCs too */
	uint32_t kmin_bytes, kmax_bytes;
	double pmax;
	bool cnp;
	uint32_t cnp_interval_us;
	uint8_t cnp_dscp;
	bool watchdog;
	uint32_t wd_detect_ms, wd_restore_ms;
	enum dp_wd_action wd_action;
};
void dp_qos_cfg_default(struct dp_qos_cfg *q);

struct dp_group_cfg {
	struct agg_group_config agg;
	struct agg_member *members;
	uint16_t *ranks;             /* every member's "ranks", one after another */
};

struct dp_config {
	char path[256];
	uint32_t switch_ip;          /* host byte order */
	uint32_t gateway;            /* routed placement: the next hop off the subnet; 0: none,
					every address is on the switch's links */
	uint8_t prefix_len;          /* the switch's subnet (with a gateway) */
	uint8_t result_dscp;
	uint32_t idle_sleep_us;      /* 0: busy poll */
	uint32_t idle_spin_us;       /* with idle_sleep_us: poll this long after
				      * the last packet before sleeping */
	uint32_t mac_age_s;
	struct dp_port_cfg port_default;
	struct dp_port_cfg ports[DP_MAX_PORTS];
	uint16_t ngroups;
	struct dp_group_cfg *groups;
	struct dp_qos_cfg qos;
	bool forward_only;           /* benchmark: no aggregation path */
	uint32_t pool_mbufs;         /* mbufs per worker pool; 0: by ports (benchmark) */
	struct dp_impair impair;
};

/* Where a frame for ip goes at L2: to ip on the switch's subnet (or with
 * no gateway: every address is on its links), else to the gateway. */
static inline uint32_t dp_next_hop(const struct dp_config *c, uint32_t ip)
{
	uint32_t mask = c->prefix_len ? ~0u << (32 - c->prefix_len) : 0;

	return c->gateway && ((ip ^ c->switch_ip) & mask) ? c->gateway : ip;
}

/* Parse and validate; on error prints "FILE: FIELD: what was expected"
 * to stderr and returns -EINVAL. */
int dp_config_load(struct dp_config *cfg, const char *path);
void dp_config_free(struct dp_config *cfg);
/* One group object (the config file's format) from the manager; on error
 * the message ("ORIGIN: group.FIELD: ...") is in err. Free it with
 * dp_group_cfg_free. */
struct json_t;
int dp_config_parse_group(struct json_t *o, const char *origin, struct dp_group_cfg *g,
			  char *err, size_t errlen);
void dp_group_cfg_free(struct dp_group_cfg *g);
/* "1gbit", "100mbit", "2.5gbit", "500kbit", "1000000" (bit/s) */
int dp_parse_rate(const char *s, uint64_t *bps);
/* netem-style "loss 1% duplicate 1% reorder 5%"; on error *bad points at
 * the offending word. */
int dp_parse_impair(const char *s, struct dp_impair *out, const char **bad);

/* ---- L2 table (dp_l2.c): lock-free, shared by all workers ---- */

struct dp_l2_table;
struct dp_l2_table *dp_l2_create(uint32_t entries);
void dp_l2_free(struct dp_l2_table *t);
void dp_l2_learn(struct dp_l2_table *t, const struct rte_ether_addr *mac,
		 uint16_t port, uint64_t now);
/* Returns the port, or -1 when unknown. */
int dp_l2_lookup(struct dp_l2_table *t, const struct rte_ether_addr *mac);
/* Forget entries not seen since now - max_age; returns how many. */
uint32_t dp_l2_age(struct dp_l2_table *t, uint64_t now, uint64_t max_age);
uint32_t dp_l2_count(struct dp_l2_table *t);

/* ---- egress (dp_qos.c): per (worker, port) TC queues, scheduler, shaping ---- */

/* State of one (port, TC) shared by every worker: plain fields used with
 * __atomic builtins, except those only worker 0 touches. */
struct dp_pq {
	uint32_t ingress_bytes;      /* buffer held by packets that came in here */
	uint32_t ingress_peak;
	uint64_t paused_until;       /* TSC: the peer paused this egress TC */
	uint64_t last_xoff_rx;       /* TSC of the last XOFF received */
	uint8_t wd_stormed;
	/* counters */
	uint64_t pfc_rx, pfc_rx_xon, pfc_rx_lossy, paused_tsc;
	uint64_t xoff_tx, xon_tx;
	uint64_t wd_storms, wd_restores;
	/* worker 0's bookkeeping (PFC generation, watchdog) */
	bool xoff_on;
	uint64_t xoff_refresh;
	uint64_t pause_since;
	uint64_t pfc_rx_at_since;
} __rte_cache_aligned;

#define DP_WD_EVENTS 64
struct dp_wd_event {
	double t_s;                  /* seconds since start */
	uint16_t port;
	uint8_t tc;
	bool storm;                  /* false: restored */
};

struct dp_qos {
	const struct dp_qos_cfg *cfg;
	struct dp_pq pq[DP_MAX_PORTS][DP_NUM_TC];
	uint64_t port_bps[DP_MAX_PORTS];     /* for pause quanta */
	uint64_t tsc_hz;
	rte_spinlock_t ev_lock;
	struct dp_wd_event events[DP_WD_EVENTS];
	uint64_t nevents;
};

static inline bool dp_tc_lossless(const struct dp_qos_cfg *c, unsigned tc)
{
	return c->lossless_mask >> tc & 1;
}

struct dp_tc_stats {
	uint64_t enq_pkts, tx_pkts, tx_bytes, ecn_marked;
	uint64_t drops[DP_QDROP_END];    /* refused at enqueue, or discarded */
	uint64_t discarded;              /* of those, discarded from the queue */
};

struct dp_tcq {
	struct rte_mbuf *slots[DP_TC_SLOTS];
	uint32_t head, tail;         /* tail - head packets queued */
	uint32_t bytes;
};

struct dp_egress {
	struct dp_tcq q[DP_NUM_TC];
	uint32_t bytes;              /* all TCs */
	uint8_t nonempty;            /* bit t: TC t has packets */
	struct rte_mbuf *pending[DP_BURST];  /* dequeued, refused by the NIC */
	uint32_t npending;
	uint32_t limit_bytes;        /* per lossy TC queue (tail drop beyond) */
	/* deficit round robin among the TCs not served by strict priority */
	uint8_t drr_cur;
	bool drr_fresh;
	int32_t deficit[DP_NUM_TC];
	/* token bucket */
	uint64_t rate_bps;
	double tokens, burst, bytes_per_tsc;
	uint64_t last_tsc;
	uint64_t rng;                /* ECN coin */
	/* where to and with what */
	uint16_t port_id, port_idx, txq;
	struct dp_qos *qos;
	struct dp_tc_stats *stats;   /* [DP_NUM_TC] of this worker and port */
};

void dp_egress_init(struct dp_egress *q, uint64_t rate_bps, uint32_t limit,
		    uint64_t tsc_hz, struct dp_qos *qos, uint16_t port_idx,
		    uint16_t port_id, uint16_t txq, struct dp_tc_stats *stats);
/* Queue a packet whose mbuf hash.sched carries its TC and ingress port
 * index (DP_NO_PORT: made by the switch). Returns DP_Q_OK, or why the
 * caller must drop it (counted by the caller). */
enum dp_qdrop dp_egress_enqueue(struct dp_egress *q, struct rte_mbuf *m);
/* Send what the scheduler, the pauses and the bucket allow; returns
 * packets sent. */
uint32_t dp_egress_flush(struct dp_egress *q, uint64_t now);
void dp_egress_drain(struct dp_egress *q);
static inline bool dp_egress_busy(const struct dp_egress *q)
{
	return q->nonempty || q->npending;
}

/* Offset of the IPv4 header (after an optional VLAN tag), or 0. */
static inline size_t dp_ipv4_offset(const struct rte_mbuf *m)
{
	const uint8_t *p = rte_pktmbuf_mtod(m, const uint8_t *);

	if (m->data_len >= 34 && p[12] == 0x08 && p[13] == 0x00)
		return 14;
	if (m->data_len >= 38 && p[12] == 0x81 && p[13] == 0x00 &&
	    p[16] == 0x08 && p[17] == 0x00)
		return 18;
	return 0;
}

/* ---- PFC and the watchdog (dp_pfc.c) ---- */

struct dp_switch;
struct dp_worker;
/* A frame to 01:80:C2:00:00:0X arrived on port index in: PFC is obeyed
 * (lossless TCs), the rest counted; m is consumed. */
void dp_pfc_input(struct dp_switch *sw, struct dp_worker *w, struct rte_mbuf *m,
		  uint16_t in, uint64_t now);
/* Worker 0, every loop: XOFF/refresh/XON from ingress occupancy, and the
 * watchdog. */
void dp_pfc_housekeeping(struct dp_switch *sw, struct dp_worker *w, uint64_t now);
/* Build and send one PFC frame on a port now (not queued, not shaped). */
int dp_pfc_send(struct dp_switch *sw, struct dp_worker *w, uint16_t port_idx,
		uint8_t enable, uint16_t quanta);

/* ---- the switch ---- */

struct dp_port_stats {
	uint64_t rx_pkts, rx_bytes, tx_pkts, tx_bytes, egress_drops;
	uint64_t pfc_malformed[AGG_PFC_E__COUNT];
};

struct dp_worker {
	unsigned index;
	unsigned lcore;
	struct rte_mempool *pool;
	struct rte_mempool *hdr_pool;        /* small: the headers of results that share a body */
	uint32_t hdr_data_off;               /* where a hdr_pool mbuf's data starts, from the mbuf */
	struct rte_mbuf *hdr_stash[3 * DP_BURST];  /* from hdr_pool in bulk, not reset yet */
	unsigned hdr_stashed;
	uint32_t last_qpn;                   /* the group the last contribution was for, */
	uint32_t last_group;                 /* its index: until the loop's quiescent point */
	struct rte_mbuf *body_next;          /* the next set's shared result body,
						its lines prefetched for writing a few
						at each contribution: */
	const char *body_pf;                 /* the next of them, */
	uint32_t body_pf_lines;              /* how many are left */
	struct rte_mbuf *body_raw;           /* the one after it: from the pool, not
						reset yet, its header lines on the way */
	struct rte_mbuf *spent[DP_BURST];    /* contributions done with, freed in bulk */
	unsigned nspent;
	struct rte_ring *handoff;            /* slots this worker owns, received elsewhere */
	struct dp_egress egress[DP_MAX_PORTS];
	struct dp_port_stats port[DP_MAX_PORTS];
	struct dp_tc_stats tc[DP_MAX_PORTS][DP_NUM_TC];
	uint64_t cnp_sent, cnp_limited;
	uint64_t drops[DP_DROP_COUNT];
	uint64_t agg_drops[AGG_E__COUNT];    /* decode failures by reason */
	uint64_t arp_replies, arp_requests, icmp_replies, floods, handoffs;
	uint64_t busy_tsc;
	uint64_t last_rx_tsc;        /* the last loop that found a packet */
	/* link impairment emulation */
	uint64_t rng;
	struct rte_mbuf *held[DP_MAX_PORTS];
	uint64_t held_tsc[DP_MAX_PORTS];
	uint64_t impair_lost, impair_duplicated, impair_reordered;
} __rte_cache_aligned;

/* Neighbours the switch resolved by ARP (parents in a tree): ip and
 * mac | port << 48, written with atomic stores, never evicted. */
#define DP_NEIGH_SIZE 256
struct dp_neigh {
	uint32_t ip;
	uint64_t macport;
};

/* What one worker counts for one group (only it writes them). */
struct dp_group_shard {
	uint64_t cnp_sent, cnp_limited;
	uint64_t up_sent, up_no_route, arp_tsc;
	uint64_t up_no_data;                 /* partials sent without elements */
	uint64_t results_sent;
	uint64_t results_no_data;            /* of which without elements */
	uint64_t results_no_route;
} __rte_cache_aligned;

/* A configured group and what the data path learns about its members.
 * Its slots are spread over the workers: slot s belongs to worker
 * (group id + s) % shards (shards = the workers when it was added), so one group uses
 * every core without locks; the member fields below are written by
 * whichever worker saw the member last (relaxed atomics). */
struct dp_group {
	struct agg_group *agg;
	unsigned shards;                     /* workers sharing its slots */
	uint32_t group_id;
	uint16_t *member_port;               /* UINT16_MAX: not seen yet */
	struct rte_ether_addr *member_mac;   /* configured or learnt */
	uint32_t *member_vlan;               /* TCI of its contributions | 1 << 16, 0 untagged */
	uint64_t *member_cnp_tsc;            /* when the last CNP went to it */
	uint32_t up_psn;                     /* PSN of partials to the parent (atomic) */
	struct dp_group_shard sh[DP_MAX_WORKERS];
};

/* The worker whose shard holds a group's slot: (group + slot) % workers,
 * the engine's shard (agg_group_config.shards), and with a power-of-two
 * worker count the low bits of the UDP source port hosts send that slot
 * from (0xC000 | ((group + slot) & 0x3FFF), docs/protocol.md 1.3). */
static inline unsigned dp_slot_owner(const struct dp_group *g, uint16_t slot)
{
	/* no division in the common case of one worker */
	return g->shards == 1 ? 0 : (g->group_id + slot) % g->shards;
}

/* A group's per-worker counters added up. */
void dp_group_shard_sum(const struct dp_group *g, struct dp_group_shard *out);

struct dp_switch {
	struct dp_config *cfg;
	uint16_t nports;
	uint16_t port_ids[DP_MAX_PORTS];
	uint16_t port_index[RTE_MAX_ETHPORTS];   /* DPDK port id -> index */
	struct rte_ether_addr port_mac[DP_MAX_PORTS];
	uint16_t port_mtu[DP_MAX_PORTS];
	bool port_multiseg[DP_MAX_PORTS];        /* sends chained mbufs */
	bool multiseg_any;                       /* some port does */
	unsigned nworkers;
	struct dp_worker *workers[DP_MAX_WORKERS];
	struct dp_l2_table *l2;
	uint16_t ngroups;                    /* groups in use */
	uint16_t group_hwm;                  /* groups[] beyond this are unused */
	struct dp_group groups[DP_MAX_GROUPS];   /* agg NULL: unused */
	struct rte_hash *group_by_qpn;       /* QPN -> index in groups[] */
	struct rte_rcu_qsbr *rcu;            /* workers' quiescent states */
	bool workers_running;
	pthread_mutex_t ctl_lock;            /* group changes vs. readers off the data path */
	struct agg_group_stats retired;      /* counters of deleted groups */
	struct dp_neigh neigh[DP_NEIGH_SIZE];
	uint64_t tsc_hz;
	uint64_t start_tsc;
	struct dp_qos *qos;
	volatile bool quit;
};

extern struct dp_switch dp_sw;

/* dp_qos.c: the shared QoS state (needs sw->cfg and sw->tsc_hz) */
int dp_qos_init(struct dp_switch *sw);
void dp_qos_free(struct dp_switch *sw);

/* dp_port.c */
int dp_ports_init(struct dp_switch *sw);
void dp_ports_close(struct dp_switch *sw);
/* Whether port's link is up: the kernel interface's carrier for a port on
 * one (af_packet, af_xdp), else the PMD's link status. Control threads. */
bool dp_port_link_up(const struct dp_switch *sw, uint16_t port);

/* dp_groups.c: groups, added and deleted at run time by the static config
 * and the manager's agent alike (the workers keep running) */
int dp_groups_init(struct dp_switch *sw);
void dp_groups_free(struct dp_switch *sw);
int dp_group_add(struct dp_switch *sw, const struct dp_group_cfg *gc, char *err,
		 size_t errlen);
int dp_group_del(struct dp_switch *sw, uint32_t group_id);
/* Under sw->ctl_lock. */
struct dp_group *dp_group_find(struct dp_switch *sw, uint32_t group_id);
/* dp_agg.c: the aggregation path */
/* m carries a frame addressed to the switch's IP and UDP port 4791. */
/* A received frame the worker is done with: freed with the others of its
 * burst, one pool access for them all. */
static inline void dp_free_spent(struct dp_worker *w)
{
	if (w->nspent) {
		rte_pktmbuf_free_bulk(w->spent, w->nspent);
		w->nspent = 0;
	}
}

static inline void dp_free_later(struct dp_worker *w, struct rte_mbuf *m)
{
	w->spent[w->nspent++] = m;
	if (unlikely(w->nspent == RTE_DIM(w->spent)))
		dp_free_spent(w);
}

void dp_agg_input(struct dp_switch *sw, struct dp_worker *w,
		  struct rte_mbuf *m, bool icrc_checked);
/* Give back the small mbufs a worker holds in advance (when it stops). */
void dp_worker_stash_free(struct dp_worker *w);

/* dp_switch.c: the one switch (and dp_logtype) */

/* dp_rx.c: the worker loop (an lcore each), classification */
int dp_worker_main(void *arg);

/* dp_neigh.c: the switch as an IP host */
/* Neighbour table: what ARP told us. Returns the port or -1. */
int dp_neigh_lookup(struct dp_switch *sw, uint32_t ip, struct rte_ether_addr *mac);

/* Ask for ip's MAC on every port (ARP request). */
void dp_arp_request(struct dp_switch *sw, struct dp_worker *w, uint32_t ip);
/* ARP at offset off: true if consumed (for the switch, or invalid),
 * false if it is someone else's to forward. */
bool dp_arp_input(struct dp_switch *sw, struct dp_worker *w, struct rte_mbuf *m,
		  uint16_t in, size_t off);
/* IPv4 for the switch's address other than RoCEv2: ping is answered, the
 * rest dropped and counted. */
void dp_local_input(struct dp_switch *sw, struct dp_worker *w, struct rte_mbuf *m,
		    uint16_t in, size_t off);

/* dp_tx.c: the end of every path */
/* Packets the switch makes: no ingress port, TC from their DSCP. */
void dp_classify_local(struct dp_switch *sw, struct rte_mbuf *m, uint8_t dscp);
/* Queue m on port_idx (through the impairment emulation when it is on). */
void dp_tx(struct dp_switch *sw, struct dp_worker *w, uint16_t port_idx,
	   struct rte_mbuf *m);
/* m to every port but in. */
void dp_flood(struct dp_switch *sw, struct dp_worker *w, struct rte_mbuf *m, uint16_t in);
/* Loss and duplication as a link would do them: true if m was consumed;
 * *dup a copy to send too, or NULL. */
bool dp_impair_link(struct dp_switch *sw, struct dp_worker *w, struct rte_mbuf *m,
		    struct rte_mbuf **dup);
/* A packet held back for reordering goes out after 1 ms at the latest. */
void dp_tx_release_held(struct dp_switch *sw, struct dp_worker *w, uint16_t port_idx,
			uint64_t now);
static inline uint16_t dp_port_index(const struct dp_switch *sw, uint16_t port_id)
{
	return sw->port_index[port_id];
}

/* dp_agent.c: the manager's agent, in its own thread (not an lcore): it
 * heartbeats at least every period_ms, long-polling for group changes.
 * start: 0 or a negative errno; destroy stops and joins the thread. */
struct dp_agent;
struct dp_agent *dp_agent_create(const char *manager, const char *name, const char *token);
int dp_agent_start(struct dp_agent *a, struct dp_switch *sw, unsigned period_ms);
void dp_agent_destroy(struct dp_agent *a);

/* dp_counters.c: every worker's and group shard's counters, added up */
struct dp_totals {
	struct dp_port_stats port[DP_MAX_PORTS];
	uint64_t drops[DP_DROP_COUNT];
	uint64_t agg_drops[AGG_E__COUNT];
	uint64_t arp_replies, arp_requests, icmp_replies, floods, handoffs;
	uint64_t impair_lost, impair_duplicated, impair_reordered;
	uint64_t contributions, completions, duplicates, retransmits, preempted;
	uint64_t busy_tsc;
	struct dp_tc_stats tc[DP_MAX_PORTS][DP_NUM_TC];
	uint64_t qdrops[DP_QDROP_END];
	uint64_t discarded;
	uint64_t cnp_sent, cnp_limited;
};
void dp_totals_sum(struct dp_switch *sw, struct dp_totals *t);
/* Every packet dropped, whatever the reason. */
uint64_t dp_totals_drops(const struct dp_totals *t);
/* A TSC interval in microseconds. */
static inline uint64_t dp_tsc_us(const struct dp_switch *sw, uint64_t tsc)
{
	return tsc * 1000000ull / sw->tsc_hz;
}

/* dp_telemetry.c: rte_telemetry's /inca/ commands, the --stats line */
int dp_telemetry_init(struct dp_switch *sw);
void dp_stats_line(struct dp_switch *sw, double interval_s);
/* dp_metrics.c: the same counters as Prometheus text, served on /metrics */
char *dp_metrics_text(struct dp_switch *sw);
struct dp_metrics;
struct dp_metrics *dp_metrics_start(struct dp_switch *sw, const char *listen_at, char *err,
				    size_t errlen);
void dp_metrics_stop(struct dp_metrics *m);

#endif /* DP_PRIV_H */
