/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * incactl: the operator's view of inca-manager. Human tables by default,
 * --json for scripts. Exit codes: 0 ok, 1 the manager refused (4xx/5xx
 * other than 401/403), 2 usage, 3 manager unreachable, 4 not authorised.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <jansson.h>

#include "inca_http.h"

enum { EX_OK = 0, EX_REFUSED = 1, EX_USAGE = 2, EX_UNREACHABLE = 3, EX_AUTH = 4 };

static const char *url = "http://127.0.0.1:8473";
static char token[256];
static bool as_json;

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: incactl [--manager URL] [--token-file FILE] [--cacert FILE] [--json] COMMAND\n"
		"\n"
		"Commands:\n"
		"  switches          switches: role, address, state, heartbeat, groups, slots\n"
		"  jobs              jobs: tenant, size, state, switches, reason\n"
		"  job ID            one job, with its tree\n"
		"  tree ID           a job's reduction tree, drawn\n"
		"  groups            the groups each switch holds\n"
		"  failures          switches that went down, jobs that failed, and why\n"
		"  counters SWITCH   the counters the switch last reported\n"
		"  delete ID         tear a job down (frees its slots everywhere)\n"
		"  metrics           the Prometheus metrics, as served\n"
		"\n"
		"  -m, --manager URL       default $INCA_MANAGER or http://127.0.0.1:8473\n"
		"  -k, --token-file FILE   default $INCA_MANAGER_TOKEN_FILE; or $INCA_MANAGER_TOKEN\n"
		"  -c, --cacert FILE       an https manager's CA (PEM); default\n"
		"                          $INCA_MANAGER_CACERT, else the system's CAs\n"
		"  -j, --json              the manager's JSON, for scripts\n"
		"\n"
		"Exit status: 0 ok, 1 refused by the manager, 2 usage, 3 manager unreachable,\n"
		"4 token missing or refused.\n");
}

static const char *str(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "";
}

static long long num(json_t *o, const char *k)
{
	return json_integer_value(json_object_get(o, k));
}

static void print_switches(json_t *a)
{
	size_t i;
	json_t *s;

	printf("%-12s %-6s %-15s %-8s %-10s %-10s %-12s %s\n", "SWITCH", "ROLE", "ADDRESS",
	       "STATE", "HEARTBEAT", "GROUPS", "SLOTS", "VERSION");
	json_array_foreach(a, i, s) {
		char hb[32] = "-", g[32], sl[32], v[32];
		if (json_object_get(s, "last_heartbeat_ms"))
			snprintf(hb, sizeof(hb), "%lld ms", num(s, "last_heartbeat_ms"));
		snprintf(g, sizeof(g), "%lld/%lld", num(s, "groups"), num(s, "max_groups"));
		snprintf(sl, sizeof(sl), "%lld/%lld", num(s, "slots"), num(s, "max_slots"));
		snprintf(v, sizeof(v), "%lld/%lld", num(s, "applied"), num(s, "version"));
		printf("%-12s %-6s %-15s %-8s %-10s %-10s %-12s %s%s%s\n", str(s, "name"),
		       str(s, "role"), str(s, "ip"), str(s, "state"), hb, g, sl, v,
		       *str(s, "error") ? "  error: " : "", str(s, "error"));
	}
}

static void print_jobs(json_t *a)
{
	size_t i, k;
	json_t *j, *s;

	printf("%-16s %-10s %-5s %-5s %-12s %-6s %-24s %s\n", "JOB", "TENANT", "SIZE", "RAIL",
	       "STATE", "GROUP", "SWITCHES", "REASON");
	json_array_foreach(a, i, j) {
		char sws[128] = "", st[32], rail[16] = "-";
		json_array_foreach(json_object_get(j, "switches"), k, s) {
			size_t n = strlen(sws);
			snprintf(sws + n, sizeof(sws) - n, "%s%s", n ? "," : "", json_string_value(s));
		}
		snprintf(st, sizeof(st), "%s", str(j, "state"));
		if (!strcmp(st, "waiting"))
			snprintf(st, sizeof(st), "waiting %lld/%lld", num(j, "registered"),
				 num(j, "size"));
		if (json_object_get(j, "rails"))
			snprintf(rail, sizeof(rail), "%lld/%lld", num(j, "rail"), num(j, "rails"));
		printf("%-16s %-10s %-5lld %-5s %-12s %-6lld %-24s %s\n", str(j, "id"),
		       str(j, "tenant"), num(j, "size"), rail, st, num(j, "group"),
		       sws[0] ? sws : "-", str(j, "reason"));
	}
}

static void print_ranks(json_t *ranks, const char *indent)
{
	size_t i, n = json_array_size(ranks);
	json_t *r;

	json_array_foreach(ranks, i, r)
		printf("%s%s rank %lld  %s qpn %lld\n", indent, i + 1 == n ? "└──" : "├──",
		       num(r, "rank"), str(r, "ip"), num(r, "qpn"));
}

/* A node's children (switches, each with its own below) or its ranks. */
static void print_below(json_t *node, const char *indent)
{
	json_t *children = json_object_get(node, "children"), *c;
	size_t i, n = json_array_size(children);
	char deeper[64];

	if (!children) {
		print_ranks(json_object_get(node, "ranks"), indent);
		return;
	}
	json_array_foreach(children, i, c) {
		bool last = i + 1 == n;
		printf("%s%s %s qpn %lld, fan-in %lld\n", indent, last ? "└──" : "├──",
		       str(c, "switch"), num(c, "qpn"), num(c, "fanin"));
		snprintf(deeper, sizeof(deeper), "%s%s", indent, last ? "    " : "│   ");
		print_below(c, deeper);
	}
}

static void print_tree(json_t *j)
{
	json_t *t = json_object_get(j, "tree"), *rails = json_object_get(j, "rail_jobs"), *r;
	size_t i;

	printf("job %s (tenant %s, %lld ranks, group %lld): %s%s%s\n", str(j, "id"),
	       str(j, "tenant"), num(j, "size"), num(j, "group"), str(j, "state"),
	       *str(j, "reason") ? ": " : "", str(j, "reason"));
	if (rails) {
		/* a job with rails: each rail's tree, in rail order */
		printf("%zu rails, one per local rank, planned as one\n", json_array_size(rails));
		json_array_foreach(rails, i, r) {
			json_t *rt = json_object_get(r, "tree");
			printf("rail %lld: job %s, %s", num(r, "rail"), str(r, "id"), str(r, "state"));
			if (json_object_get(r, "group"))
				printf(", group %lld", num(r, "group"));
			printf("%s%s\n", *str(r, "reason") ? ": " : "", str(r, "reason"));
			if (!rt)
				continue;
			printf("    %s qpn %lld\n", str(rt, "switch"), num(rt, "qpn"));
			print_below(rt, "    ");
		}
		return;
	}
	if (!t) {
		printf("(no tree yet)\n");
		return;
	}
	printf("%s qpn %lld\n", str(t, "switch"), num(t, "qpn"));
	print_below(t, "");
}

static void print_failures(json_t *a)
{
	size_t i;
	json_t *f;

	printf("%-20s %-16s %s\n", "TIME", "WHAT", "REASON");
	json_array_foreach(a, i, f) {
		time_t t = (time_t)json_real_value(json_object_get(f, "time"));
		char ts[32];
		strftime(ts, sizeof(ts), "%Y-%m-%d %H:%M:%S", gmtime(&t));
		printf("%-20s %-16s %s\n", ts, str(f, "what"), str(f, "reason"));
	}
}

static void print_groups(json_t *o)
{
	const char *sw;
	json_t *a, *g;
	size_t i;

	printf("%-12s %-6s %-6s %-7s %-8s %s\n", "SWITCH", "GROUP", "QPN", "WINDOW", "MEMBERS",
	       "PARENT");
	json_object_foreach(o, sw, a)
		json_array_foreach(a, i, g) {
			json_t *p = json_object_get(g, "parent");
			char par[48] = "-";
			if (p)
				snprintf(par, sizeof(par), "%s qpn %lld", str(p, "ip"), num(p, "qpn"));
			printf("%-12s %-6lld %-6lld %-7lld %-8zu %s\n", sw, num(g, "id"), num(g, "qpn"),
			       num(g, "window"), json_array_size(json_object_get(g, "members")), par);
		}
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "manager", 1, 0, 'm' }, { "token-file", 1, 0, 'k' }, { "json", 0, 0, 'j' },
		{ "cacert", 1, 0, 'c' }, { "help", 0, 0, 'h' }, { 0, 0, 0, 0 },
	};
	const char *token_file = getenv("INCA_MANAGER_TOKEN_FILE"), *cmd, *arg = NULL;
	char path[256], *body = NULL;
	json_t *j = NULL;
	int c, status, ret;

	if (getenv("INCA_MANAGER") && *getenv("INCA_MANAGER"))
		url = getenv("INCA_MANAGER");
	while ((c = getopt_long(argc, argv, "m:k:c:jh", longopts, NULL)) != -1) {
		switch (c) {
		case 'm': url = optarg; break;
		case 'k': token_file = optarg; break;
		case 'j': as_json = true; break;
		case 'c': setenv("INCA_MANAGER_CACERT", optarg, 1); break;
		case 'h': usage(stdout); return EX_OK;
		default: usage(stderr); return EX_USAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return EX_USAGE;
	}
	cmd = argv[optind];
	if (optind + 1 < argc)
		arg = argv[optind + 1];
	if (token_file) {
		char err[300];
		if (inca_read_token_file(token_file, token, sizeof(token), err, sizeof(err))) {
			fprintf(stderr, "incactl: %s\n", err);
			return EX_AUTH;
		}
	} else if (getenv("INCA_MANAGER_TOKEN")) {
		snprintf(token, sizeof(token), "%s", getenv("INCA_MANAGER_TOKEN"));
	}

	const char *method = "GET";
	bool need_arg = false;
	if (!strcmp(cmd, "switches")) snprintf(path, sizeof(path), "/v1/switches");
	else if (!strcmp(cmd, "jobs")) snprintf(path, sizeof(path), "/v1/jobs");
	else if (!strcmp(cmd, "groups")) snprintf(path, sizeof(path), "/v1/groups");
	else if (!strcmp(cmd, "failures")) snprintf(path, sizeof(path), "/v1/failures");
	else if (!strcmp(cmd, "metrics")) snprintf(path, sizeof(path), "/metrics");
	else if (!strcmp(cmd, "counters")) { need_arg = true; snprintf(path, sizeof(path), "/v1/switches"); }
	else if (!strcmp(cmd, "job") || !strcmp(cmd, "tree") || !strcmp(cmd, "delete")) {
		need_arg = true;
		snprintf(path, sizeof(path), "/v1/jobs/%s", arg ? arg : "");
		if (!strcmp(cmd, "delete"))
			method = "DELETE";
	} else {
		fprintf(stderr, "incactl: unknown command '%s' (try --help)\n", cmd);
		return EX_USAGE;
	}
	if (need_arg && (!arg || strchr(arg, '/'))) {
		fprintf(stderr, "incactl: %s needs a %s\n", cmd, !strcmp(cmd, "counters") ? "SWITCH" : "job ID");
		return EX_USAGE;
	}
	char full[1024], err[1024];
	snprintf(full, sizeof(full), "%s%s", url, path);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	status = inca_http(method, full, token, NULL, 5000, &j, &body, err, sizeof(err));
	curl_global_cleanup();
	if (status < 0) {
		fprintf(stderr, "incactl: %s\n", err);
		free(body);
		return EX_UNREACHABLE;
	}
	if (!strcmp(cmd, "metrics") && status == 200) {
		fputs(body ? body : "", stdout);
		json_decref(j);
		free(body);
		return EX_OK;
	}
	if (status >= 400) {
		fprintf(stderr, "incactl: %s\n", err);
		ret = status == 401 || status == 403 ? EX_AUTH : EX_REFUSED;
		goto out;
	}
	if (!j) {
		fprintf(stderr, "incactl: the manager's answer is not JSON\n");
		ret = EX_REFUSED;
		goto out;
	}
	ret = EX_OK;
	if (!strcmp(cmd, "counters")) {
		size_t i;
		json_t *s, *found = NULL;
		json_array_foreach(j, i, s)
			if (!strcmp(str(s, "name"), arg))
				found = s;
		if (!found) {
			fprintf(stderr, "incactl: no switch '%s'\n", arg);
			ret = EX_REFUSED;
			goto out;
		}
		json_t *cnt = json_object_get(found, "counters");
		if (as_json) {
			json_dumpf(cnt ? cnt : json_null(), stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
			putchar('\n');
		} else if (!cnt) {
			printf("switch %s has not reported counters\n", arg);
		} else {
			const char *k;
			json_t *v;
			json_object_foreach(cnt, k, v) {
				size_t n;
				json_t *e;
				if (!json_is_array(v)) {
					printf("%-24s %lld\n", k, (long long)json_integer_value(v));
					continue;
				}
				printf("%-24s", k);     /* group_ids */
				json_array_foreach(v, n, e)
					printf(" %lld", (long long)json_integer_value(e));
				putchar('\n');
			}
		}
		goto out;
	}
	if (as_json) {
		json_dumpf(j, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
		putchar('\n');
	} else if (!strcmp(cmd, "switches")) {
		print_switches(j);
	} else if (!strcmp(cmd, "jobs")) {
		print_jobs(j);
	} else if (!strcmp(cmd, "job") || !strcmp(cmd, "tree")) {
		print_tree(j);
	} else if (!strcmp(cmd, "failures")) {
		print_failures(j);
	} else if (!strcmp(cmd, "groups")) {
		print_groups(j);
	} else if (!strcmp(cmd, "delete")) {
		printf("job %s deleted\n", arg);
	}
out:
	json_decref(j);
	free(body);
	return ret;
}
