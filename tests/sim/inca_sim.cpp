/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inca-sim: a SimGrid (S4U) model of one INCA all-reduce on a fabric, and
 * of a host ring all-reduce on the same fabric as a sanity check.
 *
 * The fabric is a topology in the manager's format (sim_fabric.c: a file
 * or a generated star, leaf/spine or pods + super-spines); every switch
 * is a SimGrid host (an INCA switch is a server), every cable a split-duplex
 * link; the routes the model uses are added by hand. The job's tree is the
 * manager's own (mgr_tree_build). Ranks are actors on the hosts; each tree
 * node is two actors on its switch: a receiver taking what arrives (the
 * NIC) and the worker cores, one queue of their total rate, that aggregate
 * a member's contribution at the cost inca-bench-switch measured (per
 * packet: the forwarding cost plus the aggregation's per-element cost for
 * its elements; sim_switch_cost.c reads the file), then send the partial
 * up or the result down.
 *
 * The unit of simulation is a chunk of packets. Per packet (--per-packet)
 * the window of W packets per member is exact: a rank sends while fewer
 * than W are unanswered. Otherwise a rank's vector moves as at most
 * --chunks chunks (smaller ones at both ends, so the pipeline fills and
 * drains nearly as packets do), each stored and forwarded whole at every
 * tier, and the window is a rate cap of W packets per unloaded round trip
 * on every member's flow (what a sliding window sustains). A rank's NIC
 * sends its chunks one after the other while its CPU readies the next. The
 * network is SimGrid's CM02 model with no TCP factors: a flow takes
 * latency + bytes / bandwidth, flows share links max-min fairly. Bytes on
 * the wire are the frame plus preamble, FCS and gap (the switch's shaper
 * counts them the same way, dp_qos.c).
 *
 * Loss (--loss P, --drop R:K; packet by packet only): a packet that crosses
 * a link is lost with probability P, and each loss delays it by the RTO
 * (doubled for each further loss of the same packet, each at most
 * --rto-cap): the member's timer, after which it (or, for a partial or a
 * result, the switch a member's retransmission reaches) sends it again.
 * A rank's lost packet takes its NIC's time (its first copy) and its
 * retransmission goes as a flow of its own; a switch's lost partial or
 * result takes no wire time. The retransmission's extra trips (a member's
 * copy up before a switch resends) are not simulated, nor libinca's probe
 * rule (a timed-out packet goes again only once a later one completed) or
 * its RTO estimator.
 *
 * Several ranks a host (--ranks-per-host P, --host-rate R, --host-call F):
 * libinca reduces inside the host first (host-lib/hl_hier.c), and only
 * then does the host take part in the network, as one member; its in-host
 * phases are time on the host before and after the network phase, every
 * local rank on a core of its own moving R bytes a second (read and
 * reduced, or copied), plus F a call for the handshakes through the
 * shared segment:
 *   leader (libinca's default; rails below --rail-min): up, the leader
 *     reduces the P inputs, P x S bytes; down, it copies the result into
 *     the segment, S, which the other ranks copy out on their own cores
 *     meanwhile: F + (P + 1) S / R on the leader's core
 *   rails (--hier rails, S >= --rail-min), as hl_hier.c moves the bytes:
 *     up, every local rank copies the (P - 1) / P of its input others own
 *     into the segment and reduces its 1/P of every input, (2P - 1) / P x S;
 *     the P rails cross the host's link at once (the same bytes as one
 *     member: simulated as one); down, every rank writes its share to the
 *     segment and its output and copies the others' shares, (P + 1) / P x S:
 *     F + 3 S / R
 *   the host ring (--ring), the host algorithms' hierarchical form at their
 *     best: an in-host reduce-scatter (S a rank) and allgather
 *     ((P - 1) / P x S) around the ring of the hosts.
 * With --host-cache C and --host-rate-cached Rc, a call whose inputs and
 * result fit the host's cache ((P + 1) S <= C) moves its bytes at Rc
 * instead (a job's buffers used again, call after call). Memory bandwidth
 * shared by a host's cores is not modelled.
 *
 * The lab (--shared-cpu C, --up-rate, --burst, --calls): its ranks share
 * C cores, each burst of a rank's work run to its end on one core in the
 * order the bursts became ready (rank_cpu); the switch shapes its egress
 * ports with a token bucket (dp_qos.c; shaper_wait), the hosts' veths into
 * it are not shaped, so a host link's way up can be given a rate of its
 * own; and the perf tools time calls back to back, each rank's next as
 * soon as its last ended, the median of each call's slowest rank.
 *
 * What is left out besides: loss in chunks, the hosts' scheduling beyond
 * that one queue of bursts, PFC and ECN, ECMP (one shortest path per
 * pair), several jobs sharing a switch; docs/scale.md says what that
 * means.
 *
 * Output: one line of key=value pairs (time_us is the last rank's result;
 * with --calls, the median over the calls of the slowest rank's call;
 * period_us their mean over the calls and ranks: the rate calls go at;
 * --warmup K leaves the first K calls out of both).
 */
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <getopt.h>
#include <map>
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
	double up_rate_bps = 0;           /* its way up, host to leaf (0: rate_bps); the
					     lab's veths are not shaped, the switch's
					     egress ports are */
	double uplink_factor = 0;         /* switch-to-switch links: x the host rate; 0:
					     non-blocking (a switch's hosts' or children's
					     worth over its uplinks) */
	double link_latency = 1e-6;       /* every cable, one way (propagation + switching) */
	double host_ns_per_pkt = 0;       /* a rank's CPU per packet (sending it, taking its
					     result) */
	int shared_cpu_cores = 0;         /* >0: every rank on one CPU of that many cores (the
					     lab: namespaces on one machine) */
	double call_overhead = 0;         /* a rank's fixed cost per call, seconds */
	int cores = -1;                   /* worker cores per switch node; 0: as many as
					     its members need at line rate; -1 (not given):
					     1, or 0 with --sizing */
	bool sizing = false;              /* print what each switch node needs */
	unsigned window = 64;             /* packets per member in flight (the job's window);
					     0: what an unloaded round trip at line rate needs
					     (at least 64, at most AGG_MAX_WINDOW) */
	int elems_per_pkt = 248;          /* fp32 per packet (IB MTU 1024: 992 bytes) */
	int header_bytes = 98 + 24;       /* Ethernet..ICRC, + preamble, FCS, gap */
	double bytes = 4096;              /* the vector, per rank */
	long calls = 1;                   /* back to back, each rank's next as soon as its
					     last ends; the time is the median over them of
					     the slowest rank's (as the perf tools time it) */
	long warmup = 0;                  /* of them, the first this many not timed */
	double burst = 0;                 /* >0: the switch's port to a host is a token
					     bucket of this many bytes at the rate (its shaper,
					     dp_qos.c), the cable behind it at the way up's */
	int max_chunks = 64;              /* coarse mode: chunks per call at most */
	bool per_packet = false;
	bool ring = false;                /* the host ring instead */
	int ring_payload = 1448;          /* ring: TCP payload per segment */
	int ring_frame = 1538;            /* ring: its frame on the wire */
	double ring_ns_per_byte = 0;      /* ring: a rank's CPU per byte reduced */
	double loss = 0;                  /* per packet per link crossing (--per-packet) */
	double rto = 1e-3;                /* the delay a loss costs (INCA_RTO_MIN_US) */
	double rto_cap = 0.25;            /* a backed-off RTO at most (libinca: the RTO
					     ceiling, a quarter of the switch timeout) */
	unsigned long long seed = 1;      /* the losses' random draws */
	int drop_rank = -1;               /* --drop R:K: rank R's packet K lost once */
	long long drop_pkt = -1;
	int ranks_per_host = 1;           /* P: the in-host phases around the network's */
	double host_rate = 0;             /* bytes a local rank's core moves a second */
	double host_call = 0;             /* seconds a call's in-host phases take besides */
	double host_cache = 0;            /* bytes of a host's cache (0: none modelled) */
	double host_rate_cached = 0;      /* host_rate when a call's bytes fit the cache */
	bool rails = false;               /* --hier rails */
	double rail_min = 262144;         /* rails from this vector size (INCA_RAIL_MIN_BYTES) */
};

params P;
sim_switch_cost cost;
sim_fabric fab;

/* A host link's way up, bit/s. */
double up_rate()
{
	return P.up_rate_bps > 0 ? P.up_rate_bps : P.rate_bps;
}

/*
 * The vector cut into chunks: packets first[c] .. first[c] + size[c] - 1.
 * Chunks are at most `max` packets; the first and last ones grow and
 * shrink by doubling (1, 2, 4 .. max .. 4, 2, 1; from max / 64 when max is
 * bigger) so that the pipeline fills and drains nearly as it does packet by
 * packet: a chunk is stored and forwarded whole at each tier, and a big
 * first or last one would cost depth x its time.
 */
struct chunking {
	long long pkts;                   /* packets in the vector */
	long long max;                    /* the biggest chunk */
	std::vector<long long> first, size;
	double rate_cap;                  /* bytes/s a member's flow (chunks, vectors of more
					     than W packets): W packets per round trip */
	long long chunks() const
	{
		return (long long)size.size();
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
	return wire_bytes(CH.first[c], CH.size[c]);
}

/* A full packet on the wire (what sizing and the window are about, whatever
 * the size of this call's vector). */
double full_frame()
{
	return (double)P.elems_per_pkt * 4 + P.header_bytes;
}

/* A switch worker's ns for one packet in (aggregation) and one passed on. */
double agg_ns_per_pkt()
{
	double per_elem = (cost.agg_ns_per_pkt - cost.fwd_ns_per_pkt) / cost.elems_per_pkt;
	return cost.fwd_ns_per_pkt + per_elem * P.elems_per_pkt;
}

/* ---- loss (packet by packet) ---- */
unsigned long long rng_state;
long long lost_count;                     /* packet transmissions lost */

double uniform01()
{
	/* xorshift64*: the same draws for the same seed, SimGrid's actors
	 * being run in a fixed order */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (double)((rng_state * 0x2545F4914F6CDD1DULL) >> 11) * 0x1.0p-53;
}

/* How long a packet crossing one link takes to get through besides its
 * transfer: 0, or an RTO for each time it is lost, backed off as libinca
 * does (x 2 per loss of the same packet, up to 64 x, each at most
 * rto_cap); lost_at_first: it is lost at least once whatever the draw */
double loss_delay(bool lost_at_first = false)
{
	double d = 0;
	int tries = 0;

	while (lost_at_first || (P.loss > 0 && uniform01() < P.loss)) {
		lost_at_first = false;
		d += std::min(P.rto * (double)(1 << std::min(tries, 6)), P.rto_cap);
		tries++;
		lost_count++;
	}
	return d;
}

/* ---- messages between actors ---- */
struct msg {
	long long chunk;
	bool result;                      /* true: the result going down */
	double arrived;                   /* when the node's receiver took it */
};

/*
 * Sends an actor has started and not yet seen finish, tested as new ones
 * are added so that finished ones are let go. Detached sends ran slower
 * here (1024 hosts, 256 KiB: 32 s against 13 s); either way most of a big
 * run goes to a list search in SimGrid 3.32's CommImpl::finish (perf), a
 * cost per message that grows with the hosts: 8192 hosts x 1 GiB took
 * 94-131 s, 1024 hosts 3-9 s.
 */
struct outbox {
	std::deque<sg4::CommPtr> sent;

	void add(const sg4::CommPtr &c)
	{
		sent.push_back(c);
		while (!sent.empty() && sent.front()->test())
			sent.pop_front();
	}
	void drain()
	{
		for (auto &c : sent)
			c->wait();
		sent.clear();
	}
};

/* m (bytes) into box from host `from`: now (its send kept in out), or
 * after delay, by an actor of its own (lost on the way: its
 * retransmission; held in the switch's shaper: when it lets it go) */
void send_pkt(outbox &out, sg4::Host *from, sg4::Mailbox *box, msg *m, double bytes,
	      double delay)
{
	if (delay <= 0) {
		out.add(box->put_async(m, bytes));
		return;
	}
	sg4::Actor::create("resend", from, [box, m, bytes, delay] {
		sg4::this_actor::sleep_for(delay);
		box->put(m, bytes);
	});
}

struct node;
std::vector<node *> nodes;
std::vector<sg4::Mailbox *> rank_box;
std::vector<std::vector<double>> call_time;   /* [call][rank]: its start to its end */

/* The switch's shaper on its port to rank r (--burst): a token bucket of
 * P.burst bytes filling at the rate, full at the start. Returns how long
 * bytes sent now wait in it (tokens below zero: the bytes queued ahead). */
std::vector<double> bucket_tokens, bucket_time;

double shaper_wait(int r, double bytes)
{
	if (P.burst <= 0)
		return 0;
	double now = sg4::Engine::get_clock(), rate = P.rate_bps / 8;
	double t = std::min(P.burst, bucket_tokens[r] + (now - bucket_time[r]) * rate) - bytes;
	bucket_tokens[r] = t;
	bucket_time[r] = now;
	return t < 0 ? -t / rate : 0;
}

/* ---- a tree node: receiver + workers on its switch ---- */
struct node {
	int index;
	int parent;
	int members;                      /* its group's members */
	int cores;                        /* its worker cores */
	std::vector<int> child_nodes;     /* inner node: children nodes; */
	std::vector<int> child_ranks;     /* leaf node: its ranks */
	sg4::Host *host;
	sg4::Mailbox *box;
	std::deque<msg *> queue;
	sg4::SemaphorePtr work;
	double cores_free_at = 0;         /* when the worker cores can take more */
	std::vector<int> arrived;         /* per chunk: contributions aggregated */
	outbox out;

	void send_down(long long c)
	{
		double b = chunk_bytes(c % CH.chunks());
		for (int k : child_nodes)
			send_pkt(out, host, nodes[k]->box, new msg{ c, true, 0 }, b, loss_delay());
		for (int r : child_ranks)
			send_pkt(out, host, rank_box[r], new msg{ c, true, 0 }, b,
				 shaper_wait(r, b) + loss_delay());
	}

	/*
	 * The worker cores, as one server: a group's slots are spread over
	 * them, so an item of k packets takes k x cost / cores of their
	 * capacity, in arrival order, and is done no sooner than one packet's
	 * cost after it started (a packet is on one core). One actor keeps
	 * the time: an actor per core runs out of memory mappings at
	 * thousands of nodes.
	 */
	void worker()
	{
		for (;;) {
			work->acquire();
			msg *m = queue.front();
			queue.pop_front();
			if (!m) {
				out.drain();
				return;
			}
			long long c = m->chunk, k = CH.size[c % CH.chunks()];
			double ns = (double)k * (m->result ? cost.fwd_ns_per_pkt : agg_ns_per_pkt());
			double start = std::max(m->arrived, cores_free_at);
			double one = ns / (double)k;
			cores_free_at = start + ns / cores * 1e-9;
			double done = start + std::max(ns / cores, one) * 1e-9;
			if (done > sg4::Engine::get_clock())
				sg4::this_actor::sleep_until(done);
			if (m->result) {
				send_down(c);
			} else {
				if (++arrived[c] == members) {
					if (parent < 0)
						send_down(c);
					else
						send_pkt(out, host, nodes[parent]->box,
							 new msg{ c, false, 0 },
							 chunk_bytes(c % CH.chunks()), loss_delay());
				}
			}
			delete m;
		}
	}

	/* The receiver: everything addressed to the node, in arrival order. */
	void receiver()
	{
		box->set_receiver(sg4::Actor::self());
		long long expect = CH.chunks() * P.calls * (members + (parent >= 0));
		for (long long i = 0; i < expect; i++) {
			msg *m = box->get<msg>();
			m->arrived = sg4::Engine::get_clock();
			queue.push_back(m);
			work->release();
		}
		queue.push_back(nullptr);
		work->release();
		box->set_receiver(nullptr);
	}
};

sg4::Host *shared_cpu;
sg4::SemaphorePtr shared_cores;

/* A rank's CPU work: on its own host, or on the lab's shared CPU. There a
 * burst of work (a packet's, a chunk's, a ring step's) runs to its end on
 * one core, the bursts in the order they became ready, as an OS runs
 * threads whose bursts are far shorter than its time slice; not all at
 * once at a fraction of the speed each, which would keep the ranks in
 * lockstep (none sending while the others reduce). */
void rank_cpu(double ns)
{
	if (ns <= 0)
		return;
	if (shared_cpu) {
		shared_cores->acquire();
		sg4::this_actor::exec_init(ns)->set_host(shared_cpu)->wait();
		shared_cores->release();
	} else {
		sg4::this_actor::execute(ns);
	}
}

/* The in-host phases of a call with several ranks a host (the header
 * comment): seconds before the host's network phase, and after it. */
void local_phases(double *up, double *down)
{
	double p = P.ranks_per_host, s = P.bytes;
	*up = *down = 0;
	if (P.ranks_per_host < 2)
		return;
	double rate = P.host_cache > 0 && (p + 1) * s <= P.host_cache ? P.host_rate_cached :
									P.host_rate;
	if (P.ring) {
		*up = P.host_call / 2 + s / rate;
		*down = P.host_call / 2 + (p - 1) / p * s / rate;
	} else if (P.rails && s >= P.rail_min) {
		*up = P.host_call / 2 + (2 * p - 1) / p * s / rate;
		*down = P.host_call / 2 + (p + 1) / p * s / rate;
	} else {
		*up = P.host_call / 2 + p * s / rate;
		*down = P.host_call / 2 + s / rate;
	}
}

/* ---- a rank of the in-network all-reduce ---- */
void inca_call(int r, long call, sg4::Mailbox *me, node *leaf, double up, double down,
	       double *nic_free, outbox &out);

void inca_rank(int r)
{
	sg4::Mailbox *me = rank_box[r];
	node *leaf = nodes[fab.rank_node[r]];
	double nic_free_at = 0;
	outbox out;

	double up, down;
	local_phases(&up, &down);
	me->set_receiver(sg4::Actor::self());
	for (long call = 0; call < P.calls; call++)
		inca_call(r, call, me, leaf, up, down, &nic_free_at, out);
	out.drain();
	me->set_receiver(nullptr);
}

/* One call of rank r's: its chunks numbered on from the last call's. */
void inca_call(int r, long call, sg4::Mailbox *me, node *leaf, double up, double down,
	       double *nic_free, outbox &out)
{
	const long long nch = CH.chunks(), base = call * nch;
	long long sent = 0, got = 0, unanswered = 0;   /* packets */
	double start = sg4::Engine::get_clock(), &nic_free_at = *nic_free;

	rank_cpu(P.call_overhead * 1e9);
	if (up > 0)
		sg4::this_actor::sleep_for(up);
	/* per packet: a packet goes when fewer than W are unanswered; chunks:
	 * every one capped at the rate the window sustains (a vector of W
	 * packets or fewer never waits for the window) */
	while (got < nch) {
		if (sent < nch && (!P.per_packet || unanswered < P.window)) {
			long long k = CH.size[sent];
			double b = chunk_bytes(sent), rate = up_rate() / 8;
			rank_cpu((double)k * P.host_ns_per_pkt);
			bool capped = !P.per_packet && CH.pkts > (long long)P.window;
			if (capped)
				rate = std::min(rate, CH.rate_cap);
			/* the NIC sends its queue in order: a chunk leaves once the
			 * one before it is on the wire (flows would share the link
			 * instead), while the CPU readies the next */
			if (nic_free_at > sg4::Engine::get_clock())
				sg4::this_actor::sleep_until(nic_free_at);
			double lost = loss_delay(call == 0 && r == P.drop_rank && sent == P.drop_pkt);
			if (lost > 0) {
				/* its first copy took the NIC's time; its
				 * retransmission gets through */
				send_pkt(out, sg4::this_actor::get_host(), leaf->box,
					 new msg{ base + sent, false, 0 }, b, lost);
			} else {
				sg4::CommPtr c = leaf->box->put_init(new msg{ base + sent, false, 0 },
								     b);
				if (capped)
					c->set_rate(CH.rate_cap);
				c->start();
				out.add(c);
			}
			nic_free_at = sg4::Engine::get_clock() + b / rate;
			unanswered += k;
			sent++;
		} else {
			msg *m = me->get<msg>();
			unanswered -= CH.size[m->chunk % nch];
			delete m;
			got++;
		}
	}
	if (down > 0)
		sg4::this_actor::sleep_for(down);
	call_time[call][r] = sg4::Engine::get_clock() - start;
}

/* ---- the host ring: reduce-scatter then allgather, 2(N-1) steps of S/N ---- */
void ring_rank(int r)
{
	int n = fab.nhosts;
	sg4::Mailbox *me = rank_box[r], *next = rank_box[(r + 1) % n];
	double seg = P.bytes / n;
	/* a segment's bytes and its frames' headers */
	double wire = seg + std::ceil(seg / P.ring_payload) * (P.ring_frame - P.ring_payload);
	double up, down;
	local_phases(&up, &down);
	/* what the previous rank sends comes in while this one is busy (TCP
	 * fills the receiver's buffers; a rendezvous would wait for it) */
	me->set_receiver(sg4::Actor::self());
	for (long call = 0; call < P.calls; call++) {
		double start = sg4::Engine::get_clock();
		rank_cpu(P.call_overhead * 1e9);
		if (up > 0)
			sg4::this_actor::sleep_for(up);
		for (int step = 0; step < 2 * (n - 1); step++) {
			/* the switch's shaper on the next rank's port holds the
			 * block back (the rank waits with it: what it takes in
			 * meanwhile comes in all the same) */
			double wait = shaper_wait((r + 1) % n, wire);
			if (wait > 0)
				sg4::this_actor::sleep_for(wait);
			sg4::CommPtr s = next->put_async(new msg{ step, false, 0 }, wire);
			delete me->get<msg>();
			/* the CPU a rank spends per byte of the vector, spread
			 * over the steps */
			rank_cpu(P.bytes * P.ring_ns_per_byte / (2 * (n - 1)));
			s->wait();
		}
		if (down > 0)
			sg4::this_actor::sleep_for(down);
		call_time[call][r] = sg4::Engine::get_clock() - start;
	}
	me->set_receiver(nullptr);
}

/* ---- the platform ---- */
std::vector<sg4::Host *> host_of_rank;
std::vector<sg4::Host *> host_of_switch;
std::vector<sg4::Link *> host_link;           /* per rank: to its leaf */
std::map<std::pair<int, int>, sg4::Link *> uplink;   /* (lower, upper) switch */

using sg4::LinkInRoute;

/* The links from rank a to rank b (the ring's neighbours): up the job's
 * tree to the lowest node over both, down to b. */
std::vector<LinkInRoute> rank_route(int a, int b)
{
	std::vector<LinkInRoute> up{ LinkInRoute(host_link[a], LinkInRoute::Direction::UP) };
	std::vector<LinkInRoute> down{ LinkInRoute(host_link[b], LinkInRoute::Direction::DOWN) };
	int x = fab.rank_node[a], y = fab.rank_node[b];

	while (x != y) {
		/* nodes are laid out a tier at a time from the root: climb the deeper */
		int &k = x > y ? x : y;
		int parent = fab.node_parent[k];
		sg4::Link *l = uplink.at({ fab.node_sw[k], fab.node_sw[parent] });
		if (&k == &x)
			up.emplace_back(l, LinkInRoute::Direction::UP);
		else
			down.emplace_back(l, LinkInRoute::Direction::DOWN);
		k = parent;
	}
	up.insert(up.end(), down.rbegin(), down.rend());
	return up;
}

/*
 * One full-routing zone: every route the model uses is added by hand
 * (rank-leaf, switch-switch over their cable, the ring's neighbours over
 * the tree's switches), shortest-path routing computed per source costs
 * minutes at thousands of hosts.
 */
void build_platform()
{
	auto *zone = sg4::create_full_zone("fabric");

	for (int s = 0; s < fab.nswitches; s++)
		host_of_switch.push_back(zone->create_host(fab.switch_name[s], 1e9)->seal());
	for (int h = 0; h < fab.nhosts; h++) {
		sg4::Host *host = zone->create_host("h" + std::to_string(h), 1e9)->seal();
		sg4::SplitDuplexLink *l = zone->create_split_duplex_link("hl" + std::to_string(h),
									  P.rate_bps / 8);
		l->get_link_up()->set_bandwidth(up_rate() / 8);
		if (P.burst > 0)
			l->get_link_down()->set_bandwidth(up_rate() / 8);
		l->set_latency(P.link_latency)->seal();
		zone->add_route(host->get_netpoint(), host_of_switch[fab.host_leaf[h]]->get_netpoint(),
				nullptr, nullptr, { LinkInRoute(l, LinkInRoute::Direction::UP) }, true);
		host_of_rank.push_back(host);
		host_link.push_back(l);
	}
	std::vector<int> nup(fab.nswitches, 0);
	for (int i = 0; i < fab.nlinks; i++)
		nup[fab.link_lower[i]]++;
	for (int i = 0; i < fab.nlinks; i++) {
		int lo = fab.link_lower[i], up = fab.link_upper[i];
		/* non-blocking: what comes into lo from below, spread over its uplinks */
		double factor = P.uplink_factor > 0 ? P.uplink_factor
						    : std::max(1.0, (double)fab.ports_down[lo] / nup[lo]);
		sg4::Link *l = zone->create_split_duplex_link(std::string("sl") + fab.switch_name[lo] +
							      "-" + fab.switch_name[up],
							      P.rate_bps / 8 * factor)
				       ->set_latency(P.link_latency)->seal();
		zone->add_route(host_of_switch[lo]->get_netpoint(),
				host_of_switch[up]->get_netpoint(), nullptr, nullptr,
				{ LinkInRoute(l, LinkInRoute::Direction::UP) }, true);
		uplink[{ lo, up }] = l;
	}
	if (P.ring && fab.nhosts > 1)
		for (int r = 0; r < fab.nhosts; r++) {
			int next = (r + 1) % fab.nhosts;
			if (next == 0 && fab.nhosts == 2)
				break;         /* 1 -> 0 is 0 -> 1's way back */
			zone->add_route(host_of_rank[r]->get_netpoint(),
					host_of_rank[next]->get_netpoint(), nullptr, nullptr,
					rank_route(r, next), true);
		}
	if (P.shared_cpu_cores > 0) {
		shared_cpu = zone->create_host("shared-cpu", 1e9)
				     ->set_core_count(P.shared_cpu_cores)->seal();
		shared_cores = sg4::Semaphore::create(P.shared_cpu_cores);
	}
	zone->seal();
}

/* The unloaded round trip of one packet, rank 0 to the root and back. */
double packet_rtt()
{
	double frame = full_frame(), t = 0;
	int depth = 0;

	for (int k = fab.rank_node[0]; k >= 0; k = fab.node_parent[k])
		depth++;
	/* every hop up and down: latency + serialisation (the uplinks are at
	 * least the host rate; the host's own way up at its own) */
	t += 2 * depth * P.link_latency + (2 * depth - 1) * frame / (P.rate_bps / 8) +
	     frame / (up_rate() / 8);
	t += depth * agg_ns_per_pkt() * 1e-9 + (depth - 1) * cost.fwd_ns_per_pkt * 1e-9;
	t += P.host_ns_per_pkt * 1e-9;
	return t;
}

/* Worker cores a node of `members` needs to aggregate at line rate: each
 * member's port brings rate / frame packets a second. */
int cores_needed(int members)
{
	double pps = P.rate_bps / 8 / full_frame();
	return std::max(1, (int)std::ceil(members * pps * agg_ns_per_pkt() * 1e-9));
}

/* A group's slot memory on its switch (aggregation/agg_group.c,
 * agg_group_create): window x 2 sets, each an accumulator row of 8 bytes an
 * element, the result frame (+4, 64-byte aligned) and two member bitmaps
 * (64-byte aligned); the sets' descriptors not counted. */
double slot_bytes(int members)
{
	double row = (double)P.elems_per_pkt * 8;
	double bitmap = std::ceil((double)members / 64) * 8;
	auto align = [](double b) { return std::ceil(b / 64) * 64; };
	return (double)P.window * 2 * (row + align(row + 4) + 2 * align(bitmap));
}

/*
 * What an operator sizes (--sizing): per node of the job's tree its
 * members, worker cores for line rate, slot memory; the window the round
 * trip needs; and, after the run, the in-network time against a ring's
 * bound on the same links (2(N-1)/N x S over TCP's payload share, 2(N-1)
 * steps of two cables).
 */
void print_sizing()
{
	double rtt = packet_rtt();
	double need_w = std::ceil(rtt * P.rate_bps / 8 / full_frame());

	printf("# %d ranks, %d switch node(s), tree depth %d, %.4g bit/s links, %d floats a packet\n",
	       fab.nhosts, fab.nnodes, fab.depth, P.rate_bps, P.elems_per_pkt);
	printf("# switch cost: %.1f ns a packet in (inca-bench-switch: %.1f ns at %d floats, "
	       "forwarding %.1f)\n", agg_ns_per_pkt(), cost.agg_ns_per_pkt, cost.elems_per_pkt,
	       cost.fwd_ns_per_pkt);
	printf("# window: %u packets; an unloaded round trip %.2f us needs %.0f at line rate%s\n",
	       P.window, rtt * 1e6, need_w, need_w > P.window ? " (the window limits)" : "");
	printf("%-24s %-10s %8s %8s %12s %14s\n", "switch", "role", "members", "fan-in",
	       "cores (line)", "slot memory");
	for (int k = 0; k < fab.nnodes; k++) {
		int members = fab.node_children[k] ? fab.node_children[k] : fab.node_fanin[k];
		static const char *const roles[] = { "leaf", "spine", "superspine" };
		printf("%-24s %-10s %8d %8d %12d %11.2f MiB\n", fab.switch_name[fab.node_sw[k]],
		       roles[fab.role[fab.node_sw[k]]], members, fab.node_fanin[k],
		       cores_needed(members), slot_bytes(members) / 1048576);
	}
}

void plan_chunks()
{
	long long elems = (long long)std::ceil(P.bytes / 4);
	std::vector<long long> ramp;

	CH.pkts = std::max(1LL, (elems + P.elems_per_pkt - 1) / P.elems_per_pkt);
	CH.max = P.per_packet ? 1 : (CH.pkts + P.max_chunks - 1) / P.max_chunks;
	/* from max / 64 (a fill of depth x that is under 2% of the call) */
	for (long long k = std::max(1LL, CH.max / 64); k < CH.max; k *= 2)
		ramp.push_back(k);
	/* up the ramp, the middle at max, down the ramp: as long as the ramps fit */
	long long left = CH.pkts, at = 0;
	std::vector<long long> tail;
	for (long long k : ramp) {
		if (left < 2 * k)
			break;
		CH.size.push_back(k);
		tail.push_back(k);
		left -= 2 * k;
	}
	std::vector<long long> middle;
	while (left > 0) {
		long long k = std::min(CH.max, left);
		middle.push_back(k);
		left -= k;
	}
	CH.size.insert(CH.size.end(), middle.begin(), middle.end());
	CH.size.insert(CH.size.end(), tail.rbegin(), tail.rend());
	for (long long k : CH.size) {
		CH.first.push_back(at);
		at += k;
	}
	CH.rate_cap = P.window * full_frame() / packet_rtt();
}

/* An option's number, all of it and within [lo, hi]; else false, said.
 * A rate takes k, M or G (x 1e3, 1e6, 1e9) and then "bit" or "bps"; a size
 * takes K, M or G (x 1024, 1024^2, 1024^3). */
enum num_kind { NUM_PLAIN, NUM_RATE, NUM_SIZE };

bool opt_num(const char *name, const char *s, num_kind kind, double lo, double hi, double *v)
{
	char *end;
	errno = 0;
	double x = strtod(s, &end);
	bool ok = end != s && !errno && std::isfinite(x);
	if (ok && kind != NUM_PLAIN && *end) {
		double k = kind == NUM_RATE ? 1e3 : 1024;
		switch (*end) {
		case 'k': case 'K': x *= k; end++; break;
		case 'm': case 'M': x *= k * k; end++; break;
		case 'g': case 'G': x *= k * k * k; end++; break;
		default: break;
		}
		if (kind == NUM_RATE && (!strcmp(end, "bit") || !strcmp(end, "bps")))
			end += 3;
	}
	if (!ok || *end || !(x >= lo && x <= hi)) {
		fprintf(stderr, "inca-sim: --%s %s: expected a %s from %g to %g\n", name, s,
			kind == NUM_RATE ? "rate in bit/s (k, M, G; bit or bps)" :
			kind == NUM_SIZE ? "size in bytes (K, M, G: KiB, MiB, GiB)" : "number",
			lo, hi);
		return false;
	}
	*v = x;
	return true;
}

/* the same, a whole number */
bool opt_int(const char *name, const char *s, long lo, long hi, long *v)
{
	char *end;
	errno = 0;
	long x = strtol(s, &end, 10);
	if (end == s || *end || errno || x < lo || x > hi) {
		fprintf(stderr, "inca-sim: --%s %s: expected a whole number from %ld to %ld\n",
			name, s, lo, hi);
		return false;
	}
	*v = x;
	return true;
}

void usage()
{
	fprintf(stderr,
		"usage: inca-sim --bench FILE [--topology FILE | --tiers 1|2|3 --hosts N\n"
		"         [--hosts-per-leaf H] [--spines S] [--leaves-per-pod L]\n"
		"         [--supers-per-plane X]] [--rate 100G] [--up-rate R] [--uplink-factor F]\n"
		"         [--latency S] [--cores C|auto] [--window W|auto] [--elems E] [--header B]\n"
		"         [--bytes S] [--calls K [--warmup K]] [--chunks K | --per-packet]\n"
		"         [--host-ns NS] [--shared-cpu CORES] [--burst B] [--call-overhead S]\n"
		"         [--ring]\n"
		"         [--ring-ns-per-byte NS] [--sizing] [--loss P [--seed S]] [--drop R:K]\n"
		"         [--rto S] [--rto-cap S] [--ranks-per-host P --host-rate R\n"
		"         [--host-call S] [--host-cache B --host-rate-cached R]\n"
		"         [--hier leader|rails] [--rail-min S]]\n"
		"         [SimGrid --cfg=... options]\n"
		"       inca-sim --help\n");
}

/* --help: what each option means (on stdout, before SimGrid's engine,
 * which would answer --help with its own configuration instead) */
void help()
{
	printf("inca-sim: one all-reduce of INCA (or of the host ring) on a simulated\n"
	       "fat-tree, with the switch cost inca-bench-switch measured; prints the\n"
	       "time and, with --sizing, what each INCA switch node needs (docs/scale.md).\n\n"
	       "  --bench FILE            inca-bench-switch's output (its per-packet cost); required\n"
	       "  --topology FILE         a topology in the manager's format (docs/manager.md);\n"
	       "                          else a generated fat-tree:\n"
	       "  --tiers 1|2|3           leaf / leaf-spine / with super-spines (default 1)\n"
	       "  --hosts N               hosts (default 2)\n"
	       "  --hosts-per-leaf H      (32)  --spines S (4)  --leaves-per-pod L (8)\n"
	       "  --supers-per-plane X    (4)\n"
	       "  --rate R                host link rate in bit/s, e.g. 100G, 400G, 200M or\n"
	       "                          200mbit (default 100G)\n"
	       "  --up-rate R             a host link's way up, host to switch (default: as\n"
	       "                          --rate; the lab shapes only the switch's egress\n"
	       "                          ports); the switches' uplinks and --sizing follow\n"
	       "                          --rate\n"
	       "  --uplink-factor F       switch-to-switch links as F x the host rate\n"
	       "                          (default: non-blocking)\n"
	       "  --latency S             one cable, one way, seconds (default 1e-6)\n"
	       "  --cores C|auto          worker cores per switch node (default 1; auto: as\n"
	       "                          many as line rate needs, the default with --sizing)\n"
	       "  --window W|auto         packets in flight per member (default 64; auto: what\n"
	       "                          an unloaded round trip at line rate needs)\n"
	       "  --elems E               fp32 elements per packet (default 248: IB MTU 1024)\n"
	       "  --header B              bytes a packet carries besides its elements, on the\n"
	       "                          wire (default 122: Ethernet..ICRC, preamble, FCS, gap)\n"
	       "  --bytes S               the vector per rank, e.g. 4096, 16M (MiB), 1G (GiB)\n"
	       "                          (default 4096)\n"
	       "  --calls K               K calls back to back, each rank's next as soon as\n"
	       "                          its last ended; time_us is the median over them of\n"
	       "                          the slowest rank's call, period_us their mean over\n"
	       "                          the calls and ranks (default 1)\n"
	       "  --warmup K              the first K of them not timed (default 0)\n"
	       "  --burst B               the switch's port to each host shapes to the rate\n"
	       "                          with a token bucket of B bytes (full at the start;\n"
	       "                          its cable then runs at --up-rate); default: none, the\n"
	       "                          cable at the rate\n"
	       "  --chunks K              simulate in chunks of at most K packets (default 64)\n"
	       "  --per-packet            simulate packet by packet (slow; the reference)\n"
	       "  --host-ns NS            a rank's CPU per packet, ns\n"
	       "  --shared-cpu CORES      every rank on one CPU of CORES cores (the lab)\n"
	       "  --call-overhead S       a rank's fixed cost per call, seconds\n"
	       "  --ring                  the host ring all-reduce instead of INCA\n"
	       "  --ring-ns-per-byte NS   the ring: a rank's CPU per byte reduced\n"
	       "  --sizing                print each switch node's worker cores, slot memory\n"
	       "                          and ports\n"
	       "  --loss P                with --per-packet: each packet crossing a link is\n"
	       "                          lost with probability P (0 <= P < 1) and gets through\n"
	       "                          an RTO later (backed off if lost again)\n"
	       "  --seed S                the losses' random draws (default 1)\n"
	       "  --drop R:K              with --per-packet: rank R's packet K is lost once on\n"
	       "                          its way to its switch in the first call (what one\n"
	       "                          loss costs)\n"
	       "  --rto S                 what a loss costs, seconds (default 1e-3:\n"
	       "                          INCA_RTO_MIN_US)\n"
	       "  --rto-cap S             a backed-off RTO at most (default 0.25)\n"
	       "  --ranks-per-host P      P ranks on every host, reduced inside it first\n"
	       "                          (default 1; --hosts counts hosts)\n"
	       "  --host-rate R           with P > 1: bytes a second one local rank's core\n"
	       "                          reduces or copies in the in-host phases; required\n"
	       "  --host-call S           with P > 1: seconds a call's in-host phases take\n"
	       "                          besides their bytes (default 0)\n"
	       "  --host-cache B          with P > 1: a host's cache, bytes (1M, 32M): a call\n"
	       "                          whose P inputs and result fit it moves its bytes at\n"
	       "  --host-rate-cached R    instead of --host-rate (both or neither)\n"
	       "  --hier leader|rails     with P > 1: the leader reduces for its host\n"
	       "                          (default), or every local rank its share (rails)\n"
	       "  --rail-min S            rails from this vector size (default 262144)\n"
	       "  --cfg=NAME:VALUE        a SimGrid option (--cfg=help lists them)\n");
}

} // namespace

int main(int argc, char **argv)
{
	sim_shape shape = {};
	const char *bench = nullptr;
	const char *in_host = nullptr;   /* an in-host option given (needs P > 1) */
	char why[256];

	shape.tiers = 1;
	shape.hosts = 2;
	shape.hosts_per_leaf = 32;
	shape.spines = 4;
	shape.leaves_per_pod = 8;
	shape.supers_per_plane = 4;

	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			help();
			return 0;
		}
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
		{ "up-rate", required_argument, nullptr, 'U' },
		{ "uplink-factor", required_argument, nullptr, 'u' },
		{ "latency", required_argument, nullptr, 'l' },
		{ "cores", required_argument, nullptr, 'c' },
		{ "window", required_argument, nullptr, 'w' },
		{ "elems", required_argument, nullptr, 'E' },
		{ "header", required_argument, nullptr, 'h' },
		{ "bytes", required_argument, nullptr, 's' },
		{ "calls", required_argument, nullptr, 'A' },
		{ "warmup", required_argument, nullptr, 'a' },
		{ "burst", required_argument, nullptr, 'D' },
		{ "chunks", required_argument, nullptr, 'k' },
		{ "per-packet", no_argument, nullptr, 'p' },
		{ "host-ns", required_argument, nullptr, 'o' },
		{ "shared-cpu", required_argument, nullptr, 'C' },
		{ "call-overhead", required_argument, nullptr, 'O' },
		{ "ring", no_argument, nullptr, 'R' },
		{ "ring-ns-per-byte", required_argument, nullptr, 'B' },
		{ "sizing", no_argument, nullptr, 'Z' },
		{ "loss", required_argument, nullptr, 'x' },
		{ "seed", required_argument, nullptr, 'e' },
		{ "drop", required_argument, nullptr, 'd' },
		{ "rto", required_argument, nullptr, 'y' },
		{ "rto-cap", required_argument, nullptr, 'Y' },
		{ "ranks-per-host", required_argument, nullptr, 'P' },
		{ "host-rate", required_argument, nullptr, 'W' },
		{ "host-call", required_argument, nullptr, 'F' },
		{ "host-cache", required_argument, nullptr, 'K' },
		{ "host-rate-cached", required_argument, nullptr, 'G' },
		{ "hier", required_argument, nullptr, 'I' },
		{ "rail-min", required_argument, nullptr, 'M' },
		{ nullptr, 0, nullptr, 0 },
	};
	int o;
	bool ok = true;
	long l;
	while (ok && (o = getopt_long(argc, argv, "", opts, nullptr)) != -1) {
		switch (o) {
		case 'b': bench = optarg; break;
		case 'T': shape.topo_path = optarg; break;
		case 't': ok = opt_int("tiers", optarg, 1, 3, &l); shape.tiers = (int)l; break;
		case 'n': ok = opt_int("hosts", optarg, 1, 1 << 20, &l); shape.hosts = (int)l; break;
		case 'H':
			ok = opt_int("hosts-per-leaf", optarg, 1, 1 << 16, &l);
			shape.hosts_per_leaf = (int)l;
			break;
		case 'S': ok = opt_int("spines", optarg, 1, 1 << 16, &l); shape.spines = (int)l; break;
		case 'L':
			ok = opt_int("leaves-per-pod", optarg, 1, 1 << 16, &l);
			shape.leaves_per_pod = (int)l;
			break;
		case 'X':
			ok = opt_int("supers-per-plane", optarg, 1, 1 << 16, &l);
			shape.supers_per_plane = (int)l;
			break;
		case 'r': ok = opt_num("rate", optarg, NUM_RATE, 1, 1e15, &P.rate_bps); break;
		case 'U': ok = opt_num("up-rate", optarg, NUM_RATE, 1, 1e15, &P.up_rate_bps); break;
		case 'u': ok = opt_num("uplink-factor", optarg, NUM_PLAIN, 1e-6, 1e6, &P.uplink_factor); break;
		case 'l': ok = opt_num("latency", optarg, NUM_PLAIN, 0, 10, &P.link_latency); break;
		case 'c':
			l = 0;
			ok = !strcmp(optarg, "auto") || opt_int("cores", optarg, 1, 4096, &l);
			P.cores = (int)l;
			break;
		case 'Z': P.sizing = true; break;
		case 'w':
			l = 0;
			ok = !strcmp(optarg, "auto") || opt_int("window", optarg, 1, 4096, &l);
			P.window = (unsigned)l;
			break;
		case 'E': ok = opt_int("elems", optarg, 1, 1 << 20, &l); P.elems_per_pkt = (int)l; break;
		case 'h': ok = opt_int("header", optarg, 0, 1 << 16, &l); P.header_bytes = (int)l; break;
		case 's': ok = opt_num("bytes", optarg, NUM_SIZE, 4, 1e15, &P.bytes); break;
		case 'A': ok = opt_int("calls", optarg, 1, 100000, &l); P.calls = l; break;
		case 'a': ok = opt_int("warmup", optarg, 0, 100000, &l); P.warmup = l; break;
		case 'D': ok = opt_num("burst", optarg, NUM_SIZE, 1, 1e12, &P.burst); break;
		case 'k': ok = opt_int("chunks", optarg, 1, 1 << 30, &l); P.max_chunks = (int)l; break;
		case 'p': P.per_packet = true; break;
		case 'o': ok = opt_num("host-ns", optarg, NUM_PLAIN, 0, 1e9, &P.host_ns_per_pkt); break;
		case 'C':
			ok = opt_int("shared-cpu", optarg, 0, 4096, &l);
			P.shared_cpu_cores = (int)l;
			break;
		case 'O': ok = opt_num("call-overhead", optarg, NUM_PLAIN, 0, 10, &P.call_overhead); break;
		case 'R': P.ring = true; break;
		case 'B':
			ok = opt_num("ring-ns-per-byte", optarg, NUM_PLAIN, 0, 1e6, &P.ring_ns_per_byte);
			break;
		case 'x': ok = opt_num("loss", optarg, NUM_PLAIN, 0, 0.999999, &P.loss); break;
		case 'e': {
			char *end;
			errno = 0;
			P.seed = strtoull(optarg, &end, 0);
			ok = end != optarg && !*end && !errno && optarg[0] != '-';
			if (!ok)
				fprintf(stderr, "inca-sim: --seed %s: expected a whole number from 0 "
					"to 2^64 - 1\n", optarg);
			break;
		}
		case 'd': {
			char tail;
			if (sscanf(optarg, "%d:%lld%c", &P.drop_rank, &P.drop_pkt, &tail) != 2 ||
			    P.drop_rank < 0 || P.drop_pkt < 0) {
				fprintf(stderr, "inca-sim: --drop R:K: a rank and a packet index\n");
				return 2;
			}
			break;
		}
		case 'y': ok = opt_num("rto", optarg, NUM_PLAIN, 1e-9, 100, &P.rto); break;
		case 'Y': ok = opt_num("rto-cap", optarg, NUM_PLAIN, 1e-9, 1000, &P.rto_cap); break;
		case 'P':
			ok = opt_int("ranks-per-host", optarg, 1, 4096, &l);
			P.ranks_per_host = (int)l;
			break;
		case 'W':
			ok = opt_num("host-rate", optarg, NUM_PLAIN, 1, 1e15, &P.host_rate);
			in_host = "--host-rate";
			break;
		case 'F':
			ok = opt_num("host-call", optarg, NUM_PLAIN, 0, 10, &P.host_call);
			in_host = "--host-call";
			break;
		case 'K':
			ok = opt_num("host-cache", optarg, NUM_SIZE, 1, 1e15, &P.host_cache);
			in_host = "--host-cache";
			break;
		case 'G':
			ok = opt_num("host-rate-cached", optarg, NUM_PLAIN, 1, 1e15, &P.host_rate_cached);
			in_host = "--host-rate-cached";
			break;
		case 'I':
			ok = !strcmp(optarg, "leader") || !strcmp(optarg, "rails");
			P.rails = !strcmp(optarg, "rails");
			if (!ok)
				fprintf(stderr, "inca-sim: --hier %s: leader or rails\n", optarg);
			in_host = "--hier";
			break;
		case 'M':
			ok = opt_num("rail-min", optarg, NUM_SIZE, 0, 1e15, &P.rail_min);
			in_host = "--rail-min";
			break;
		default: usage(); return 2;
		}
	}
	if (!ok)
		return 2;
	if (!bench || optind != argc) {
		if (optind != argc)
			fprintf(stderr, "inca-sim: %s: not an option\n", argv[optind]);
		else
			fprintf(stderr, "inca-sim: --bench FILE is required\n");
		usage();
		return 2;
	}
	if (P.ranks_per_host < 2 && in_host) {
		fprintf(stderr, "inca-sim: %s describes the in-host phases of several ranks a "
			"host: it needs --ranks-per-host P > 1\n", in_host);
		return 2;
	}
	if (P.ranks_per_host > 1 && P.host_rate <= 0) {
		fprintf(stderr, "inca-sim: --ranks-per-host %d needs --host-rate (bytes a second a "
			"local rank moves; tests/sim/calibrate_host.py measures it)\n",
			P.ranks_per_host);
		return 2;
	}
	if ((P.host_cache > 0) != (P.host_rate_cached > 0)) {
		fprintf(stderr, "inca-sim: --host-cache and --host-rate-cached go together\n");
		return 2;
	}
	if (P.warmup >= P.calls) {
		fprintf(stderr, "inca-sim: --warmup %ld: must be fewer than --calls (%ld)\n",
			P.warmup, P.calls);
		return 2;
	}
	if ((P.loss > 0 || P.drop_rank >= 0) && (!P.per_packet || P.ring)) {
		fprintf(stderr, "inca-sim: --loss and --drop are simulated packet by packet, for "
			"INCA: add --per-packet (and no --ring)\n");
		return 2;
	}
	/* splitmix64 of the seed: neighbouring seeds draw unrelated numbers */
	rng_state = P.seed + 0x9E3779B97F4A7C15ULL;
	rng_state = (rng_state ^ (rng_state >> 30)) * 0xBF58476D1CE4E5B9ULL;
	rng_state = (rng_state ^ (rng_state >> 27)) * 0x94D049BB133111EBULL;
	rng_state ^= rng_state >> 31;
	if (!rng_state)
		rng_state = 1;
	if (P.cores < 0)
		P.cores = P.sizing ? 0 : 1;
	if (sim_switch_cost_load(bench, &cost, why, sizeof(why))) {
		fprintf(stderr, "inca-sim: %s\n", why);
		return 1;
	}
	bool auto_window = P.window == 0;
	if (auto_window)
		P.window = 64;
	if (sim_fabric_build(&shape, P.window, &fab, why, sizeof(why))) {
		fprintf(stderr, "inca-sim: %s\n", why);
		return 1;
	}
	if (auto_window) {
		double need = std::ceil(packet_rtt() * P.rate_bps / 8 / full_frame());
		P.window = (unsigned)std::min(4096.0, std::max(64.0, need));
	}
	build_platform();
	plan_chunks();
	if (P.drop_rank >= fab.nhosts || P.drop_pkt >= CH.pkts) {
		fprintf(stderr, "inca-sim: --drop %d:%lld: %d ranks, %lld packets each\n", P.drop_rank,
			P.drop_pkt, fab.nhosts, CH.pkts);
		return 2;
	}

	int n = fab.nhosts;
	call_time.assign(P.calls, std::vector<double>(n, 0));
	bucket_tokens.assign(n, P.burst);
	bucket_time.assign(n, 0);
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
			nd->cores = P.cores ? P.cores : cores_needed(nd->members);
			nd->host = host_of_switch[fab.node_sw[k]];
			nd->box = sg4::Mailbox::by_name("node-" + std::to_string(k));
			nd->work = sg4::Semaphore::create(0);
			nd->arrived.assign(CH.chunks() * P.calls, 0);
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
			sg4::Actor::create("work-" + std::to_string(nd->index), nd->host,
					   [nd] { nd->worker(); });
		}
		for (int r = 0; r < n; r++)
			sg4::Actor::create("rank-" + std::to_string(r), host_of_rank[r], inca_rank, r);
	}
	e.run();

	/* the timed calls (after --warmup): each one's slowest rank, the
	 * median over them; and the rate they go at, each rank's calls back
	 * to back, their mean (the perf tools' period: a rank's timed calls'
	 * wall time over their count) */
	std::vector<double> slowest;
	double period = 0;
	for (size_t k = (size_t)P.warmup; k < call_time.size(); k++) {
		const auto &c = call_time[k];
		slowest.push_back(*std::max_element(c.begin(), c.end()));
		for (double d : c)
			period += d / ((double)(call_time.size() - (size_t)P.warmup) * (double)c.size());
	}
	std::sort(slowest.begin(), slowest.end());
	size_t mid = slowest.size() / 2;
	double t = slowest.size() % 2 ? slowest[mid] : (slowest[mid - 1] + slowest[mid]) / 2;
	if (P.sizing) {
		int n = fab.nhosts;
		double ring = n < 2 ? 0 : 2.0 * (n - 1) / n * P.bytes / (P.rate_bps / 8 * 1448 / 1538) +
					 2.0 * (n - 1) * 2 * P.link_latency;
		/* several ranks a host: the ring's hierarchical form, its
		 * in-host phases around it */
		bool was_ring = P.ring;
		double rup, rdown;
		P.ring = true;
		local_phases(&rup, &rdown);
		P.ring = was_ring;
		ring += rup + rdown;
		print_sizing();
		printf("# all-reduce of %.0f bytes%s: in-network %.1f us (simulated), a ring at best "
		       "%.1f us (bound%s): %.2fx\n", P.bytes,
		       P.ranks_per_host > 1 ? ", several ranks a host" : "", t * 1e6, ring * 1e6,
		       P.ranks_per_host > 1 ? ", hierarchical: its in-host phases around it" : "",
		       ring / t);
	}
	double up, down;
	local_phases(&up, &down);
	printf("%s hosts=%d tiers=%d nodes=%d bytes=%.0f time_us=%.6f algbw_GBps=%.4f "
	       "pkts=%lld chunks=%lld max_chunk=%lld window_rate_cap_Bps=%.0f "
	       "agg_ns_per_pkt=%.1f root_cores=%d window=%u loss=%g lost=%lld "
	       "ranks_per_host=%d local_up_us=%.6f local_down_us=%.6f period_us=%.6f\n",
	       P.ring ? "ring" : "inca", n, fab.depth, fab.nnodes, P.bytes, t * 1e6,
	       P.bytes / t / 1e9, CH.pkts, CH.chunks(), CH.max, CH.rate_cap,
	       agg_ns_per_pkt(), nodes.empty() ? P.cores : nodes[0]->cores, P.window, P.loss,
	       lost_count, P.ranks_per_host, up * 1e6, down * 1e6, period * 1e6);
	for (node *nd : nodes)
		delete nd;
	sim_fabric_free(&fab);
	return 0;
}
