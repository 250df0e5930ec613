/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The verbs transport: an rdma-core UD queue pair on a real RoCE NIC or
 * Soft-RoCE. The NIC builds BTH/DETH/ICRC; we post the INCA message (header
 * + elements) as a UD SEND to the switch's group QPN with the group's
 * Q_Key, and receive results into buffers that start with the 40-byte GRH.
 * The NIC assigns the QP number: in manager mode the QP is made first and
 * its number registered; in a static group the member's qpn must be the
 * one the NIC gives (logged at start; rxe hands out 17 first).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hl_priv.h"

#ifdef INCA_HAVE_VERBS
#include <infiniband/verbs.h>

#define GRH_LEN 40
#define MSG_MAX (AGG_INCA_HLEN + AGG_MAX_PAYLOAD)
#define SEND_DEPTH 128
#define RECV_DEPTH 256

struct verbs_state {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *send_cq, *recv_cq;
	struct ibv_qp *qp;
	struct ibv_ah *ah;
	struct ibv_mr *mr;
	uint8_t *buf;             /* SEND_DEPTH send slots, then RECV_DEPTH recv slots */
	unsigned send_next, send_outstanding;
	unsigned repost[64], nrepost;   /* handed out last time: repost next time */
	uint8_t port;
	int gid_index;
};

#define SEND_SLOT(v, i) ((v)->buf + (size_t)(i) * MSG_MAX)
#define RECV_SLOT(v, i) ((v)->buf + (size_t)SEND_DEPTH * MSG_MAX + \
			 (size_t)(i) * (GRH_LEN + MSG_MAX))

static int post_recv(struct verbs_state *v, unsigned i)
{
	struct ibv_sge sge = { .addr = (uintptr_t)RECV_SLOT(v, i),
			       .length = GRH_LEN + MSG_MAX, .lkey = v->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(v->qp, &wr, &bad);
}

/* The GID whose address is ::ffff:my_ip (RoCEv2 over IPv4). */
static int find_gid(struct inca_comm *c, struct verbs_state *v)
{
	struct ibv_port_attr pa;
	const char *e = getenv("INCA_GID_INDEX");

	if (e)
		return atoi(e);
	if (ibv_query_port(v->ctx, v->port, &pa))
		return -1;
	for (int i = 0; i < pa.gid_tbl_len; i++) {
		union ibv_gid gid;
		uint32_t ip;

		if (ibv_query_gid(v->ctx, v->port, i, &gid))
			continue;
		memcpy(&ip, gid.raw + 12, 4);
		if (!memcmp(gid.raw, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) &&
		    ntohl(ip) == c->my_ip)
			return i;
	}
	return -1;
}

static void verbs_close(struct inca_comm *c)
{
	struct verbs_state *v = c->tp_state;

	if (!v)
		return;
	if (v->ah)
		ibv_destroy_ah(v->ah);
	if (v->qp)
		ibv_destroy_qp(v->qp);
	if (v->mr)
		ibv_dereg_mr(v->mr);
	if (v->send_cq)
		ibv_destroy_cq(v->send_cq);
	if (v->recv_cq)
		ibv_destroy_cq(v->recv_cq);
	if (v->pd)
		ibv_dealloc_pd(v->pd);
	if (v->ctx)
		ibv_close_device(v->ctx);
	free(v->buf);
	free(v);
	c->tp_state = NULL;
}

/* Device, PD, CQs, buffers and the UD QP (in RESET): its number exists
 * from here on. */
static int verbs_setup(struct inca_comm *c)
{
	struct ibv_device **list;
	struct verbs_state *v;
	const char *want = getenv("INCA_IBDEV");
	int n = 0, rc;

	v = calloc(1, sizeof(*v));
	if (!v)
		return hl_fail(c, INCA_ERR_NOMEM, "out of memory");
	c->tp_state = v;
	v->port = (uint8_t)(getenv("INCA_IBPORT") ? atoi(getenv("INCA_IBPORT")) : 1);
	list = ibv_get_device_list(&n);
	if (!list || n == 0) {
		if (list)
			ibv_free_device_list(list);
		verbs_close(c);
		return hl_fail(c, INCA_ERR_TRANSPORT, "no RDMA device (ibv_get_device_list "
			       "found none: no NIC driver or rdma_rxe link?)");
	}
	for (int i = 0; i < n && !v->ctx; i++)
		if (!want || !strcmp(ibv_get_device_name(list[i]), want))
			v->ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!v->ctx) {
		verbs_close(c);
		return hl_fail(c, INCA_ERR_TRANSPORT, "cannot open RDMA device %s",
			       want ? want : "(first)");
	}
	v->gid_index = find_gid(c, v);
	if (v->gid_index < 0) {
		verbs_close(c);
		return hl_fail(c, INCA_ERR_TRANSPORT, "no RoCEv2 GID for member %d's address "
			       "on port %u (set INCA_GID_INDEX)", c->rank, v->port);
	}
	v->buf = calloc((size_t)SEND_DEPTH * MSG_MAX +
			(size_t)RECV_DEPTH * (GRH_LEN + MSG_MAX), 1);
	v->pd = v->buf ? ibv_alloc_pd(v->ctx) : NULL;
	v->send_cq = v->pd ? ibv_create_cq(v->ctx, SEND_DEPTH, NULL, NULL, 0) : NULL;
	v->recv_cq = v->send_cq ? ibv_create_cq(v->ctx, RECV_DEPTH, NULL, NULL, 0) : NULL;
	v->mr = v->recv_cq ? ibv_reg_mr(v->pd, v->buf, (size_t)SEND_DEPTH * MSG_MAX +
					(size_t)RECV_DEPTH * (GRH_LEN + MSG_MAX),
					IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!v->mr) {
		rc = errno;
		verbs_close(c);
		return hl_fail(c, INCA_ERR_TRANSPORT, "verbs set-up (pd/cq/mr): %s",
			       strerror(rc));
	}
	struct ibv_qp_init_attr qia = {
		.send_cq = v->send_cq, .recv_cq = v->recv_cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = SEND_DEPTH, .max_recv_wr = RECV_DEPTH,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	v->qp = ibv_create_qp(v->pd, &qia);
	if (!v->qp) {
		rc = errno;
		verbs_close(c);
		return hl_fail(c, INCA_ERR_TRANSPORT, "create UD QP: %s", strerror(rc));
	}
	return 0;
}

/* In manager mode: the QP exists before the rank registers, with the QPN
 * the NIC chose. */
static int verbs_reserve(struct inca_comm *c)
{
	int rc = verbs_setup(c);

	if (rc)
		return rc;
	c->my_qpn = ((struct verbs_state *)c->tp_state)->qp->qp_num;
	return 0;
}

/* The address handle of the switch (c->g.switch_ip). */
static int make_ah(struct inca_comm *c, struct verbs_state *v)
{
	struct ibv_ah_attr ah = {
		.is_global = 1, .port_num = v->port,
		.grh = { .sgid_index = (uint8_t)v->gid_index, .hop_limit = 64,
			 .traffic_class = 26 << 2 | 2 },
	};
	uint32_t sip = htonl(c->g.switch_ip);

	memcpy(ah.grh.dgid.raw + 10, "\xff\xff", 2);
	memcpy(ah.grh.dgid.raw + 12, &sip, 4);
	v->ah = ibv_create_ah(v->pd, &ah);
	if (!v->ah)
		return hl_fail(c, INCA_ERR_TRANSPORT, "address handle for the switch: %s",
			       strerror(errno));
	return 0;
}

/* Ready the QP for the group (Q_Key, address handle of the switch). */
static int verbs_open(struct inca_comm *c)
{
	struct verbs_state *v;
	int rc;

	if (!c->tp_state && (rc = verbs_setup(c)))
		return rc;
	v = c->tp_state;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .pkey_index = 0,
				 .port_num = v->port, .qkey = c->g.qkey };
	if (ibv_modify_qp(v->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_QKEY))
		goto modify_failed;
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR };
	if (ibv_modify_qp(v->qp, &a, IBV_QP_STATE))
		goto modify_failed;
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .sq_psn = 0 };
	if (ibv_modify_qp(v->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		goto modify_failed;

	/* no switch yet: a job on the host ring (the manager's plan) */
	if (c->g.switch_ip && (rc = make_ah(c, v))) {
		verbs_close(c);
		return rc;
	}
	for (unsigned i = 0; i < RECV_DEPTH; i++)
		if (post_recv(v, i)) {
			verbs_close(c);
			return hl_fail(c, INCA_ERR_TRANSPORT, "post receive buffers failed");
		}
	if (v->qp->qp_num != c->my_qpn) {
		uint32_t got = v->qp->qp_num;
		verbs_close(c);
		return hl_fail(c, INCA_ERR_CONFIG, "the NIC gave this rank QPN %u but the "
			       "group description says member %d has QPN %u: put %u there",
			       got, c->rank, c->my_qpn, got);
	}
	HL_INFO("rank %d: verbs: UD QP %u, GID index %d, port %u", c->rank,
		v->qp->qp_num, v->gid_index, v->port);
	return 0;

modify_failed:
	rc = errno;
	verbs_close(c);
	return hl_fail(c, INCA_ERR_TRANSPORT, "UD QP state change: %s", strerror(rc));
}

static void reap_sends(struct verbs_state *v)
{
	struct ibv_wc wc[32];
	int n;

	while ((n = ibv_poll_cq(v->send_cq, 32, wc)) > 0)
		v->send_outstanding -= (unsigned)n;
}

static int verbs_send(struct inca_comm *c, const struct hl_frame *f, unsigned n)
{
	struct verbs_state *v = c->tp_state;
	unsigned i;

	reap_sends(v);
	for (i = 0; i < n && v->send_outstanding < SEND_DEPTH; i++) {
		uint8_t *slot = SEND_SLOT(v, v->send_next);
		struct ibv_sge sge = { .addr = (uintptr_t)slot, .length = f[i].msg_len,
				       .lkey = v->mr->lkey };
		struct ibv_send_wr wr = {
			.wr_id = v->send_next, .sg_list = &sge, .num_sge = 1,
			.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
			.wr.ud = { .ah = v->ah, .remote_qpn = c->g.group_qpn,
				   .remote_qkey = c->g.qkey },
		}, *bad;

		memcpy(slot, f[i].data + f[i].msg_off, f[i].msg_len);
		if (ibv_post_send(v->qp, &wr, &bad))
			return i ? (int)i : hl_fail(c, INCA_ERR_TRANSPORT, "post send: %s",
						    strerror(errno));
		v->send_next = (v->send_next + 1) % SEND_DEPTH;
		v->send_outstanding++;
	}
	return (int)i;
}

static int verbs_recv(struct inca_comm *c, struct hl_rx *rx, unsigned max, int timeout_us)
{
	struct verbs_state *v = c->tp_state;
	struct ibv_wc wc[64];
	double until = c->now_us(c) + timeout_us;
	int n, out = 0;

	if (max > 64)
		max = 64;
	/* the caller is done with what the previous call returned */
	for (unsigned i = 0; i < v->nrepost; i++)
		if (post_recv(v, v->repost[i]))
			return hl_fail(c, INCA_ERR_TRANSPORT, "repost receive buffer failed");
	v->nrepost = 0;
	for (;;) {
		n = ibv_poll_cq(v->recv_cq, (int)max, wc);
		if (n < 0)
			return hl_fail(c, INCA_ERR_TRANSPORT, "poll receive CQ failed");
		if (n > 0 || c->now_us(c) >= until)
			break;
		struct timespec ts = { 0, 20000 };
		nanosleep(&ts, NULL);
	}
	reap_sends(v);
	for (int i = 0; i < n; i++) {
		unsigned slot = (unsigned)wc[i].wr_id;
		if (wc[i].status != IBV_WC_SUCCESS || wc[i].byte_len < GRH_LEN) {
			c->stats.rx_dropped++;
		} else {
			rx[out++] = (struct hl_rx){
				.kind = HL_RX_MSG,
				.msg = RECV_SLOT(v, slot) + GRH_LEN,
				.len = wc[i].byte_len - GRH_LEN,
				.src_qp = wc[i].src_qp,
				.len_wire = wc[i].byte_len - GRH_LEN + AGG_FRAME_HDR_LEN -
					    AGG_INCA_HLEN + AGG_ICRC_LEN,
			};
		}
		v->repost[v->nrepost++] = slot;
	}
	return out;
}

/* The group moved to another switch (the manager's plan): its address
 * handle, and the group's Q_Key on our QP (RTS to RTS). */
static int verbs_retarget(struct inca_comm *c)
{
	struct verbs_state *v = c->tp_state;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS, .qkey = c->g.qkey };

	if (v->ah) {
		ibv_destroy_ah(v->ah);
		v->ah = NULL;
	}
	if (ibv_modify_qp(v->qp, &a, IBV_QP_STATE | IBV_QP_QKEY))
		return hl_fail(c, INCA_ERR_TRANSPORT, "the new group's Q_Key on QP %u: %s",
			       v->qp->qp_num, strerror(errno));
	return make_ah(c, v);
}

const struct hl_transport_ops hl_verbs_ops = {
	.name = "verbs",
	.reserve = verbs_reserve,
	.open = verbs_open,
	.close = verbs_close,
	.send = verbs_send,
	.recv = verbs_recv,
	.retarget = verbs_retarget,
};

#else /* !INCA_HAVE_VERBS */

static int verbs_unavailable(struct inca_comm *c)
{
	return hl_fail(c, INCA_ERR_UNSUPPORTED, "libinca was built without rdma-core "
		       "(install libibverbs-dev and rebuild)");
}

static void verbs_none(struct inca_comm *c)
{
	(void)c;
}

const struct hl_transport_ops hl_verbs_ops = {
	.name = "verbs",
	.open = verbs_unavailable,
	.close = verbs_none,
};
#endif
