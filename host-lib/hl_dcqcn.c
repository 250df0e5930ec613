/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * DCQCN reaction point (Zhu et al., "Congestion Control for Large-Scale
 * RDMA Deployments", SIGCOMM 2015): a rate limiter per QP, cut on every
 * CNP by alpha/2, alpha a moving average of congestion, and recovery in
 * fast-recovery, additive and hyper-increase stages driven by a timer and
 * a byte counter. Time is passed in, so the rate after any sequence of
 * events is exact (tests/unit/test_hostlib.c).
 */
#include "hl_priv.h"

/* Gbit/s -> bytes per µs */
#define GBPS(x) ((x) * 1000.0 / 8.0)

void hl_dcqcn_params_default(struct hl_dcqcn_params *p, double line_gbps)
{
	*p = (struct hl_dcqcn_params){
		.line_rate = GBPS(line_gbps),
		.min_rate = GBPS(0.01),          /* 10 Mbit/s floor */
		.g = 1.0 / 256,                  /* paper: g = 1/256 */
		.alpha_period_us = 55,           /* paper: K = 55 µs */
		.timer_period_us = 55,           /* paper: T = 55 µs */
		.byte_counter = 10u << 20,       /* paper: B = 10 MB */
		.fast_recovery_steps = 5,        /* paper: F = 5 */
		.rate_ai = GBPS(0.04),           /* paper: R_AI = 40 Mbit/s */
		.rate_hai = GBPS(0.4),           /* ours: 10 x R_AI */
	};
}

void hl_dcqcn_init(struct hl_dcqcn *d, const struct hl_dcqcn_params *p, double now_us)
{
	*d = (struct hl_dcqcn){ .p = *p, .rc = p->line_rate, .rt = p->line_rate,
				.alpha = 1.0, .last_alpha_us = now_us,
				.last_timer_us = now_us, .last_pace_us = now_us };
	/* 64 KiB of burst, as a NIC's rate limiter allows a few packets */
	d->bucket = 65536;
	d->tokens = d->bucket;
}

static void rate_increase(struct hl_dcqcn *d)
{
	const struct hl_dcqcn_params *p = &d->p;
	unsigned hi = d->t_stage > d->b_stage ? d->t_stage : d->b_stage;
	unsigned lo = d->t_stage < d->b_stage ? d->t_stage : d->b_stage;

	if (hi < p->fast_recovery_steps)
		;                                     /* fast recovery */
	else if (lo > p->fast_recovery_steps)
		d->rt += (lo - p->fast_recovery_steps) * p->rate_hai;  /* hyper */
	else
		d->rt += p->rate_ai;                  /* additive */
	if (d->rt > p->line_rate)
		d->rt = p->line_rate;
	d->rc = (d->rt + d->rc) / 2;
	/* halving the gap never closes it in floating point: snap */
	if (d->rc > p->line_rate || p->line_rate - d->rc < 1e-6)
		d->rc = p->line_rate;
}

void hl_dcqcn_on_cnp(struct hl_dcqcn *d, double now_us)
{
	hl_dcqcn_advance(d, now_us, 0);
	d->cnps++;
	d->rt = d->rc;
	d->rc *= 1.0 - d->alpha / 2;
	if (d->rc < d->p.min_rate)
		d->rc = d->p.min_rate;
	d->alpha = (1 - d->p.g) * d->alpha + d->p.g;
	d->t_stage = d->b_stage = 0;
	d->bytes = 0;
	d->last_alpha_us = d->last_timer_us = now_us;
}

void hl_dcqcn_advance(struct hl_dcqcn *d, double now_us, uint64_t bytes_sent)
{
	const struct hl_dcqcn_params *p = &d->p;

	while (now_us - d->last_alpha_us >= p->alpha_period_us) {
		d->alpha *= 1 - p->g;
		d->last_alpha_us += p->alpha_period_us;
	}
	/* nothing to recover at line rate: keep the stages at rest */
	while (now_us - d->last_timer_us >= p->timer_period_us) {
		d->last_timer_us += p->timer_period_us;
		if (d->rc < p->line_rate) {
			d->t_stage++;
			rate_increase(d);
		}
	}
	d->bytes += bytes_sent;
	while (d->bytes >= p->byte_counter) {
		d->bytes -= p->byte_counter;
		if (d->rc < p->line_rate) {
			d->b_stage++;
			rate_increase(d);
		}
	}
}

bool hl_dcqcn_may_send(struct hl_dcqcn *d, double now_us, uint32_t len)
{
	d->tokens += (now_us - d->last_pace_us) * d->rc;
	d->last_pace_us = now_us;
	if (d->tokens > d->bucket)
		d->tokens = d->bucket;
	if (d->tokens < len)
		return false;
	d->tokens -= len;
	return true;
}
