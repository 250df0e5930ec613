/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inca-manager: the control plane's server. Reads the topology, restores
 * its state from the database, serves the API (/v1, bearer tokens) and
 * Prometheus /metrics over HTTP (libmicrohttpd, one thread on epoll:
 * heartbeats and ranks' state requests may be held until something
 * changes, each a suspended connection parked on what it waits for, no
 * thread per held request; docs/manager.md "Scale"), and every 50 ms looks
 * for switches that stopped heartbeating, leases that expired and held
 * requests whose time is up. GET / is the topology view (control/ui/,
 * built in).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <unistd.h>

#include <microhttpd.h>

#include "inca_http.h"
#include "mgr.h"
#include "ui.h"

#define MAX_BODY (1 << 20)
/* the page runs its own script and talks to this manager only */
#define UI_CSP "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; " \
	"connect-src 'self'; img-src data:; frame-ancestors 'none'; base-uri 'none'; " \
	"form-action 'none'"

static volatile sig_atomic_t quit;
static void on_signal(int sig) { (void)sig; quit = 1; }

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: inca-manager --topology FILE --token-file FILE [options]\n"
		"\n"
		"The INCA control plane: builds reduction trees over the topology, allocates\n"
		"slots within switch capacity and tenant quotas, programs the switches'\n"
		"agents, hands ranks their group. API: docs/manager.md. A browser at\n"
		"http(s)://ADDR:PORT/ shows the fabric, the jobs and their trees live.\n"
		"\n"
		"  -t, --topology FILE     switches, hosts, links, tenants (JSON)\n"
		"  -k, --token-file FILE   the admin token (switch agents, incactl): the\n"
		"                          secret, or sha256:HEX, its SHA-256\n"
		"  -d, --db FILE           state database (SQLite; default inca-manager.db)\n"
		"  -l, --listen ADDR:PORT  default 0.0.0.0:8473\n"
		"  -C, --tls-cert FILE     serve HTTPS with this certificate (PEM; with its\n"
		"                          chain) and --tls-key FILE (PEM). Without them the\n"
		"                          API is plain HTTP: tokens cross the network in\n"
		"                          clear (labs only; deploy/lab-ca makes a CA)\n"
		"  -K, --tls-key FILE      the certificate's private key\n"
		"  -D, --dead-after-ms MS  a switch silent this long is down (default 1000)\n"
		"  -L, --lease-s S         a job no rank renews for S seconds is removed\n"
		"                          (default 60)\n"
		"  -w, --window W          slots per group unless the job asks (default 16)\n"
		"  -c, --check             validate the topology and exit\n"
		"  -h, --help              this text\n");
}

struct conn {
	char *body;
	size_t len;
	bool too_big;
	struct MHD_Connection *c;
	char path[512];              /* the URL with its query, as the API reads it */
	struct mgr_parked park;      /* while held */
};

/* Held: the connection is suspended (no thread waits on it) until woken. */
static void conn_hold(struct mgr_parked *p)
{
	struct conn *cn = p->owner;

	MHD_suspend_connection(cn->c);
}

static void conn_wake(struct mgr_parked *p)
{
	struct conn *cn = p->owner;

	p->resumed = true;
	MHD_resume_connection(cn->c);
}

/* MHD splits the query off: put wait_ms, plan_ver and members back for the
 * API. */
static enum MHD_Result query_arg(void *cls, enum MHD_ValueKind kind, const char *key,
				 const char *value)
{
	struct conn *cn = cls;
	size_t n = strlen(cn->path);

	(void)kind;
	if (!value || (strcmp(key, "wait_ms") && strcmp(key, "plan_ver") && strcmp(key, "members")))
		return MHD_YES;
	snprintf(cn->path + n, sizeof(cn->path) - n, "%c%s=%s", strchr(cn->path, '?') ? '&' : '?',
		 key, value);
	return MHD_YES;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
			       const char *method, const char *version,
			       const char *upload, size_t *upload_size, void **con_cls)
{
	struct mgr *m = cls;
	struct conn *cn = *con_cls;
	struct MHD_Response *resp;
	const char *auth, *ctype = "application/json";
	const struct mgr_ui_asset *asset;
	char *out = NULL;
	int status;
	enum MHD_Result ret;

	(void)version;
	if (!cn) {
		cn = calloc(1, sizeof(*cn));
		if (!cn)
			return MHD_NO;
		cn->c = c;
		cn->park.owner = cn;
		cn->park.hold = conn_hold;
		cn->park.wake = conn_wake;
		*con_cls = cn;
		return MHD_YES;
	}
	if (*upload_size) {
		if (cn->len + *upload_size > MAX_BODY) {
			cn->too_big = true;
		} else {
			char *b = realloc(cn->body, cn->len + *upload_size + 1);
			if (!b)
				return MHD_NO;
			memcpy(b + cn->len, upload, *upload_size);
			cn->body = b;
			cn->len += *upload_size;
			cn->body[cn->len] = 0;
		}
		*upload_size = 0;
		return MHD_YES;
	}
	/* the topology view's page and script: no data in them, no token */
	if (!strcmp(method, "GET") && (asset = mgr_ui_find(url))) {
		resp = MHD_create_response_from_buffer(asset->len, (void *)asset->data,
						       MHD_RESPMEM_PERSISTENT);
		MHD_add_response_header(resp, "Content-Type", asset->type);
		MHD_add_response_header(resp, "Content-Security-Policy", UI_CSP);
		MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
		MHD_add_response_header(resp, "Cache-Control", "no-cache");
		ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
		MHD_destroy_response(resp);
		return ret;
	}
	auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	if (auth && !strncasecmp(auth, "Bearer ", 7))
		auth += 7;
	else
		auth = NULL;
	if (cn->too_big) {
		status = 413;
		out = strdup("{\"error\": \"body larger than 1 MiB\", \"status\": 413}");
	} else {
		if (!cn->park.resumed) {
			snprintf(cn->path, sizeof(cn->path), "%s", url);
			MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, query_arg, cn);
		}
		status = mgr_api_request(m, method, cn->path, auth, cn->body, &cn->park, &out,
					 &ctype);
		if (status == MGR_PARKED)
			return MHD_YES;      /* suspended; asked again when woken */
	}
	resp = MHD_create_response_from_buffer(out ? strlen(out) : 0, out ? out : "",
					       out ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
	MHD_add_response_header(resp, "Content-Type", ctype);
	if (status == 401)
		MHD_add_response_header(resp, "WWW-Authenticate", "Bearer realm=\"inca\"");
	ret = MHD_queue_response(c, (unsigned)status, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* a PEM file, whole, NUL-terminated (NULL with err filled) */
static char *read_pem(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char *p = NULL;
	size_t n = 0;

	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	p = malloc(MAX_BODY + 1);
	if (p)
		n = fread(p, 1, MAX_BODY + 1, f);
	fclose(f);
	if (!p || n == 0 || n > MAX_BODY || !strstr(p, "-----BEGIN ")) {
		snprintf(err, errlen, "%s: expected a PEM file (-----BEGIN ...) of at most 1 MiB",
			 path);
		free(p);
		return NULL;
	}
	p[n] = 0;
	return p;
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
		      enum MHD_RequestTerminationCode toe)
{
	struct conn *cn = *con_cls;

	(void)cls;
	(void)c;
	(void)toe;
	if (cn) {
		free(cn->body);
		free(cn);
	}
	*con_cls = NULL;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "topology", 1, 0, 't' }, { "token-file", 1, 0, 'k' }, { "db", 1, 0, 'd' },
		{ "listen", 1, 0, 'l' }, { "dead-after-ms", 1, 0, 'D' }, { "lease-s", 1, 0, 'L' },
		{ "window", 1, 0, 'w' }, { "check", 0, 0, 'c' }, { "help", 0, 0, 'h' },
		{ "tls-cert", 1, 0, 'C' }, { "tls-key", 1, 0, 'K' },
		{ 0, 0, 0, 0 },
	};
	const char *topo = NULL, *token_file = NULL, *db = "inca-manager.db",
		   *listen_at = "0.0.0.0:8473", *cert_file = NULL, *key_file = NULL;
	char *cert = NULL, *key = NULL;
	long dead_ms = 1000, lease_s = 60, window = 16;
	bool check = false;
	unsigned conn_limit = 1024;
	static struct mgr m;
	char token[MGR_TOKEN_LEN], err[512], host[64];
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct MHD_Daemon *d;
	char *end;
	int c;

	while ((c = getopt_long(argc, argv, "t:k:d:l:D:L:w:chC:K:", longopts, NULL)) != -1) {
		switch (c) {
		case 't': topo = optarg; break;
		case 'k': token_file = optarg; break;
		case 'd': db = optarg; break;
		case 'l': listen_at = optarg; break;
		case 'D':
			dead_ms = strtol(optarg, &end, 10);
			if (*end || dead_ms < 100 || dead_ms > 600000) {
				mgr_log("--dead-after-ms: expected 100..600000");
				return 2;
			}
			break;
		case 'L':
			lease_s = strtol(optarg, &end, 10);
			if (*end || lease_s < 1 || lease_s > 86400) {
				mgr_log("--lease-s: expected 1..86400");
				return 2;
			}
			break;
		case 'w':
			window = strtol(optarg, &end, 10);
			if (*end || window < 1 || window > AGG_MAX_WINDOW) {
				mgr_log("--window: expected 1..%d", AGG_MAX_WINDOW);
				return 2;
			}
			break;
		case 'c': check = true; break;
		case 'C': cert_file = optarg; break;
		case 'K': key_file = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc || !topo || (!token_file && !check)) {
		mgr_log("--topology FILE and --token-file FILE are required (try --help)");
		return 2;
	}
	if (check) {
		struct mgr_topo t;
		if (mgr_topo_load(&t, topo, err, sizeof(err))) {
			mgr_log("%s", err);
			return 1;
		}
		printf("inca-manager: %s: %d switches, %d hosts, %d tenants\n", topo, t.nswitches,
		       t.nhosts, t.ntenants);
		mgr_topo_free(&t);
		return 0;
	}
	if (inca_read_token_file(token_file, token, sizeof(token), err, sizeof(err))) {
		mgr_log("--token-file %s", err);
		return 2;
	}
	if (!cert_file != !key_file) {
		mgr_log("--tls-cert and --tls-key go together");
		return 2;
	}
	if (cert_file) {
		if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
			mgr_log("this libmicrohttpd has no TLS support");
			return 1;
		}
		if (!(cert = read_pem(cert_file, err, sizeof(err))) ||
		    !(key = read_pem(key_file, err, sizeof(err)))) {
			mgr_log("--tls-cert/--tls-key: %s", err);
			free(cert);
			return 2;
		}
	}
	{
		const char *colon = strrchr(listen_at, ':');
		long port = colon ? strtol(colon + 1, &end, 10) : -1;
		if (!colon || *end || port < 1 || port > 65535 ||
		    (size_t)(colon - listen_at) >= sizeof(host)) {
			mgr_log("--listen: expected ADDR:PORT, got '%s'",
				listen_at);
			return 2;
		}
		memcpy(host, listen_at, (size_t)(colon - listen_at));
		host[colon - listen_at] = 0;
		if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
			mgr_log("--listen: '%s' is not an IPv4 address", host);
			return 2;
		}
		sa.sin_port = htons((uint16_t)port);
	}
	if (mgr_init(&m, topo, db, token, err, sizeof(err))) {
		mgr_log("%s", err);
		return 1;
	}
	m.dead_after_s = (double)dead_ms / 1000.0;
	m.lease_s = (double)lease_s;
	m.default_window = (uint32_t)window;
	{
		/* a held request is an open connection: as many as the process may */
		struct rlimit rl;
		if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
			rl.rlim_cur = rl.rlim_max;
			setrlimit(RLIMIT_NOFILE, &rl);
		}
		if (!getrlimit(RLIMIT_NOFILE, &rl))
			conn_limit = rl.rlim_cur > 1000064 ? 1000000 :
				     rl.rlim_cur > 128 ? (unsigned)rl.rlim_cur - 64 : 64;
	}
	d = MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME |
			     MHD_USE_ERROR_LOG | (cert ? MHD_USE_TLS : 0), 0, NULL, NULL,
			     handler, &m, MHD_OPTION_SOCK_ADDR, &sa,
			     MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
			     MHD_OPTION_CONNECTION_TIMEOUT, 60u,
			     MHD_OPTION_CONNECTION_LIMIT, conn_limit,
			     MHD_OPTION_LISTEN_BACKLOG_SIZE, 4096u,
			     cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, cert,
			     MHD_OPTION_HTTPS_MEM_KEY, key, MHD_OPTION_END);
	if (!d) {
		mgr_log("cannot listen on %s%s: %s", listen_at,
			cert ? " with TLS (is the key the certificate's?)" : "", strerror(errno));
		mgr_fini(&m);
		free(cert);
		free(key);
		return 1;
	}
	if (!cert)
		mgr_log("serving plain HTTP: tokens cross the network in clear (give "
			"--tls-cert and --tls-key)");
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	printf("inca-manager: ready: %d switches, %d hosts, %d tenants, listening on %s (%s), "
	       "state in %s\n", m.topo.nswitches, m.topo.nhosts, m.topo.ntenants, listen_at,
	       cert ? "https" : "http", db);
	fflush(stdout);
	while (!quit) {
		mgr_tick(&m);
		usleep(50000);
	}
	printf("inca-manager: stopping\n");
	mgr_stop(&m);
	usleep(100000);          /* the held requests, woken, are answered */
	MHD_stop_daemon(d);
	pthread_mutex_lock(&m.lock);
	mgr_save(&m);
	pthread_mutex_unlock(&m.lock);
	mgr_fini(&m);
	free(cert);
	free(key);
	return 0;
}
