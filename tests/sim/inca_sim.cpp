/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inca-sim: a SimGrid (S4U) model of one INCA all-reduce on a fabric, and
 * of a host ring all-reduce on the same fabric as a sanity check.
 *
 * The fabric is a topology in the manager's format (sim_fabric.c: a file
 * or a generated star, leaf/spine or pods + super-spines); every switch
 * is a SimGrid host (an INCA switch is a server), every cable a split-duplex
 * link, routes shortest paths (Dijkstra). The job's tree is the manager's
 * own (mgr_tree_build). Ranks are actors on the hosts; each tree node is a
 * set of actors on its switch: a receiver taking what arrives (the NIC) and
 * `cores` workers (the switch's worker lcores) that aggregate a member's
 * contribution at the cost inca-bench-switch measured (per packet: the
 * forwarding cost plus the aggregation's per-element cost for its
 * elements; sim_switch_cost.c reads the file), then send the partial up or
 * the result down.
 *
 * The unit of simulation is a chunk of k packets: k = 1 is the per-packet
 * mode (the window of W packets per member enforced exactly: at most W
 * packets of a rank unanswered); k > 1 moves k packets as one flow. With
 * k <= W a rank keeps W / k chunks in flight; with k > W the window is
 * enforced as a rate cap of W packets per unloaded round trip on every
 * member's flow (what a sliding window sustains). Store-and-forward of a
 * chunk at each tier costs the coarse mode a fill of depth chunks, hence
 * many chunks (--chunks). The network is SimGrid's CM02 model with no TCP
 * factors: a flow takes latency + bytes / bandwidth, flows share links
 * max-min fairly. Bytes on the wire are the frame plus preamble, FCS and
 * gap (the switch's shaper counts them the same way, dp_qos.c).
 *
 * What is left out: loss and retransmission, the shaper's 1 ms burst, the
 * hosts' scheduling, PFC and ECN, ECMP (one shortest path per pair),
 * several jobs sharing a switch; docs/scale.md says what that means.
 *
 * Output: one line of key=value pairs (time_us is the last rank's result).
 */
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <getopt.h>
#include <string>
#include <vector>

#include <simgrid/s4u.hpp>

#include "sim_fabric.h"

namespace sg4 = simgrid::s4u;

XBT_LOG_NEW_DEFAULT_CATEGORY(inca_sim, "the INCA all-reduce model");

namespace {

/* ---- the model's parameters (options) ---- */
struct params {
	double rate_bps = 100e9;          /* host link */
	double uplink_factor = 0;         /* switch-to-switch links: x the host rate; 0:
					     non-blocking (a switch's hosts' or children's
					     worth over its uplinks) */
	double link_latency = 1e-6;       /* every cable, one way (propagation + switching) */
	double host_ns_per_pkt = 0;       /* a rank's CPU per packet sent (and its result) */
	int shared_cpu_cores = 0;         /* >0: every rank on one CPU of that many cores (the
					     lab: namespaces on one machine) */
	double call_overhead = 0;         /* a rank's fixed cost per call, seconds */
	int cores = 1;                    /* worker cores per switch node */
	unsigned window = 64;             /* packets per member in flight (the job's window) */
	int elems_per_pkt = 248;          /* fp32 per packet (IB MTU 1024: 992 bytes) */
	int header_bytes = 98 + 24;       /* Ethernet..ICRC, + preamble, FCS, gap */
	double bytes = 4096;              /* the vector, per rank */
	int max_chunks = 64;              /* coarse mode: chunks per call at most */
	bool per_packet = false;
	bool ring = false;                /* the host ring instead */
	int ring_payload = 1448;          /* ring: TCP payload per segment */
	int ring_frame = 1538;            /* ring: its frame on the wire */
	double ring_ns_per_byte = 0;      /* ring: a rank's CPU per byte reduced */
};

params P;
sim_switch_cost cost;
sim_fabric fab;

/* What a chunk of the vector is: its packets and wire bytes. */
struct chunking {
	long long pkts;                   /* packets in the vector */
	long long chunks, per_chunk;      /* chunks of per_chunk packets (the last fewer) */
	int inflight;                     /* chunks of a rank unanswered at most */
	double rate_cap;                  /* bytes/s per member flow; 0: none */
	long long chunk_pkts(long long c) const
	{
		return std::min(per_chunk, pkts - c * per_chunk);
	}
};
chunking CH;

/* Wire bytes of packets [first, first + n) of the vector. */
double wire_bytes(long long first, long long n)
{
	long long elems = (long long)std::ceil(P.bytes / 4);
	long long e0 = first * P.elems_per_pkt;
	long long e1 = std::min(elems, (first + n) * P.elems_per_pkt);
	return (double)(e1 - e0) * 4 + (double)n * P.header_bytes;
}

double chunk_bytes(long long c)
{
	return wire_bytes(c * CH.per_chunk, CH.chunk_pkts(c));
}

/* A switch worker's ns for one packet in (aggregation) and one passed on. */
double agg_ns_per_pkt()
{
	double per_elem = (cost.agg_ns_per_pkt - cost.fwd_ns_per_pkt) / cost.elems_per_pkt;
	return cost.fwd_ns_per_pkt + per_elem * P.elems_per_pkt;
}

/* ---- messages between actors ---- */
struct msg {
	long long chunk;
	bool result;                      /* true: the result going down */
};

struct node;
std::vector<node *> nodes;
std::vector<sg4::Mailbox *> rank_box;
std::vector<double> rank_done;

/* ---- a tree node: receiver + workers on its switch ---- */
struct node {
	int index;
	int parent;
	int members;                      /* its group's members */
	std::vector<int> child_nodes;     /* inner node: children nodes; */
	std::vector<int> child_ranks;     /* leaf node: its ranks */
	sg4::Host *host;
	sg4::Mailbox *box;
	std::deque<msg *> queue;
	sg4::SemaphorePtr work;
	std::vector<int> arrived;         /* per chunk: contributions aggregated */
	long long done_chunks = 0;

	void send_down(long long c)
	{
		double b = chunk_bytes(c);
		for (int k : child_nodes)
			nodes[k]->box->put_init(new msg{ c, true }, b)->detach();
		for (int r : child_ranks)
			rank_box[r]->put_init(new msg{ c, true }, b)->detach();
	}

	/* A worker: one item at a time, at one core's speed. */
	void worker()
	{
		for (;;) {
			work->acquire();
			msg *m = queue.front();
			queue.pop_front();
			if (!m)
				return;
			long long c = m->chunk, k = CH.chunk_pkts(c);
			if (m->result) {
				sg4::this_actor::execute((double)k * cost.fwd_ns_per_pkt);
				send_down(c);
			} else {
				sg4::this_actor::execute((double)k * agg_ns_per_pkt());
				if (++arrived[c] == members) {
					if (parent < 0)
						send_down(c);
					else
						nodes[parent]->box->put_init(new msg{ c, false },
									     chunk_bytes(c))->detach();
				}
			}
			delete m;
		}
	}

	/* The receiver: everything addressed to the node, in arrival order. */
	void receiver()
	{
		box->set_receiver(sg4::Actor::self());
		long long expect = CH.chunks * members + (parent >= 0 ? CH.chunks : 0);
		for (long long i = 0; i < expect; i++) {
			queue.push_back(box->get<msg>());
			work->release();
		}
		for (int w = 0; w < P.cores; w++) {
			queue.push_back(nullptr);
			work->release();
		}
		box->set_receiver(nullptr);
	}
};

sg4::Host *shared_cpu;

/* A rank's CPU work: on its own host, or on the lab's shared CPU. */
void rank_cpu(double ns)
{
	if (ns <= 0)
		return;
	if (shared_cpu)
		sg4::this_actor::exec_init(ns)->set_host(shared_cpu)->wait();
	else
		sg4::this_actor::execute(ns);
}

/* ---- a rank of the in-network all-reduce ---- */
void inca_rank(int r)
{
	sg4::Mailbox *me = rank_box[r];
	node *leaf = nodes[fab.rank_node[r]];
	long long sent = 0, got = 0;

	me->set_receiver(sg4::Actor::self());
	rank_cpu(P.call_overhead * 1e9);
	while (got < CH.chunks) {
		if (sent < CH.chunks && sent - got < CH.inflight) {
			double b = chunk_bytes(sent), rate = P.rate_bps / 8;
			rank_cpu((double)CH.chunk_pkts(sent) * P.host_ns_per_pkt);
			sg4::CommPtr c = leaf->box->put_init(new msg{ sent, false }, b);
			if (CH.rate_cap > 0) {
				c->set_rate(CH.rate_cap);
				rate = std::min(rate, CH.rate_cap);
			}
			c->detach();
			/* the NIC sends its queue in order: the next chunk leaves
			 * once this one is on the wire (flows would share instead) */
			sg4::this_actor::sleep_for(b / rate);
			sent++;
		} else {
			delete me->get<msg>();
			got++;
		}
	}
	rank_done[r] = sg4::Engine::get_clock();
	me->set_receiver(nullptr);
}

/* ---- the host ring: reduce-scatter then allgather, 2(N-1) steps of S/N ---- */
void ring_rank(int r)
{
	int n = fab.nhosts;
	sg4::Mailbox *me = rank_box[r], *next = rank_box[(r + 1) % n];
	double seg = P.bytes / n;
	double wire = std::ceil(seg / P.ring_payload) * P.ring_frame;

	if (seg <= 0 || wire <= 0)
		wire = P.ring_frame;
	else
		wire = seg / P.ring_payload * P.ring_frame + P.ring_frame - P.ring_payload;
	rank_cpu(P.call_overhead * 1e9);
	for (int step = 0; step < 2 * (n - 1); step++) {
		sg4::CommPtr s = next->put_async(new msg{ step, false }, wire);
		delete me->get<msg>();
		if (step < n - 1)
			rank_cpu(seg * P.ring_ns_per_byte);
		s->wait();
	}
	rank_done[r] = sg4::Engine::get_clock();
}

/* ---- the platform ---- */
std::vector<sg4::Host *> host_of_rank;
std::vector<sg4::Host *> host_of_switch;

void build_platform()
{
	auto *zone = sg4::create_dijkstra_zone("fabric", true);
	std::vector<int> hosts_on(fab.nswitches, 0);

	for (int s = 0; s < fab.nswitches; s++)
		host_of_switch.push_back(zone->create_host(fab.switch_name[s], 1e9)
						 ->set_core_count(P.cores)->seal());
	for (int h = 0; h < fab.nhosts; h++) {
		sg4::Host *host = zone->create_host("h" + std::to_string(h), 1e9)->seal();
		sg4::Link *l = zone->create_split_duplex_link("hl" + std::to_string(h),
							      P.rate_bps / 8)
				       ->set_latency(P.link_latency)->seal();
		zone->add_route(host->get_netpoint(), host_of_switch[fab.host_leaf[h]]->get_netpoint(),
				nullptr, nullptr, { sg4::LinkInRoute(l, sg4::LinkInRoute::Direction::UP) },
				true);
		host_of_rank.push_back(host);
		hosts_on[fab.host_leaf[h]]++;
	}
	for (int i = 0; i < fab.nlinks; i++) {
		int lo = fab.link_lower[i], up = fab.link_upper[i];
		int nup = 0;
		for (int k = 0; k < fab.nlinks; k++)
			nup += fab.link_lower[k] == lo;
		/* non-blocking: what comes into lo from below, spread over its uplinks */
		double below = fab.role[lo] == 0 ? hosts_on[lo] : fab.ports_down[lo];
		double factor = P.uplink_factor > 0 ? P.uplink_factor
						    : std::max(1.0, below / std::max(1, nup));
		sg4::Link *l = zone->create_split_duplex_link(std::string("sl") + fab.switch_name[lo] +
							      "-" + fab.switch_name[up],
							      P.rate_bps / 8 * factor)
				       ->set_latency(P.link_latency)->seal();
		zone->add_route(host_of_switch[lo]->get_netpoint(),
				host_of_switch[up]->get_netpoint(), nullptr, nullptr,
				{ sg4::LinkInRoute(l, sg4::LinkInRoute::Direction::UP) }, true);
	}
	if (P.shared_cpu_cores > 0)
		shared_cpu = zone->create_host("shared-cpu", 1e9)
				     ->set_core_count(P.shared_cpu_cores)->seal();
	zone->seal();
}

/* The unloaded round trip of one packet, rank 0 to the root and back. */
double packet_rtt()
{
	double frame = wire_bytes(0, 1), t = 0;
	int depth = 0;

	for (int k = fab.rank_node[0]; k >= 0; k = fab.node_parent[k])
		depth++;
	/* every hop up and down: latency + serialisation (the uplinks are at
	 * least the host rate) */
	t += 2 * depth * (P.link_latency + frame / (P.rate_bps / 8));
	t += depth * agg_ns_per_pkt() * 1e-9 + (depth - 1) * cost.fwd_ns_per_pkt * 1e-9;
	t += P.host_ns_per_pkt * 1e-9;
	return t;
}

void plan_chunks()
{
	long long elems = (long long)std::ceil(P.bytes / 4);
	CH.pkts = std::max(1LL, (elems + P.elems_per_pkt - 1) / P.elems_per_pkt);
	if (P.per_packet) {
		CH.per_chunk = 1;
	} else {
		CH.per_chunk = (CH.pkts + P.max_chunks - 1) / P.max_chunks;
	}
	CH.chunks = (CH.pkts + CH.per_chunk - 1) / CH.per_chunk;
	if (CH.per_chunk <= (long long)P.window) {
		CH.inflight = (int)(P.window / CH.per_chunk);
		CH.rate_cap = 0;
	} else {
		CH.inflight = 2;
		CH.rate_cap = P.window * wire_bytes(0, 1) / packet_rtt();
	}
}

double parse_rate(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	switch (*end) {
	case 'k': case 'K': v *= 1e3; break;
	case 'm': case 'M': v *= 1e6; break;
	case 'g': case 'G': v *= 1e9; break;
	default: break;
	}
	return v;
}

void usage()
{
	fprintf(stderr,
		"usage: inca-sim --bench FILE [--topology FILE | --tiers 1|2|3 --hosts N\n"
		"         [--hosts-per-leaf H] [--spines S] [--leaves-per-pod L]\n"
		"         [--supers-per-plane X]] [--rate 100G] [--uplink-factor F]\n"
		"         [--latency S] [--cores C] [--window W] [--elems E] [--header B]\n"
		"         [--bytes S] [--chunks K | --per-packet] [--host-ns NS]\n"
		"         [--shared-cpu CORES] [--call-overhead S] [--ring]\n"
		"         [--ring-ns-per-byte NS] [SimGrid --cfg=... options]\n");
}

} // namespace

int main(int argc, char **argv)
{
	sim_shape shape = {};
	const char *bench = nullptr;
	char why[256];

	shape.tiers = 1;
	shape.hosts = 2;
	shape.hosts_per_leaf = 32;
	shape.spines = 4;
	shape.leaves_per_pod = 8;
	shape.supers_per_plane = 4;

	/* SimGrid takes its --cfg options first */
	sg4::Engine e(&argc, argv);
	e.set_config("network/model:CM02");
	e.set_config("network/crosstraffic:0");
	e.set_config("network/TCP-gamma:0");

	static const option opts[] = {
		{ "bench", required_argument, nullptr, 'b' },
		{ "topology", required_argument, nullptr, 'T' },
		{ "tiers", required_argument, nullptr, 't' },
		{ "hosts", required_argument, nullptr, 'n' },
		{ "hosts-per-leaf", required_argument, nullptr, 'H' },
		{ "spines", required_argument, nullptr, 'S' },
		{ "leaves-per-pod", required_argument, nullptr, 'L' },
		{ "supers-per-plane", required_argument, nullptr, 'X' },
		{ "rate", required_argument, nullptr, 'r' },
		{ "uplink-factor", required_argument, nullptr, 'u' },
		{ "latency", required_argument, nullptr, 'l' },
		{ "cores", required_argument, nullptr, 'c' },
		{ "window", required_argument, nullptr, 'w' },
		{ "elems", required_argument, nullptr, 'E' },
		{ "header", required_argument, nullptr, 'h' },
		{ "bytes", required_argument, nullptr, 's' },
		{ "chunks", required_argument, nullptr, 'k' },
		{ "per-packet", no_argument, nullptr, 'p' },
		{ "host-ns", required_argument, nullptr, 'o' },
		{ "shared-cpu", required_argument, nullptr, 'C' },
		{ "call-overhead", required_argument, nullptr, 'O' },
		{ "ring", no_argument, nullptr, 'R' },
		{ "ring-ns-per-byte", required_argument, nullptr, 'B' },
		{ nullptr, 0, nullptr, 0 },
	};
	int o;
	while ((o = getopt_long(argc, argv, "", opts, nullptr)) != -1) {
		switch (o) {
		case 'b': bench = optarg; break;
		case 'T': shape.topo_path = optarg; break;
		case 't': shape.tiers = atoi(optarg); break;
		case 'n': shape.hosts = atoi(optarg); break;
		case 'H': shape.hosts_per_leaf = atoi(optarg); break;
		case 'S': shape.spines = atoi(optarg); break;
		case 'L': shape.leaves_per_pod = atoi(optarg); break;
		case 'X': shape.supers_per_plane = atoi(optarg); break;
		case 'r': P.rate_bps = parse_rate(optarg); break;
		case 'u': P.uplink_factor = atof(optarg); break;
		case 'l': P.link_latency = atof(optarg); break;
		case 'c': P.cores = atoi(optarg); break;
		case 'w': P.window = (unsigned)atoi(optarg); break;
		case 'E': P.elems_per_pkt = atoi(optarg); break;
		case 'h': P.header_bytes = atoi(optarg); break;
		case 's': P.bytes = parse_rate(optarg); break;
		case 'k': P.max_chunks = atoi(optarg); break;
		case 'p': P.per_packet = true; break;
		case 'o': P.host_ns_per_pkt = atof(optarg); break;
		case 'C': P.shared_cpu_cores = atoi(optarg); break;
		case 'O': P.call_overhead = atof(optarg); break;
		case 'R': P.ring = true; break;
		case 'B': P.ring_ns_per_byte = atof(optarg); break;
		default: usage(); return 2;
		}
	}
	if (!bench || optind != argc || P.rate_bps <= 0 || P.cores < 1 || P.window < 1 ||
	    P.elems_per_pkt < 1 || P.bytes < 4 || P.max_chunks < 1) {
		usage();
		return 2;
	}
	if (sim_switch_cost_load(bench, &cost, why, sizeof(why))) {
		fprintf(stderr, "inca-sim: %s\n", why);
		return 1;
	}
	if (sim_fabric_build(&shape, P.window, &fab, why, sizeof(why))) {
		fprintf(stderr, "inca-sim: %s\n", why);
		return 1;
	}
	build_platform();
	plan_chunks();

	int n = fab.nhosts;
	rank_done.assign(n, 0);
	for (int r = 0; r < n; r++)
		rank_box.push_back(sg4::Mailbox::by_name("rank-" + std::to_string(r)));
	if (P.ring) {
		for (int r = 0; r < n; r++)
			sg4::Actor::create("ring-" + std::to_string(r), host_of_rank[r], ring_rank, r);
	} else {
		for (int k = 0; k < fab.nnodes; k++) {
			node *nd = new node;
			nd->index = k;
			nd->parent = fab.node_parent[k];
			nd->members = fab.node_children[k] ? fab.node_children[k] : fab.node_fanin[k];
			nd->host = host_of_switch[fab.node_sw[k]];
			nd->box = sg4::Mailbox::by_name("node-" + std::to_string(k));
			nd->work = sg4::Semaphore::create(0);
			nd->arrived.assign(CH.chunks, 0);
			nodes.push_back(nd);
		}
		for (int k = 0; k < fab.nnodes; k++)
			if (fab.node_parent[k] >= 0)
				nodes[fab.node_parent[k]]->child_nodes.push_back(k);
		for (int r = 0; r < n; r++)
			nodes[fab.rank_node[r]]->child_ranks.push_back(r);
		for (node *nd : nodes) {
			sg4::Actor::create("recv-" + std::to_string(nd->index), nd->host,
					   [nd] { nd->receiver(); });
			for (int w = 0; w < P.cores; w++)
				sg4::Actor::create("work-" + std::to_string(nd->index), nd->host,
						   [nd] { nd->worker(); });
		}
		for (int r = 0; r < n; r++)
			sg4::Actor::create("rank-" + std::to_string(r), host_of_rank[r], inca_rank, r);
	}
	e.run();

	double t = *std::max_element(rank_done.begin(), rank_done.end());
	printf("%s hosts=%d tiers=%d nodes=%d bytes=%.0f time_us=%.3f algbw_GBps=%.4f "
	       "pkts=%lld chunks=%lld per_chunk=%lld inflight=%d rate_cap_Bps=%.0f "
	       "agg_ns_per_pkt=%.1f cores=%d window=%u\n",
	       P.ring ? "ring" : "inca", n, fab.depth, fab.nnodes, P.bytes, t * 1e6,
	       P.bytes / t / 1e9, CH.pkts, CH.chunks, CH.per_chunk, CH.inflight, CH.rate_cap,
	       agg_ns_per_pkt(), P.cores, P.window);
	for (node *nd : nodes)
		delete nd;
	sim_fabric_free(&fab);
	return 0;
}
