/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The switch's two globals: the one switch a process runs (main.c starts
 * it; the workers, the telemetry and the agent read it) and the log type
 * DP_LOG writes with.
 */
#include "dp_priv.h"

RTE_LOG_REGISTER_DEFAULT(dp_logtype, INFO);

struct dp_switch dp_sw;
