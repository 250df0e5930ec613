/* SPDX-License-Identifier: BSD-3-Clause */
/* inca-switch internals shared by the dataplane's files. */
#ifndef DP_PRIV_H
#define DP_PRIV_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <rte_common.h>
#include <rte_ether.h>
#include <rte_log.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include "inca/agg.h"

extern int dp_logtype;
#define DP_LOG(level, ...) \
	rte_log(RTE_LOG_##level, dp_logtype, "inca-switch: " __VA_ARGS__)

#define DP_MAX_PORTS    32
#define DP_MAX_WORKERS  16
#define DP_MAX_GROUPS   1024
#define DP_BURST        32
#define DP_EGRESS_SLOTS 4096     /* packets per software egress queue */
#define DP_HANDOFF_SIZE 4096     /* packets queued to another worker */

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
	X(NOT_CONTRIB,    "not_contribution")

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
	uint32_t queue_bytes;    /* egress queue limit (tail drop beyond) */
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

struct dp_group_cfg {
	struct agg_group_config agg;
	struct agg_member *members;
};

struct dp_config {
	char path[256];
	uint32_t switch_ip;          /* host byte order */
	uint8_t result_dscp;
	uint32_t idle_sleep_us;      /* 0: busy poll */
	uint32_t mac_age_s;
	struct dp_port_cfg port_default;
	struct dp_port_cfg ports[DP_MAX_PORTS];
	uint16_t ngroups;
	struct dp_group_cfg *groups;
	bool forward_only;           /* benchmark: no aggregation path */
	struct dp_impair impair;
};

/* Parse and validate; on error prints "FILE: FIELD: what was expected"
 * to stderr and returns -EINVAL. */
int dp_config_load(struct dp_config *cfg, const char *path);
void dp_config_free(struct dp_config *cfg);
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

/* ---- egress (dp_qos.c): software queue + token bucket per port ---- */

struct dp_egress {
	struct rte_mbuf *slots[DP_EGRESS_SLOTS];
	uint32_t head, tail;         /* tail - head packets queued */
	uint32_t bytes;              /* bytes queued */
	uint32_t limit_bytes;
	uint64_t rate_bps;
	double tokens;               /* bytes */
	double burst;                /* bucket depth, bytes */
	double bytes_per_tsc;
	uint64_t last_tsc;
};

void dp_egress_init(struct dp_egress *q, uint64_t rate_bps, uint32_t limit,
		    uint64_t tsc_hz);
/* Queue a packet; false (and the caller drops) when over the limit. */
bool dp_egress_enqueue(struct dp_egress *q, struct rte_mbuf *m);
/* Send what the bucket allows on (port, txq); returns packets sent. */
uint32_t dp_egress_flush(struct dp_egress *q, uint16_t port, uint16_t txq,
			 uint64_t now, uint64_t *tx_bytes);
void dp_egress_drain(struct dp_egress *q);

/* ---- the switch ---- */

struct dp_port_stats {
	uint64_t rx_pkts, rx_bytes, tx_pkts, tx_bytes, egress_drops;
};

struct dp_worker {
	unsigned index;
	unsigned lcore;
	struct rte_mempool *pool;
	struct rte_ring *handoff;            /* groups this worker owns */
	struct dp_egress egress[DP_MAX_PORTS];
	struct dp_port_stats port[DP_MAX_PORTS];
	uint64_t drops[DP_DROP_COUNT];
	uint64_t agg_drops[AGG_E__COUNT];    /* decode failures by reason */
	uint64_t arp_replies, icmp_replies, floods, handoffs;
	uint64_t busy_tsc;
	/* link impairment emulation */
	uint64_t rng;
	struct rte_mbuf *held[DP_MAX_PORTS];
	uint64_t held_tsc[DP_MAX_PORTS];
	uint64_t impair_lost, impair_duplicated, impair_reordered;
} __rte_cache_aligned;

/* A configured group and what the data path learns about its members. */
struct dp_group {
	struct agg_group *agg;
	unsigned owner;                      /* worker index */
	uint16_t *member_port;               /* UINT16_MAX: not seen yet */
	struct rte_ether_addr *member_mac;   /* configured or learnt */
	uint32_t *member_vlan;               /* TCI of its contributions | 1 << 16, 0 untagged */
	uint64_t results_sent;
	uint64_t results_no_route;
};

struct dp_switch {
	struct dp_config *cfg;
	uint16_t nports;
	uint16_t port_ids[DP_MAX_PORTS];
	uint16_t port_index[RTE_MAX_ETHPORTS];   /* DPDK port id -> index */
	struct rte_ether_addr port_mac[DP_MAX_PORTS];
	unsigned nworkers;
	struct dp_worker *workers[DP_MAX_WORKERS];
	struct dp_l2_table *l2;
	uint16_t ngroups;
	struct dp_group groups[DP_MAX_GROUPS];
	struct rte_hash *group_by_qpn;       /* QPN -> index in groups[] */
	uint64_t tsc_hz;
	uint64_t start_tsc;
	volatile bool quit;
};

extern struct dp_switch dp_sw;

/* dp_port.c */
int dp_ports_init(struct dp_switch *sw);
void dp_ports_close(struct dp_switch *sw);

/* dp_agg.c */
int dp_groups_init(struct dp_switch *sw);
void dp_groups_free(struct dp_switch *sw);
/* m carries a frame addressed to the switch's IP and UDP port 4791. */
void dp_agg_input(struct dp_switch *sw, struct dp_worker *w,
		  struct rte_mbuf *m, bool icrc_checked);

/* dp_rx.c */
int dp_worker_main(void *arg);
void dp_tx(struct dp_switch *sw, struct dp_worker *w, uint16_t port_idx,
	   struct rte_mbuf *m);
static inline uint16_t dp_port_index(const struct dp_switch *sw, uint16_t port_id)
{
	return sw->port_index[port_id];
}

/* dp_telemetry.c */
int dp_telemetry_init(struct dp_switch *sw);
void dp_stats_line(struct dp_switch *sw, double interval_s);

#endif /* DP_PRIV_H */
