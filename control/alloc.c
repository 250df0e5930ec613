/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Allocation: what the jobs hold on each switch (slots, groups), building
 * a job's tree within the switches' capacity and its tenant's quota, its
 * groups' QPNs and Q_Keys, and the QPN and ring port of every rank (unique
 * per address among the live jobs).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "mgr.h"

static void load_of(struct mgr *m, struct mgr_load *l, int tenant, uint32_t *tenant_slots)
{
	for (int s = 0; s < m->topo.nswitches; s++) {
		l->slots[s] = l->groups[s] = 0;
		l->down[s] = !m->sw[s].up;
		if (tenant_slots)
			tenant_slots[s] = 0;
	}
	for (struct mgr_job *j = m->jobs; j; j = j->next)
		for (int g = 0; g < j->ngroups; g++) {
			int s = j->groups[g].sw;
			l->slots[s] += j->window;
			l->groups[s]++;
			if (tenant_slots && j->tenant == tenant)
				tenant_slots[s] += j->window;
		}
}

/* Slots and groups the jobs hold on switch s. */
void mgr_switch_usage(struct mgr *m, int s, uint32_t *slots, uint32_t *groups)
{
	*slots = *groups = 0;
	for (struct mgr_job *j = m->jobs; j; j = j->next)
		for (int g = 0; g < j->ngroups; g++)
			if (j->groups[g].sw == s) {
				*slots += j->window;
				(*groups)++;
			}
}

static uint32_t free_qpn(struct mgr *m, int sw, const struct mgr_job *self)
{
	for (uint32_t q = 256;; q++) {
		bool used = false;
		for (struct mgr_job *j = m->jobs; j && !used; j = j->next)
			for (int g = 0; g < j->ngroups && !used; g++)
				used = j->groups[g].sw == sw && j->groups[g].qpn == q;
		for (int g = 0; self && g < self->ngroups && !used; g++)
			used = self->groups[g].sw == sw && self->groups[g].qpn == q;
		if (!used)
			return q;
	}
}

static uint32_t random_qkey(void)
{
	uint32_t k = 0;

	while (getrandom(&k, sizeof(k), 0) != sizeof(k))
		;
	return k & 0x7fffffffu;   /* the high bit means a privileged Q_Key */
}

/* All ranks are in: tree, quota, slots, groups (a new group id); the job
 * programming. 0, or -1 with j->reason and no groups. */
int mgr_job_allocate(struct mgr *m, struct mgr_job *j)
{
	int ns = m->topo.nswitches, *hosts = malloc(sizeof(int) * (size_t)j->size);
	uint32_t *slots = calloc((size_t)ns, 4), *groups = calloc((size_t)ns, 4);
	uint32_t *tslots = calloc((size_t)ns, 4);
	bool *down = calloc((size_t)ns, 1);
	struct mgr_load load = { slots, groups, down, m->link_down };
	const struct mgr_tenant *tn = &m->topo.tenants[j->tenant];
	int rc = -1;
	double t0;

	if (!hosts || !slots || !groups || !tslots || !down) {
		snprintf(j->reason, sizeof(j->reason), "out of memory");
		goto out;
	}
	for (int r = 0; r < j->size; r++)
		hosts[r] = j->ranks[r].host;
	load_of(m, &load, j->tenant, tslots);
	t0 = mgr_clock();
	rc = mgr_tree_build(&m->topo, hosts, j->size, &load, j->window, &j->tree, j->reason,
			    sizeof(j->reason));
	m->tree_builds++;
	m->tree_build_s_last = mgr_clock() - t0;
	if (m->tree_build_s_last > m->tree_build_s_max)
		m->tree_build_s_max = m->tree_build_s_last;
	if (rc)
		goto out;
	j->have_tree = true;
	j->ngroups = j->tree.nnodes;
	j->groups = calloc((size_t)j->ngroups, sizeof(*j->groups));
	if (!j->groups) {
		snprintf(j->reason, sizeof(j->reason), "out of memory");
		rc = -1;
		goto out;
	}
	for (int g = 0; g < j->ngroups; g++) {
		const struct mgr_tree_node *nd = &j->tree.nodes[g];
		j->groups[g] = (struct mgr_group){ .sw = nd->sw, .parent = nd->parent,
			.rank_in_parent = (uint16_t)(nd->parent >= 0 ? nd->child_index : 0) };
	}
	/* the tenant's quota on every switch of the tree */
	for (int g = 0; g < j->ngroups; g++) {
		int s = j->groups[g].sw;
		if (tslots[s] + j->window > tn->max_slots_per_switch) {
			snprintf(j->reason, sizeof(j->reason), "quota: tenant %s would use %u of "
				 "its %u slots on switch %s", tn->name, tslots[s] + j->window,
				 tn->max_slots_per_switch, m->topo.switches[s].name);
			rc = -1;
			goto out;
		}
	}
	j->group_id = m->next_group_id++;
	for (int g = 0; g < j->ngroups; g++) {
		struct mgr_group *gr = &j->groups[g];
		gr->qpn = free_qpn(m, gr->sw, j);
		gr->qkey = random_qkey();
		gr->version = ++m->sw[gr->sw].version;
	}
	j->state = MGR_JOB_PROGRAMMING;
	j->reason[0] = 0;
	rc = 0;
out:
	if (rc) {
		if (j->have_tree)
			mgr_tree_free(&j->tree);
		j->have_tree = false;
		free(j->groups);
		j->groups = NULL;
		j->ngroups = 0;
	}
	free(hosts);
	free(slots);
	free(groups);
	free(tslots);
	free(down);
	mgr_changed(m);
	return rc;
}

static uint32_t ring_addr(const struct mgr_rank *rk)
{
	return rk->ring_ip ? rk->ring_ip : rk->ip;
}

/*
 * Who holds value v on address addr, besides rank self_rank of job self:
 * QPNs are per rank address, ring ports (ring) per ring address. Returns
 * the job (and *rank) or NULL.
 */
struct mgr_job *mgr_rank_value_holder(struct mgr *m, bool ring, uint32_t addr, uint32_t v,
				      const struct mgr_job *self, int self_rank, int *rank)
{
	for (struct mgr_job *j = m->jobs; j; j = j->next)
		for (int r = 0; r < j->size; r++) {
			const struct mgr_rank *rk = &j->ranks[r];
			if (!rk->registered || (j == self && r == self_rank))
				continue;
			if (ring ? ring_addr(rk) == addr && rk->ring_port == v :
				   rk->ip == addr && rk->qpn == v) {
				*rank = r;
				return j;
			}
		}
	return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* The lowest value in first..max no other rank holds on addr: 0, or -1
 * when there is none (or no memory). */
int mgr_rank_value_free(struct mgr *m, bool ring, uint32_t addr, const struct mgr_job *self,
			int self_rank, uint32_t first, uint32_t max, uint32_t *out)
{
	size_t n = 0, cap = 0;
	uint32_t *used = NULL, v = first;

	for (struct mgr_job *j = m->jobs; j; j = j->next)
		for (int r = 0; r < j->size; r++) {
			const struct mgr_rank *rk = &j->ranks[r];
			if (!rk->registered || (j == self && r == self_rank) ||
			    (ring ? ring_addr(rk) : rk->ip) != addr)
				continue;
			if (n == cap) {
				uint32_t *u = realloc(used, sizeof(*used) * (cap = cap ? 2 * cap : 64));
				if (!u) {
					free(used);
					return -1;
				}
				used = u;
			}
			used[n++] = ring ? rk->ring_port : rk->qpn;
		}
	if (n)
		qsort(used, n, sizeof(*used), cmp_u32);
	for (size_t i = 0; i < n && v <= max; i++)
		if (used[i] == v)
			v++;
	free(used);
	if (v > max)
		return -1;
	*out = v;
	return 0;
}
