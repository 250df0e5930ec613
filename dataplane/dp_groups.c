/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The switch's groups: a lock-free hash from QPN to group for the
 * workers, and adding and deleting groups while they run (the static
 * config and the manager's agent alike, under sw->ctl_lock; a deleted
 * group's memory is freed once every worker has passed a quiescent state,
 * RCU). Each group's engine (aggregation/) is sharded over the workers.
 */
#include <rte_ethdev.h>
#include <rte_hash.h>
#include <rte_jhash.h>
#include <rte_malloc.h>
#include <rte_rcu_qsbr.h>

#include "dp_priv.h"

int dp_groups_init(struct dp_switch *sw)
{
	struct rte_hash_parameters hp = {
		.name = "inca_groups",
		.entries = DP_MAX_GROUPS * 2,
		.key_len = sizeof(uint32_t),
		.hash_func = rte_jhash,
		.socket_id = (int)rte_socket_id(),
		/* workers look groups up while the agent adds and deletes */
		.extra_flag = RTE_HASH_EXTRA_FLAGS_RW_CONCURRENCY_LF,
	};
	const struct dp_config *cfg = sw->cfg;
	size_t sz = rte_rcu_qsbr_get_memsize(sw->nworkers);
	char err[256];

	pthread_mutex_init(&sw->ctl_lock, NULL);
	sw->rcu = rte_zmalloc("inca_rcu", sz, RTE_CACHE_LINE_SIZE);
	if (!sw->rcu || rte_rcu_qsbr_init(sw->rcu, sw->nworkers)) {
		DP_LOG(ERR, "group RCU: out of memory\n");
		return -ENOMEM;
	}
	sw->group_by_qpn = rte_hash_create(&hp);
	if (!sw->group_by_qpn) {
		DP_LOG(ERR, "group table: %s\n", rte_strerror(rte_errno));
		return -rte_errno;
	}
	for (uint16_t i = 0; i < cfg->ngroups; i++)
		if (dp_group_add(sw, &cfg->groups[i], err, sizeof(err))) {
			DP_LOG(ERR, "%s: groups[%u]: %s\n", cfg->path, i, err);
			return -EINVAL;
		}
	return 0;
}

static void group_free_slot(struct dp_group *g)
{
	agg_group_destroy(g->agg);
	rte_free(g->member_port);
	rte_free(g->member_mac);
	rte_free(g->member_vlan);
	rte_free(g->member_cnp_tsc);
	memset(g, 0, sizeof(*g));
}

struct dp_group *dp_group_find(struct dp_switch *sw, uint32_t group_id)
{
	for (uint16_t i = 0; i < sw->group_hwm; i++)
		if (sw->groups[i].agg &&
		    agg_group_config(sw->groups[i].agg)->group_id == group_id)
			return &sw->groups[i];
	return NULL;
}

int dp_group_add(struct dp_switch *sw, const struct dp_group_cfg *gc, char *err,
		 size_t errlen)
{
	const struct agg_group_config *ac = &gc->agg;
	struct dp_group *g = NULL;
	const char *why = NULL;
	uint16_t idx;
	int rc;

	pthread_mutex_lock(&sw->ctl_lock);
	if (dp_group_find(sw, ac->group_id)) {
		snprintf(err, errlen, "group %u exists", ac->group_id);
		rc = -EEXIST;
		goto out;
	}
	if (rte_hash_lookup(sw->group_by_qpn, &ac->qpn) >= 0) {
		snprintf(err, errlen, "QPN %u is another group's", ac->qpn);
		rc = -EEXIST;
		goto out;
	}
	for (idx = 0; idx < DP_MAX_GROUPS && sw->groups[idx].agg; idx++)
		;
	if (idx == DP_MAX_GROUPS) {
		snprintf(err, errlen, "the switch has %d groups, its maximum", DP_MAX_GROUPS);
		rc = -ENOSPC;
		goto out;
	}
	g = &sw->groups[idx];
	struct agg_group_config sharded = *ac;
	/* every worker owns some of its slots */
	sharded.shards = (uint16_t)sw->nworkers;
	g->shards = sw->nworkers;
	g->group_id = ac->group_id;
	g->agg = agg_group_create(&sharded, &why);
	if (!g->agg) {
		snprintf(err, errlen, "%s", why ? why : "rejected");
		rc = -EINVAL;
		goto out;
	}
	g->member_port = rte_malloc(NULL, sizeof(uint16_t) * ac->nmembers, 0);
	g->member_mac = rte_zmalloc(NULL, sizeof(*g->member_mac) * ac->nmembers, 0);
	g->member_vlan = rte_zmalloc(NULL, sizeof(*g->member_vlan) * ac->nmembers, 0);
	g->member_cnp_tsc = rte_zmalloc(NULL, sizeof(uint64_t) * ac->nmembers, 0);
	if (!g->member_port || !g->member_mac || !g->member_vlan || !g->member_cnp_tsc) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto out;
	}
	for (uint16_t m = 0; m < ac->nmembers; m++) {
		g->member_port[m] = UINT16_MAX;
		memcpy(g->member_mac[m].addr_bytes, ac->members[m].mac, 6);
	}
	/* everything in place before the workers can find it */
	rc = rte_hash_add_key_data(sw->group_by_qpn, &ac->qpn, (void *)(uintptr_t)idx);
	if (rc) {
		snprintf(err, errlen, "group table: %s", rte_strerror(-rc));
		goto out;
	}
	g = NULL;
	sw->ngroups++;
	if (idx >= sw->group_hwm)
		sw->group_hwm = (uint16_t)(idx + 1);
	DP_LOG(INFO, "group %u: qpn %u, %u members, window %u, %u elements per packet%s%s%s, "
	       "slots over %u workers\n", ac->group_id, ac->qpn, ac->nmembers, ac->window,
	       ac->elems_per_pkt, ac->reproducible ? ", reproducible" : "",
	       ac->parent.ip ? ", partials to a parent" : "",
	       ac->members[0].ranks ? ", ranks listed" : "", sw->groups[idx].shards);
out:
	if (g && rc)
		group_free_slot(g);
	pthread_mutex_unlock(&sw->ctl_lock);
	return rc;
}

int dp_group_del(struct dp_switch *sw, uint32_t group_id)
{
	struct dp_group *g;
	int32_t pos;

	pthread_mutex_lock(&sw->ctl_lock);
	g = dp_group_find(sw, group_id);
	if (!g) {
		pthread_mutex_unlock(&sw->ctl_lock);
		return -ENOENT;
	}
	uint32_t qpn = agg_group_config(g->agg)->qpn;
	pos = rte_hash_del_key(sw->group_by_qpn, &qpn);
	/* wait until no worker can still be using it, then free */
	if (sw->workers_running)
		rte_rcu_qsbr_synchronize(sw->rcu, RTE_QSBR_THRID_INVALID);
	if (pos >= 0)
		rte_hash_free_key_with_position(sw->group_by_qpn, pos);
	/* its counters stay in the switch's totals */
	struct agg_group_stats sum;
	const struct agg_group_stats *st = &sum;
	agg_group_stats_sum(g->agg, &sum);
	sw->retired.contributions += st->contributions;
	sw->retired.completions += st->completions;
	sw->retired.duplicates += st->duplicates;
	sw->retired.retransmits += st->retransmits;
	sw->retired.preempted += st->preempted;
	for (int d = 0; d < AGG_E__COUNT; d++)
		sw->retired.drops[d] += st->drops[d];
	group_free_slot(g);
	sw->ngroups--;
	pthread_mutex_unlock(&sw->ctl_lock);
	DP_LOG(INFO, "group %u deleted\n", group_id);
	return 0;
}

void dp_group_shard_sum(const struct dp_group *g, struct dp_group_shard *out)
{
	memset(out, 0, sizeof(*out));
	for (unsigned k = 0; k < g->shards; k++) {
		const struct dp_group_shard *s = &g->sh[k];

		out->cnp_sent += s->cnp_sent;
		out->cnp_limited += s->cnp_limited;
		out->up_sent += s->up_sent;
		out->up_no_route += s->up_no_route;
		out->up_no_data += s->up_no_data;
		out->results_sent += s->results_sent;
		out->results_no_data += s->results_no_data;
		out->results_no_route += s->results_no_route;
	}
}

void dp_groups_free(struct dp_switch *sw)
{
	for (uint16_t i = 0; i < sw->group_hwm; i++)
		if (sw->groups[i].agg)
			group_free_slot(&sw->groups[i]);
	sw->ngroups = 0;
	sw->group_hwm = 0;
	rte_hash_free(sw->group_by_qpn);
	sw->group_by_qpn = NULL;
	rte_free(sw->rcu);
	sw->rcu = NULL;
}
