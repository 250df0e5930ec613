/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The aggregation path: RoCEv2 UD contributions addressed to the switch are
 * decoded, checked and reduced by the worker that owns their group, and on
 * completion one result per member leaves through the member's port.
 */
#include <rte_ethdev.h>
#include <rte_hash.h>
#include <rte_jhash.h>
#include <rte_malloc.h>

#include "dp_priv.h"

int dp_groups_init(struct dp_switch *sw)
{
	struct rte_hash_parameters hp = {
		.name = "inca_groups",
		.entries = DP_MAX_GROUPS * 2,
		.key_len = sizeof(uint32_t),
		.hash_func = rte_jhash,
		.socket_id = (int)rte_socket_id(),
	};
	const struct dp_config *cfg = sw->cfg;

	sw->group_by_qpn = rte_hash_create(&hp);
	if (!sw->group_by_qpn) {
		DP_LOG(ERR, "group table: %s\n", rte_strerror(rte_errno));
		return -rte_errno;
	}
	for (uint16_t i = 0; i < cfg->ngroups; i++) {
		const struct agg_group_config *ac = &cfg->groups[i].agg;
		struct dp_group *g = &sw->groups[i];
		const char *why = NULL;

		g->agg = agg_group_create(ac, &why);
		if (!g->agg) {
			DP_LOG(ERR, "%s: groups[%u]: %s\n", cfg->path, i, why);
			return -EINVAL;
		}
		g->owner = i % sw->nworkers;
		g->member_port = rte_malloc(NULL, sizeof(uint16_t) * ac->nmembers, 0);
		g->member_mac = rte_zmalloc(NULL, sizeof(*g->member_mac) * ac->nmembers, 0);
		g->member_vlan = rte_zmalloc(NULL, sizeof(*g->member_vlan) * ac->nmembers, 0);
		g->member_cnp_tsc = rte_zmalloc(NULL, sizeof(uint64_t) * ac->nmembers, 0);
		if (!g->member_port || !g->member_mac || !g->member_vlan ||
		    !g->member_cnp_tsc)
			return -ENOMEM;
		for (uint16_t m = 0; m < ac->nmembers; m++) {
			g->member_port[m] = UINT16_MAX;
			memcpy(g->member_mac[m].addr_bytes, ac->members[m].mac, 6);
		}
		int rc = rte_hash_add_key_data(sw->group_by_qpn, &ac->qpn,
					       (void *)(uintptr_t)i);
		if (rc)
			return rc;
		sw->ngroups = (uint16_t)(i + 1);
		DP_LOG(INFO, "group %u: qpn %u, %u members, window %u, %u elements "
		       "per packet%s, worker %u\n", ac->group_id, ac->qpn, ac->nmembers,
		       ac->window, ac->elems_per_pkt,
		       ac->reproducible ? ", reproducible" : "", g->owner);
	}
	return 0;
}

void dp_groups_free(struct dp_switch *sw)
{
	for (uint16_t i = 0; i < sw->ngroups; i++) {
		agg_group_destroy(sw->groups[i].agg);
		rte_free(sw->groups[i].member_port);
		rte_free(sw->groups[i].member_mac);
		rte_free(sw->groups[i].member_vlan);
		rte_free(sw->groups[i].member_cnp_tsc);
	}
	sw->ngroups = 0;
	rte_hash_free(sw->group_by_qpn);
	sw->group_by_qpn = NULL;
}

static void send_result(struct dp_switch *sw, struct dp_worker *w,
			struct dp_group *g, uint16_t member,
			const struct agg_result *res)
{
	uint16_t port = g->member_port[member];
	struct rte_mbuf *m;
	int len;

	if (unlikely(port == UINT16_MAX)) {
		g->results_no_route++;
		w->drops[DP_DROP_NO_ROUTE]++;
		return;
	}
	m = rte_pktmbuf_alloc(w->pool);
	if (unlikely(!m)) {
		w->drops[DP_DROP_NO_MBUF]++;
		return;
	}
	/* a member on a tagged link gets its results with its own VLAN and
	 * priority (PCP = traffic class) */
	struct agg_result_l2 l2 = {
		.switch_ip = sw->cfg->switch_ip,
		.dscp = sw->cfg->result_dscp,
		.has_vlan = g->member_vlan[member] != 0,
		.vlan_tci = (uint16_t)g->member_vlan[member],
	};
	memcpy(l2.src_mac, sw->port_mac[port].addr_bytes, 6);
	len = agg_result_encode(g->agg, member, res, &l2,
				g->member_mac[member].addr_bytes,
				rte_pktmbuf_mtod(m, void *), rte_pktmbuf_tailroom(m));
	if (unlikely(len < 0)) {
		rte_pktmbuf_free(m);
		w->drops[DP_DROP_NO_MBUF]++;
		return;
	}
	m->data_len = (uint16_t)len;
	m->pkt_len = (uint32_t)len;
	dp_classify_local(sw, m, sw->cfg->result_dscp);
	g->results_sent++;
	dp_tx(sw, w, port, m);
}

/* The contribution came CE-marked: the switch is its notification point
 * and tells the sender's QP, at most once per cnp_interval_us. */
static void send_cnp(struct dp_switch *sw, struct dp_worker *w, struct dp_group *g,
		     uint16_t member, const struct agg_pkt *pkt, uint16_t in)
{
	const struct dp_qos_cfg *q = &sw->cfg->qos;
	uint64_t now = rte_rdtsc();
	struct rte_mbuf *m;
	int len;

	if (g->member_cnp_tsc[member] &&
	    now - g->member_cnp_tsc[member] < (uint64_t)q->cnp_interval_us * sw->tsc_hz / 1000000) {
		g->cnp_limited++;
		w->cnp_limited++;
		return;
	}
	m = rte_pktmbuf_alloc(w->pool);
	if (unlikely(!m)) {
		w->drops[DP_DROP_NO_MBUF]++;
		return;
	}
	struct agg_frame_spec spec = {
		.has_vlan = pkt->has_vlan,
		.vlan_tci = pkt->vlan_tci,
		.src_ip = sw->cfg->switch_ip,
		.dst_ip = pkt->src_ip,
		.dscp = q->cnp_dscp,
		.dest_qp = pkt->src_qp,
	};
	memcpy(spec.dst_mac, pkt->src_mac, 6);
	memcpy(spec.src_mac, sw->port_mac[in].addr_bytes, 6);
	len = agg_encode_cnp(rte_pktmbuf_mtod(m, void *), rte_pktmbuf_tailroom(m), &spec);
	if (unlikely(len < 0)) {
		rte_pktmbuf_free(m);
		w->drops[DP_DROP_NO_MBUF]++;
		return;
	}
	m->data_len = (uint16_t)len;
	m->pkt_len = (uint32_t)len;
	dp_classify_local(sw, m, q->cnp_dscp);
	g->member_cnp_tsc[member] = now;
	g->cnp_sent++;
	w->cnp_sent++;
	dp_tx(sw, w, in, m);
}

void dp_agg_input(struct dp_switch *sw, struct dp_worker *w,
		  struct rte_mbuf *m, bool icrc_checked)
{
	struct agg_pkt pkt;
	struct agg_result res;
	struct dp_group *g;
	uint16_t member;
	void *data;
	int rc;

	if (unlikely(m->nb_segs > 1)) {
		w->drops[DP_DROP_MULTI_SEGMENT]++;
		goto out;
	}
	rc = agg_decode(rte_pktmbuf_mtod(m, void *), m->data_len, !icrc_checked, &pkt);
	if (unlikely(rc)) {
		w->agg_drops[-rc]++;
		goto out;
	}
	if (unlikely(pkt.kind != AGG_PKT_INCA)) {
		/* a CNP for the switch: it sends UD results, not RC traffic */
		w->drops[DP_DROP_NOT_CONTRIB]++;
		goto out;
	}
	rc = rte_hash_lookup_data(sw->group_by_qpn, &pkt.dest_qp, &data);
	if (unlikely(rc < 0)) {
		w->agg_drops[AGG_E_GROUP]++;
		goto out;
	}
	g = &sw->groups[(uintptr_t)data];
	if (g->owner != w->index) {
		/* only the owner touches the group's slots: no locks */
		if (rte_ring_enqueue(sw->workers[g->owner]->handoff, m)) {
			w->drops[DP_DROP_HANDOFF_FULL]++;
			goto out;
		}
		w->handoffs++;
		return;
	}

	rc = agg_group_ingest(g->agg, &pkt, &res, &member);
	if (rc < 0)
		goto out;           /* counted in the group's drops */
	/* results go back the way the member's contributions came */
	g->member_port[member] = dp_port_index(sw, m->port);
	g->member_vlan[member] = pkt.has_vlan ? (1u << 16 | pkt.vlan_tci) : 0;
	if (unlikely(pkt.ecn == 3) && sw->cfg->qos.cnp)
		send_cnp(sw, w, g, member, &pkt, g->member_port[member]);
	const uint8_t *cfg_mac = agg_group_config(g->agg)->members[member].mac;
	if (!(cfg_mac[0] | cfg_mac[1] | cfg_mac[2] | cfg_mac[3] | cfg_mac[4] | cfg_mac[5]))
		memcpy(g->member_mac[member].addr_bytes, pkt.src_mac, 6);

	if (rc == AGG_V_COMPLETE) {
		for (uint16_t i = 0; i < agg_group_config(g->agg)->nmembers; i++)
			send_result(sw, w, g, i, &res);
	} else if (rc == AGG_V_RETRANSMIT) {
		send_result(sw, w, g, member, &res);
	}
out:
	rte_pktmbuf_free(m);
}
