//! The event loop and the per-port behaviour: HCAs and input-queued switches with per-VL credits,
//! virtual cut-through and VL arbitration.
//!
//! Timing shortcuts that keep one event per packet-hop (see docs/design/engine.md):
//! - a packet is placed in the downstream FIFO when its transmission *starts*, stamped with the
//!   time its header arrives plus the switch delay (`eligible_at`); nothing may forward it earlier;
//! - credits are pushed onto the sender's return FIFO with their future arrival time and applied
//!   when the sender next arbitrates; a port stalled on credits asks for a wake-up instead;
//! - a delivery to an HCA is recorded when the last hop starts, with its future tail-arrival time,
//!   and counted only if that time falls inside the run.

mod attribution;
mod deadlock;
#[cfg(test)]
mod faults;
mod mem;
pub mod output;
pub(crate) mod state;

pub use output::RunOutput;

use crate::config::{ConfigError, EngineConfig, RoutingAlgorithm};
use crate::fabric::sl2vl::{table, Sl2Vl};
use crate::fabric::vl_arbiter::{ArbState, ArbTables};
use crate::mpi::{program::PackedTrace, Mpi, Transport};
use crate::queue::{EventKind, EventQueue, MAX_EVENT_ID};
use crate::routing::dragonfly::{Decision, NO_VIA};
use crate::routing::{Route, Router};
use crate::stats::{FlowStats, PortVlCounters, Window};
use crate::topology::{Graph, Topology, NONE};
use crate::traffic::{build_sources, stream_rng, Source, TrafficTable, RNG_REFUSED, RNG_ROUTING};
use crate::units::{credits_for, ns_to_ps, us_to_ps, Rate, Time, NEVER};
#[cfg(test)]
use faults::Fault;
use rand::Rng;
use rand_pcg::Pcg64Mcg;
use state::{CreditReturn, CreditReturns, Message, Packet, PortVl, Queue, Slab};
use std::collections::HashMap;

/// SLs per HCA send queue set.
const SLS: u32 = 16;
/// Fabrics with more ports than this take the deep prefetch chain (`prefetch_upcoming`): their
/// hot per-port state (about 200 bytes a port) is several MB, well beyond the L2 cache.
const DEEP_PREFETCH_PORTS: usize = 16384;
/// How often (in events) the run asks its caller whether to stop.
const STOP_CHECK_EVENTS: u64 = 1 << 16;

/// Where a run stands when it is polled (progress displays, Ctrl-C).
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Simulated time now, and where the run ends at the latest (its duration or time limit).
    pub now: Time,
    pub end: Time,
    pub events: u64,
    pub packet_hops: u64,
}
/// Simulated time between searches for a routing deadlock (each costs one pass over the queues).
const DEADLOCK_CHECK_PS: Time = 50_000_000;
/// Set in `Packet::phase` once a flowlet packet's minimal-or-not decision is taken.
const PATH_DECIDED: u8 = 0x80;

/// A switch input port, as routing needs it: its switch, the switch's first port id, its number.
#[derive(Debug, Clone, Copy)]
struct InputSite {
    switch: u32,
    base: u32,
    local: u32,
}

/// One row of the optional per-message table.
#[derive(Debug, Clone, Copy)]
pub struct MessageRecord {
    pub src: u32,
    pub dst: u32,
    pub sl: u8,
    /// Statistics class: a traffic table's index, or (tables + job) for an MPI job's message.
    pub class: u16,
    pub bytes: u64,
    pub created: Time,
    pub delivered: Time,
}

/// Per-port state touched on every event at that port, kept together so one event costs one
/// cache miss for it rather than one per array: the hot scalars and the port's place in the
/// cabling (so forwarding and routing need no lookups in the topology's arrays).
#[derive(Debug, Clone)]
#[repr(align(64))]
struct PortState {
    wake_at: Time,
    /// The oldest credit return on its way here: arrival time (NEVER if none), VL and credits.
    /// Usually it is the only one, so returning and applying credits touch no other line.
    next_return_at: Time,
    next_return_credits: u16,
    next_return_vl: u8,
    /// More returns wait behind it, in `returns`.
    returns_behind: bool,
    arb: ArbState,
    /// Queue (input, VL; or HCA send queue) feeding the packet now on this port's wire.
    tx_queue: u32,
    /// Port at the other end of the cable (NONE if uncabled).
    peer: u32,
    /// The switch this port belongs to (NONE for an HCA port) and its number there.
    switch: u32,
    local: u16,
    /// The same for the peer, so a packet sent from here is routed at its next switch without
    /// loading the peer's line (NONE / 0 when the peer is an HCA or there is none).
    peer_local: u16,
    peer_switch: u32,
    /// Bit v set while VL v has filed requests (skips idle VLs quickly).
    request_mask: u16,
    /// Bit v set while VL v is in a credit stall (mirror of the VL's counters).
    stalled_mask: u16,
    /// A packet is on the wire; cleared when its TxEnd is handled (not merely when time passes,
    /// so a same-instant poke cannot start a new packet before the old one's input is released).
    transmitting: bool,
    credit_waiting: bool,
    /// Packets sent from here are delivered: the peer is an HCA.
    peer_is_host: bool,
}

// The layout is the point of these structs: keep each within its cache-line budget.
const _: () = assert!(std::mem::size_of::<PortState>() == 64);
const _: () = assert!(std::mem::size_of::<PortVl>() == 64);
const _: () = assert!(std::mem::size_of::<Queue>() == 32);
const _: () = assert!(std::mem::size_of::<Packet>() == 32);
const _: () = assert!(std::mem::size_of::<CreditReturns>() == 64);

pub struct Simulation {
    cfg: EngineConfig,
    topology: Topology,
    router: Router,
    sl2vl: Sl2Vl,
    /// Arbitration tables: index 0 for CA ports, 1 for switch external ports.
    arb_tables: [ArbTables; 2],
    vls: u32,
    /// VLs of one routing layer (data_vls / routing.vls): SL2VL's range.
    qos_vls: u32,
    rate: Rate,
    /// Per output port, when link rates differ (an imported fabric); empty when every link runs
    /// at `rate`, so the common case pays nothing.
    port_rates: Vec<Rate>,
    link_latency: Time,
    switch_latency: Time,
    mtu: u32,
    header: u32,
    buffer_credits: u32,
    /// Wire size of a full (MTU) packet and its serialization time.
    full_wire: u32,
    full_ser: Time,
    window: Window,

    /// The hot per-port scalars, one cache line per port (see `PortState`).
    ports: Vec<PortState>,
    /// Per (port, VL): credits, filed requests, counters; one cache line each.
    port_vls: Vec<PortVl>,
    returns: Vec<CreditReturns>,
    queues: Vec<Queue>,

    packets: Slab<Packet>,
    messages: Slab<Message>,
    sources: Vec<Source>,
    tables: Vec<TrafficTable>,
    routing_rng: Pcg64Mcg,
    /// Draws how many arrivals paused Poisson sources refused.
    refused_rng: Pcg64Mcg,

    events: EventQueue,
    /// Large fabric: prefetch the whole chain of lines upcoming events will touch.
    deep_prefetch: bool,
    now: Time,
    event_count: u64,
    pending_sum: u128,
    /// Dragonfly+ adaptive flowlets: the gap that ends one (0: decisions per packet), and per
    /// flow (source << 32 | destination) the last decision's path and time.
    flowlet_gap: Time,
    flowlets: HashMap<u64, (u16, Time)>,
    packet_hops: u64,
    packets_created: u64,
    packets_delivered_total: u64,
    messages_created: u64,
    messages_completed: u64,

    pub(crate) all: FlowStats,
    pub(crate) by_sl: Vec<FlowStats>,
    /// One per traffic table, then one per MPI job.
    pub(crate) by_class: Vec<FlowStats>,
    pub(crate) mpi: Option<Box<Mpi>>,
    pub(crate) status: RunStatus,
    pub(crate) message_log: Vec<MessageRecord>,
    /// Who delayed whom (`run.interference`); None costs one check per filing and grant.
    pub(crate) attribution: Option<Box<attribution::Attribution>>,
    /// `run.port_counters`: per port, since when it has sat idle with credit-stalled packets
    /// (NEVER: it has not) and the window-clipped total (PortXmitWait's time).
    #[allow(clippy::box_collection)] // one pointer in the simulation's hot struct, not three words
    pub(crate) xmit_wait: Option<Box<Vec<(Time, Time)>>>,
    /// A fault to inject once this many events have run (tests of the conservation check).
    #[cfg(test)]
    fault: Option<(u64, Fault)>,
}

impl Simulation {
    pub fn new(cfg: EngineConfig) -> Result<Simulation, ConfigError> {
        Simulation::with_traces(cfg, &HashMap::new())
    }

    /// Builds a run whose trace-replay jobs take their rank programs from `traces(job index)`.
    pub fn with_traces(cfg: EngineConfig, traces: &HashMap<usize, PackedTrace>) -> Result<Simulation, ConfigError> {
        cfg.validate()?;
        let topology = Topology::build(&cfg.topology)?;
        let router = Router::new(&topology, &cfg.routing, credits_for(cfg.fabric.mtu_bytes + cfg.fabric.header_bytes))?;
        if cfg.routing.flowlet_gap_us > 0.0 && router.dragonfly.is_none() {
            return Err(ConfigError::new(
                "routing.flowlet_gap_us",
                "flowlets apply to adaptive routing on a dragonfly-plus topology",
            ));
        }
        let g = topology.graph();
        let f = &cfg.fabric;
        let vls = f.data_vls as u32;
        let rate = Rate::from_gbps(f.link_gbps);
        let port_rates = match topology.port_gbps() {
            Some(gbps) if gbps.iter().any(|&r| r > 0.0 && r != f.link_gbps) => {
                gbps.iter().map(|&r| Rate::from_gbps(if r > 0.0 { r } else { f.link_gbps })).collect()
            }
            _ => Vec::new(),
        };
        let mut sl2vl = Sl2Vl::new(table(&cfg.qos.ca.sl2vl), table(&cfg.qos.swe.sl2vl));
        for (i, o) in cfg.qos.sl2vl_overrides.iter().enumerate() {
            let key = format!("qos.sl2vl_pairs[{i}]");
            if o.switch >= g.switches {
                return Err(ConfigError::new(
                    key,
                    format!("switch {} does not exist (0..{})", o.switch, g.switches - 1),
                ));
            }
            let radix = g.radix(g.hosts + o.switch);
            if o.in_port >= radix || o.out_port >= radix {
                return Err(ConfigError::new(key, format!("ports must be below the switch's radix {radix}")));
            }
            sl2vl.set_pair(o.switch, radix, o.in_port, o.out_port, table(&o.sl2vl));
        }
        let arb_tables = [
            ArbTables::new(&cfg.qos.ca.vlarb_high, &cfg.qos.ca.vlarb_low, cfg.qos.ca.high_limit),
            ArbTables::new(&cfg.qos.swe.vlarb_high, &cfg.qos.swe.vlarb_low, cfg.qos.swe.high_limit),
        ];
        let ports = g.ports();
        if (0..g.hosts + g.switches).any(|n| g.radix(n) > u16::MAX as u32) {
            return Err(ConfigError::new("topology", "a switch has more ports than 65535"));
        }
        if ports > MAX_EVENT_ID {
            return Err(ConfigError::new("topology", "too many ports for the event encoding"));
        }
        let (sources, tables) = build_sources(&cfg.traffic, g.hosts, cfg.seed, f.mtu_bytes, f.header_bytes, rate)?;
        if sources.len() as u32 > MAX_EVENT_ID {
            return Err(ConfigError::new("traffic", "too many traffic sources"));
        }
        let np = ports as usize;
        let pv = np * vls as usize;
        let buffer_credits = f.vl_buffer_bytes / crate::units::CREDIT_BYTES;
        let hca_queues = (g.hosts * SLS * f.hca_send_queues_per_sl) as usize;
        let port_states = mem::huge_vec(
            np,
            (0..np).map(|p| {
                let node = g.port_node[p];
                let peer = g.port_peer[p];
                PortState {
                    wake_at: NEVER,
                    next_return_at: NEVER,
                    next_return_credits: 0,
                    next_return_vl: 0,
                    returns_behind: false,
                    arb: ArbState::default(),
                    tx_queue: NONE,
                    peer,
                    switch: if g.is_host(node) { NONE } else { node - g.hosts },
                    local: g.local_port(p as u32) as u16,
                    peer_local: if peer == NONE { 0 } else { g.local_port(peer) as u16 },
                    peer_switch: if peer == NONE || g.is_host(g.port_node[peer as usize]) {
                        NONE
                    } else {
                        g.port_node[peer as usize] - g.hosts
                    },
                    request_mask: 0,
                    stalled_mask: 0,
                    transmitting: false,
                    credit_waiting: false,
                    peer_is_host: peer != NONE && g.is_host(g.port_node[peer as usize]),
                }
            }),
        );
        let window = Window { start: us_to_ps(cfg.run.warmup_us), end: us_to_ps(cfg.run.duration_us) };
        let mpi = match (&cfg.mpi, cfg.jobs.is_empty()) {
            (_, true) => None,
            (Some(m), false) => Some(Box::new(Mpi::new(m, &cfg.jobs, traces, cfg.seed, g.hosts)?)),
            (None, false) => return Err(ConfigError::new("mpi", "jobs need the [mpi] parameters")),
        };
        let classes = cfg.traffic.len() + cfg.jobs.len();
        if classes >= u16::MAX as usize {
            return Err(ConfigError::new("jobs", "too many traffic tables and jobs"));
        }
        let sim = Simulation {
            router,
            sl2vl,
            arb_tables,
            vls,
            qos_vls: vls / cfg.routing.vls as u32,
            rate,
            port_rates,
            link_latency: ns_to_ps(f.link_latency_ns),
            switch_latency: ns_to_ps(f.switch_latency_ns),
            mtu: f.mtu_bytes,
            header: f.header_bytes,
            buffer_credits,
            full_wire: f.mtu_bytes + f.header_bytes,
            full_ser: rate.serialization(f.mtu_bytes + f.header_bytes),
            window,
            ports: port_states,
            port_vls: mem::huge_vec(
                pv,
                std::iter::repeat_n(
                    PortVl {
                        credits: buffer_credits,
                        requested_credits: 0,
                        first_request: NONE,
                        last_request: NONE,
                        counters: PortVlCounters::default(),
                    },
                    pv,
                ),
            ),
            returns: mem::huge_vec(np, std::iter::repeat_with(CreditReturns::default).take(np)),
            queues: mem::huge_vec(
                pv + hca_queues,
                (0..pv as u32)
                    .map(|q| Queue::new(g.port_peer[(q / vls) as usize]))
                    .chain((0..hca_queues).map(|_| Queue::new(NONE))),
            ),
            packets: Slab::new(),
            messages: Slab::new(),
            sources,
            tables,
            routing_rng: stream_rng(cfg.seed, RNG_ROUTING, 0),
            refused_rng: stream_rng(cfg.seed, RNG_REFUSED, 0),
            events: EventQueue::new(),
            deep_prefetch: np > DEEP_PREFETCH_PORTS,
            now: 0,
            event_count: 0,
            pending_sum: 0,
            packet_hops: 0,
            flowlet_gap: us_to_ps(cfg.routing.flowlet_gap_us),
            flowlets: HashMap::new(),
            packets_created: 0,
            packets_delivered_total: 0,
            messages_created: 0,
            messages_completed: 0,
            all: FlowStats::default(),
            by_sl: vec![FlowStats::default(); SLS as usize],
            by_class: vec![FlowStats::default(); classes],
            mpi,
            status: RunStatus::Completed,
            message_log: Vec::new(),
            attribution: cfg
                .run
                .interference
                .then(|| Box::new(attribution::Attribution::new(np, vls as usize, pv + hca_queues, classes.max(1)))),
            xmit_wait: cfg.run.port_counters.then(|| Box::new(vec![(NEVER, 0); np])),
            #[cfg(test)]
            fault: None,
            topology,
            cfg,
        };
        Ok(sim)
    }

    pub fn graph(&self) -> &Graph {
        self.topology.graph()
    }

    pub fn describe(&self) -> serde_json::Value {
        self.topology.describe()
    }

    /// Runs to the configured duration, or until `should_stop` says so (checked every few
    /// thousand events). Returns whether the run was interrupted.
    // Out of line so that instruction counters (`benchmarks/run.py --instructions`) can find it.
    #[inline(never)]
    pub fn run(&mut self, should_stop: &mut dyn FnMut() -> bool) -> bool {
        self.run_reporting(&mut |_| should_stop())
    }

    /// `run`, telling `should_stop` where the run stands each time it is polled (every
    /// `STOP_CHECK_EVENTS` events): a progress display costs nothing between polls.
    pub fn run_reporting(&mut self, should_stop: &mut dyn FnMut(&Progress) -> bool) -> bool {
        self.start_sources();
        self.with_mpi(|mpi, sim| mpi.start(0, sim));
        let end = self.window.end;
        let mut interrupted = false;
        let (mut deadlock, mut next_deadlock_check) = (None, DEADLOCK_CHECK_PS);
        while let Some((t, kind, id)) = self.events.peek() {
            if t >= end || self.mpi_finished() {
                break;
            }
            self.events.pop_peeked();
            self.prefetch_upcoming();
            self.now = t;
            self.event_count += 1;
            self.pending_sum += self.events.len() as u128;
            match kind {
                EventKind::TxEnd => self.on_tx_end(id),
                EventKind::Wake => self.on_wake(id),
                EventKind::Source => self.on_source(id),
                EventKind::RankResume => self.with_mpi(|mpi, sim| mpi.on_resume(id, sim.now, sim)),
                EventKind::MpiArrival => self.with_mpi(|mpi, sim| mpi.on_arrival(id, sim.now, sim)),
            }
            #[cfg(test)]
            self.inject_fault();
            if self.event_count.is_multiple_of(STOP_CHECK_EVENTS) {
                let progress = Progress { now: self.now, end, events: self.event_count, packet_hops: self.packet_hops };
                if should_stop(&progress) {
                    interrupted = true;
                    break;
                }
                if self.now >= next_deadlock_check {
                    next_deadlock_check = self.now + DEADLOCK_CHECK_PS;
                    deadlock = self.credit_cycle();
                    if deadlock.is_some() {
                        break;
                    }
                }
            }
        }
        if !interrupted && deadlock.is_none() {
            // Also when the events ran out: blocked buffers schedule nothing.
            deadlock = self.credit_cycle();
        }
        self.status = match self.mpi.as_deref() {
            _ if interrupted => RunStatus::Interrupted,
            _ if deadlock.is_some() => RunStatus::Deadlock(deadlock.unwrap()),
            Some(m) if m.deadlock().is_some() => RunStatus::Deadlock(m.deadlock().unwrap().to_string()),
            Some(m) if !m.all_completed_once() => {
                self.now = end;
                RunStatus::TimeLimit
            }
            Some(_) => RunStatus::Completed,
            None => {
                self.now = end;
                RunStatus::Completed
            }
        };
        self.close_stalls();
        self.close_paused_sources();
        interrupted
    }

    /// Jobs exist and are all done (each completed once), or can never finish.
    fn mpi_finished(&self) -> bool {
        self.mpi.as_deref().is_some_and(|m| m.all_completed_once() || m.deadlock().is_some())
    }

    /// Lends the MPI layer the simulation as its transport.
    #[inline]
    fn with_mpi(&mut self, f: impl FnOnce(&mut Mpi, &mut Simulation)) {
        if let Some(mut mpi) = self.mpi.take() {
            f(&mut mpi, self);
            self.mpi = Some(mpi);
        }
    }

    pub fn status(&self) -> &RunStatus {
        &self.status
    }

    /// On large fabrics almost every event starts with cache misses on its port's state, and
    /// each line leads to the next (port -> its VL's first request and the queue it sends from
    /// -> that queue's head packet). The next events are known, so their lines are requested
    /// while this one is handled, one link of the chain per event, so that each request has
    /// about an event's time to complete before the next stage reads it. Small fabrics, whose
    /// state stays in the caches, only take the first two links: the deeper stages cost more
    /// instructions than the misses they save there.
    #[inline(always)]
    fn prefetch_upcoming(&self) {
        if self.deep_prefetch {
            self.prefetch_chain();
        } else {
            // Inline: these run on every event, and a call would cost about as much as they do.
            if let Some(port) = self.events.upcoming_port(3) {
                prefetch(&self.ports[port as usize]);
            }
            if let Some(port) = self.events.upcoming_port(1) {
                self.prefetch_port_lines(port);
            }
        }
    }

    /// The deep chain: each upcoming event is looked up once, and its stage's lines requested.
    #[inline(never)]
    fn prefetch_chain(&self) {
        let upcoming = self.events.upcoming_events();
        match upcoming.event(4) {
            Some((EventKind::TxEnd | EventKind::Wake, port)) => prefetch(&self.ports[port as usize]),
            Some((EventKind::Source, s)) => prefetch_all(&self.sources[s as usize]),
            _ => {}
        }
        if let Some(port) = upcoming.port(3) {
            self.prefetch_port_lines(port);
        }
        match upcoming.event(2) {
            Some((EventKind::TxEnd | EventKind::Wake, port)) => self.prefetch_request(port),
            Some((EventKind::Source, s)) => self.prefetch_source_port(s),
            _ => {}
        }
        if let Some(port) = upcoming.port(1) {
            self.prefetch_head_packet(port);
            self.prefetch_poked_output(port);
        }
    }

    /// The HCA port a source's message will be filed with: its port line and VL line.
    #[inline(always)]
    fn prefetch_source_port(&self, s: u32) {
        let src = &self.sources[s as usize];
        let port = self.graph().host_port(src.host);
        prefetch(&self.ports[port as usize]);
        prefetch(&self.port_vls[self.port_vl(port, self.sl2vl.ca[src.sl as usize])]);
    }

    /// The lines a port's line points to: the queue it sends from, its first requested VL and
    /// its credit returns.
    #[inline(always)]
    fn prefetch_port_lines(&self, port: u32) {
        let ps = &self.ports[port as usize];
        if ps.tx_queue != NONE {
            prefetch(&self.queues[ps.tx_queue as usize]);
        }
        if ps.request_mask != 0 {
            prefetch(&self.port_vls[(port * self.vls + ps.request_mask.trailing_zeros()) as usize]);
        }
        if ps.returns_behind {
            prefetch(&self.returns[port as usize]);
        }
    }

    /// The queue of the oldest request on the port's first requested VL, and the output that
    /// the queue it sends from waits for next (ending a transmission pokes that output).
    #[inline(always)]
    fn prefetch_request(&self, port: u32) {
        let ps = &self.ports[port as usize];
        if ps.request_mask != 0 {
            let first = self.port_vls[(port * self.vls + ps.request_mask.trailing_zeros()) as usize].first_request;
            if first != NONE {
                prefetch(&self.queues[first as usize]);
            }
        }
        if ps.transmitting {
            let queue = &self.queues[ps.tx_queue as usize];
            if queue.head != NONE && queue.out_port != port {
                prefetch(&self.ports[queue.out_port as usize]);
            }
        }
    }

    /// That output's line for the waiting packet's VL (arbitration there reads it first).
    #[inline(always)]
    fn prefetch_poked_output(&self, port: u32) {
        let ps = &self.ports[port as usize];
        if ps.transmitting {
            let queue = &self.queues[ps.tx_queue as usize];
            if queue.head != NONE && queue.out_port != port {
                prefetch(&self.port_vls[self.port_vl(queue.out_port, queue.out_vl)]);
            }
        }
    }

    /// The packet at the head of that oldest request's queue, which the port will send next.
    #[inline(always)]
    fn prefetch_head_packet(&self, port: u32) {
        let ps = &self.ports[port as usize];
        if ps.request_mask != 0 {
            let first = self.port_vls[(port * self.vls + ps.request_mask.trailing_zeros()) as usize].first_request;
            if first != NONE && self.queues[first as usize].head != NONE {
                prefetch(&self.packets.items[self.queues[first as usize].head as usize]);
            }
        }
    }

    fn start_sources(&mut self) {
        for s in 0..self.sources.len() as u32 {
            if self.sources[s as usize].mean_gap_ps.is_some() {
                let t = self.sources[s as usize].first_arrival();
                self.events.push(t, EventKind::Source, s);
            } else {
                for _ in 0..self.sources[s as usize].saturate_depth {
                    self.create_message(s);
                }
            }
        }
    }

    fn on_source(&mut self, s: u32) {
        self.create_message(s);
        let src = &mut self.sources[s as usize];
        if src.queued >= src.max_queued {
            // A full send queue: the source sleeps, with no events, until a message leaves it.
            src.paused_since = self.now;
            src.last_arrival = self.now;
            return;
        }
        let gap = src.next_gap();
        self.events.push(self.now + gap, EventKind::Source, s);
    }

    /// An open-loop source's next message.
    fn create_message(&mut self, s: u32) {
        let src = &mut self.sources[s as usize];
        let dst = src.next_destination(&self.tables[src.traffic as usize]);
        src.queued += 1;
        let (host, sl, bytes, class) = (src.host, src.sl, src.message_bytes, src.traffic);
        self.inject(Message { source: s, ..Message::new(host, dst, sl, bytes, class, self.now) });
    }

    /// Cuts a message into MTU packets (at least one: a zero-byte message is a bare header) and
    /// appends them to the sender's HCA send queue for its SL.
    #[inline(always)]
    fn inject(&mut self, mut m: Message) {
        let now = self.now;
        let (host, dst, sl, bytes, m_class) = (m.src, m.dst, m.sl, m.bytes, m.class);
        let packets = bytes.div_ceil(self.mtu as u64).max(1) as u32;
        m.packets_left = packets;
        m.packets_unsent = packets;
        let message = self.messages.insert(m);
        self.messages_created += 1;
        let q = self.hca_queue(host, sl, dst);
        let mut remaining = bytes;
        for _ in 0..packets {
            let payload = remaining.min(self.mtu as u64) as u32;
            remaining -= payload as u64;
            let wire = payload + self.header;
            let id = self.packets.insert(Packet {
                eligible_at: now,
                message,
                src: host,
                dst,
                next: NONE,
                wire_bytes: wire as u16,
                class: m_class,
                sl,
                phase: 0,
                via: NO_VIA,
            });
            self.packets_created += 1;
            if self.queues[q as usize].push(id, &mut self.packets.items) {
                self.register_head(q, None, None);
            }
        }
    }

    #[inline]
    /// The HCA send queue a message to `dst` on `sl` joins. An HCA serves its queue pairs round
    /// robin, packet by packet, so a short message to one peer does not wait behind a long one
    /// to another; `hca_send_queues_per_sl` queues per SL stand for the QPs, by destination.
    fn hca_queue(&self, host: u32, sl: u8, dst: u32) -> u32 {
        let lanes = self.cfg.fabric.hca_send_queues_per_sl;
        (self.ports.len() as u32) * self.vls + (host * SLS + sl as u32) * lanes + dst % lanes
    }

    /// Input port a queue belongs to (NONE for HCA send queues, which have no crossbar input).
    #[inline]
    fn queue_input(&self, q: u32) -> u32 {
        let switch_queues = self.ports.len() as u32 * self.vls;
        if q < switch_queues {
            q / self.vls
        } else {
            NONE
        }
    }

    #[inline]
    fn port_vl(&self, port: u32, vl: u8) -> usize {
        (port * self.vls + vl as u32) as usize
    }

    /// Routes the new head of queue `q` and files its request with the output port it needs.
    /// `site`: the switch input the queue buffers for (None for an HCA send queue). `routed`:
    /// the head's output port and VL if the caller already worked them out (`fixed_route`).
    #[inline(always)]
    fn register_head(&mut self, q: u32, site: Option<InputSite>, routed: Option<(u32, u8)>) {
        let head = self.queues[q as usize].head;
        let pk = &self.packets.items[head as usize];
        let (eligible, credits, src, dst, sl, class) =
            (pk.eligible_at, pk.credits() as u16, pk.src, pk.dst, pk.sl, pk.class);
        let (out_port, out_vl) = match (routed, site) {
            (Some(r), _) => r,
            (None, None) => (self.graph().host_port(src), self.sl2vl.ca[sl as usize]),
            (None, Some(site)) if self.router.dragonfly.is_some() => self.route_dragonfly(site, head),
            (None, Some(site)) => self.route(site, src, dst, sl),
        };
        if self.attribution.is_some() {
            self.attribute_head(q, out_port, out_vl, eligible, class);
        }
        let queue = &mut self.queues[q as usize];
        queue.out_port = out_port;
        queue.out_vl = out_vl;
        queue.head_eligible_at = eligible;
        queue.head_credits = credits;
        queue.next_request = NONE;
        let busy = queue.busy;
        let idx = self.port_vl(out_port, out_vl);
        let pv = &mut self.port_vls[idx];
        let last = pv.last_request;
        pv.last_request = q;
        pv.requested_credits += credits as u32;
        if last == NONE {
            pv.first_request = q;
        } else {
            self.queues[last as usize].next_request = q;
        }
        let out = &mut self.ports[out_port as usize];
        out.request_mask |= 1 << out_vl;
        if !out.transmitting && !busy {
            self.schedule_wake(out_port, eligible.max(self.now));
        }
    }

    /// Takes queue `q`'s request off the list of (port, VL) `idx`; `prev` is the request filed
    /// just before it (NONE if it is the oldest).
    #[inline]
    fn unfile_request(&mut self, idx: usize, prev: u32, q: u32) {
        if let Some(a) = self.attribution.as_deref_mut() {
            a.granted(idx, q);
        }
        let queue = self.queues[q as usize];
        let pv = &mut self.port_vls[idx];
        if prev == NONE {
            pv.first_request = queue.next_request;
        } else {
            self.queues[prev as usize].next_request = queue.next_request;
        }
        if queue.next_request == NONE {
            pv.last_request = prev;
        }
        pv.requested_credits -= queue.head_credits as u32;
        if pv.first_request == NONE {
            self.ports[queue.out_port as usize].request_mask &= !(1 << queue.out_vl);
        }
    }

    /// Output port and VL for a packet at the head of a switch input port's queue.
    fn route(&mut self, site: InputSite, src: u32, dst: u32, sl: u8) -> (u32, u8) {
        let InputSite { switch, base, local: input_local } = site;
        let local = match self.router.route(switch, src, dst) {
            Route::Port(p) => p,
            Route::AnyUp { first, count } => match self.router.algorithm {
                RoutingAlgorithm::Adaptive => self.least_loaded_up_port(switch, base, first, count, sl, input_local),
                _ => first + self.routing_rng.gen_range(0..count),
            },
        };
        let vl = self.sl2vl.switch_vl(switch, input_local, local, sl);
        (base + local, vl)
    }

    /// Dragonfly+: output port and VL for packet `id` at a switch input; updates its path state.
    /// The VL is the SL2VL table's, moved up one layer of `qos_vls` VLs per routing phase.
    fn route_dragonfly(&mut self, site: InputSite, id: u32) -> (u32, u8) {
        let InputSite { switch, base, local: input } = site;
        let pk = self.packets.items[id as usize];
        let (sl2vl, port_vls, ports, vls, qos_vls, buffer) =
            (&self.sl2vl, &self.port_vls, &self.ports, self.vls, self.qos_vls, self.buffer_credits as i64);
        let router = self.router.dragonfly.as_ref().expect("dragonfly routing");
        // Adaptive cost of an output: requests queued for it plus its downstream buffer in use.
        let load = |local: u32, phase: u8| -> i64 {
            let port = base + local;
            let vl = sl2vl.switch_vl(switch, input, local, pk.sl) as u32 + phase as u32 * qos_vls;
            let pv = &port_vls[(port * vls + vl) as usize];
            pv.requested_credits as i64 + buffer - pv.credits as i64 + ports[port as usize].transmitting as i64
        };
        let decided_before = pk.phase & PATH_DECIDED != 0;
        // Only flowlet decisions (Decision::Once) read or write the flow's entry.
        let flow = (pk.src as u64) << 32 | pk.dst as u64;
        let decision = if self.flowlet_gap == 0 {
            Decision::PerPacket
        } else if decided_before {
            Decision::Done
        } else {
            let now = self.now;
            Decision::Once(self.flowlets.get(&flow).filter(|f| now - f.1 < self.flowlet_gap).map(|f| f.0))
        };
        let hop = router.route(
            switch,
            input,
            pk.dst,
            pk.via,
            pk.phase & !PATH_DECIDED,
            decision,
            &mut self.routing_rng,
            load,
        );
        if hop.decided {
            // A new flowlet, or the next packet of one: either way its timer restarts now.
            self.flowlets.insert(flow, (hop.via, self.now));
        }
        let packet = &mut self.packets.items[id as usize];
        packet.via = hop.via;
        packet.phase = hop.phase | if hop.decided || decided_before { PATH_DECIDED } else { 0 };
        let vl = self.sl2vl.switch_vl(switch, input, hop.port, pk.sl) as u32 + hop.phase as u32 * self.qos_vls;
        (base + hop.port, vl as u8)
    }

    /// The output port and VL at `site` when they depend on the packet alone (no per-packet
    /// choice among up ports, which draws random numbers and must happen once, at filing).
    #[inline]
    fn fixed_route(&self, site: InputSite, src: u32, dst: u32, sl: u8) -> Option<(u32, u8)> {
        if self.router.dragonfly.is_some() {
            return None; // Dragonfly+ routes depend on the packet's path state: routed at filing
        }
        match self.router.route(site.switch, src, dst) {
            Route::Port(local) => Some((site.base + local, self.sl2vl.switch_vl(site.switch, site.local, local, sl))),
            Route::AnyUp { .. } => None,
        }
    }

    /// Adaptive choice: the up port with the most free downstream credits on the packet's VL,
    /// less the credits already requested there; ties go to a random starting point.
    fn least_loaded_up_port(
        &mut self,
        switch: u32,
        base: u32,
        first: u32,
        count: u32,
        sl: u8,
        input_local: u32,
    ) -> u32 {
        let start = self.routing_rng.gen_range(0..count);
        let mut best = (i64::MIN, first);
        for k in 0..count {
            let local = first + (start + k) % count;
            let port = base + local;
            let vl = self.sl2vl.switch_vl(switch, input_local, local, sl) as u32;
            let pv = &self.port_vls[(port * self.vls + vl) as usize];
            let busy = self.ports[port as usize].transmitting as i64;
            let score = pv.credits as i64 - pv.requested_credits as i64 - busy;
            if score > best.0 {
                best = (score, local);
            }
        }
        best.1
    }

    #[inline(always)]
    fn schedule_wake(&mut self, port: u32, at: Time) {
        if at < self.ports[port as usize].wake_at {
            self.ports[port as usize].wake_at = at;
            self.events.push(at, EventKind::Wake, port);
        }
    }

    fn on_wake(&mut self, port: u32) {
        if self.ports[port as usize].wake_at == self.now {
            self.ports[port as usize].wake_at = NEVER;
        }
        self.try_send(port);
    }

    fn on_tx_end(&mut self, port: u32) {
        let ps = &mut self.ports[port as usize];
        ps.transmitting = false;
        let q = ps.tx_queue;
        let queue = &mut self.queues[q as usize];
        queue.busy = false;
        if self.attribution.is_some() && queue.head != NONE {
            self.attribute_freed(q);
        }
        let queue = &self.queues[q as usize];
        // The queue's next packet may now go, possibly to another output.
        let out = queue.out_port;
        if queue.head != NONE && out != port {
            self.try_send(out);
        }
        self.try_send(port);
    }

    /// Credits freed at a receiver, arriving back at the sending port `port` at time `at`.
    #[inline(always)]
    fn return_credits(&mut self, port: u32, vl: u8, credits: u32, at: Time) {
        let ps = &mut self.ports[port as usize];
        // Return times on one link only grow, so a new return goes behind any pending one.
        if ps.next_return_at == NEVER {
            ps.next_return_at = at;
            ps.next_return_credits = credits as u16;
            ps.next_return_vl = vl;
        } else {
            ps.returns_behind = true;
            self.returns[port as usize].push(CreditReturn { at, vl, credits });
        }
        if self.ports[port as usize].credit_waiting && !self.ports[port as usize].transmitting {
            self.schedule_wake(port, at);
        }
    }

    #[inline]
    fn apply_returned_credits(&mut self, port: u32) {
        let now = self.now;
        let ps = &mut self.ports[port as usize];
        while ps.next_return_at <= now {
            self.port_vls[(port * self.vls + ps.next_return_vl as u32) as usize].credits +=
                ps.next_return_credits as u32;
            if ps.returns_behind {
                let returns = &mut self.returns[port as usize];
                let r = returns.pop_front();
                ps.next_return_at = r.at;
                ps.next_return_credits = r.credits as u16;
                ps.next_return_vl = r.vl;
                ps.returns_behind = returns.front_at().is_some();
            } else {
                ps.next_return_at = NEVER;
            }
        }
    }

    /// Every credit return on its way to `port`, oldest first.
    fn pending_returns(&self, port: u32) -> impl Iterator<Item = CreditReturn> + '_ {
        let ps = &self.ports[port as usize];
        let first = (ps.next_return_at != NEVER).then_some(CreditReturn {
            at: ps.next_return_at,
            vl: ps.next_return_vl,
            credits: ps.next_return_credits as u32,
        });
        first.into_iter().chain(self.returns[port as usize].iter())
    }

    /// Arbitrates an idle output port: picks a VL by the VL arbiter, then the oldest request on
    /// that VL whose packet is eligible, whose input is free and which fits the downstream credits.
    /// About a third of the calls find the port sending or with nothing filed and no credits due;
    /// those are answered here, inline, from the port's line.
    #[inline(always)]
    fn try_send(&mut self, port: u32) {
        let ps = &self.ports[port as usize];
        if ps.transmitting || (ps.request_mask == 0 && ps.next_return_at > self.now) {
            return;
        }
        self.arbitrate(port);
    }

    #[inline(never)]
    fn arbitrate(&mut self, port: u32) {
        let now = self.now;
        self.apply_returned_credits(port);
        let mut mask = self.ports[port as usize].request_mask;
        if mask == 0 {
            return;
        }
        let base = port * self.vls;
        let mut ready: u16 = 0;
        // The last VL found ready and the request filed just before its first sendable one
        // (NONE if that is the oldest), for unlinking it. Usually a port has one VL in use; when
        // the arbiter grants another, that VL's list is searched again (`sendable_prev`).
        let (mut last_ready_vl, mut last_ready_prev) = (0u8, NONE);
        let mut next_eligible = NEVER;
        let mut credit_blocked = false;
        let mut stalled_mask = self.ports[port as usize].stalled_mask;
        while mask != 0 {
            let v = mask.trailing_zeros();
            mask &= mask - 1;
            let idx = (base + v) as usize;
            let pv = &self.port_vls[idx];
            let available = pv.credits;
            let mut stalled = false;
            let (mut prev, mut q) = (NONE, pv.first_request);
            while q != NONE {
                let r = &self.queues[q as usize];
                let next = r.next_request;
                if r.head_eligible_at > now {
                    next_eligible = next_eligible.min(r.head_eligible_at);
                } else {
                    if !r.busy {
                        if r.head_credits as u32 > available {
                            stalled = true;
                        } else {
                            ready |= 1 << v;
                            (last_ready_vl, last_ready_prev) = (v as u8, prev);
                            stalled = false;
                            break;
                        }
                    }
                }
                prev = q;
                q = next;
            }
            let was_stalled = stalled_mask & (1 << v) != 0;
            if stalled != was_stalled {
                self.port_vls[idx].counters.set_stalled(stalled, now, &self.window);
                stalled_mask ^= 1 << v;
                self.ports[port as usize].stalled_mask = stalled_mask;
            }
            credit_blocked |= stalled;
        }
        let ps = &mut self.ports[port as usize];
        let table = &self.arb_tables[(ps.switch != NONE) as usize];
        let grant = if ready != 0 { ps.arb.select(table, ready) } else { None };
        let Some(grant) = grant else {
            if credit_blocked {
                if let Some(w) = self.xmit_wait.as_deref_mut() {
                    if w[port as usize].0 == NEVER {
                        w[port as usize].0 = now;
                    }
                }
                if self.attribution.is_some() {
                    let ps = &self.ports[port as usize];
                    let downstream = (!ps.peer_is_host).then(|| ps.peer * self.vls);
                    let a = self.attribution.as_deref_mut().expect("attribution on");
                    a.blocked(port, stalled_mask, now, downstream, &self.queues);
                }
                self.ports[port as usize].credit_waiting = true;
                let at = self.ports[port as usize].next_return_at;
                if at != NEVER {
                    self.schedule_wake(port, at);
                }
            }
            if next_eligible != NEVER {
                self.schedule_wake(port, next_eligible);
            }
            return;
        };
        let idx = (base + grant.vl as u32) as usize;
        let prev = if grant.vl == last_ready_vl { last_ready_prev } else { self.sendable_prev(idx) };
        let q = if prev == NONE { self.port_vls[idx].first_request } else { self.queues[prev as usize].next_request };
        self.unfile_request(idx, prev, q);
        self.transmit(port, q, grant.vl, grant);
    }

    /// The request filed just before the first sendable one on (port, VL) `idx` (NONE if that
    /// is the oldest): the same one the scan in `arbitrate` found, as nothing changed since.
    fn sendable_prev(&self, idx: usize) -> u32 {
        let (now, available) = (self.now, self.port_vls[idx].credits);
        let (mut prev, mut q) = (NONE, self.port_vls[idx].first_request);
        loop {
            let r = &self.queues[q as usize];
            if r.head_eligible_at <= now && !r.busy && r.head_credits as u32 <= available {
                return prev;
            }
            (prev, q) = (q, r.next_request);
        }
    }

    /// Starts sending the head of queue `q` on `port`, VL `vl`.
    fn transmit(&mut self, port: u32, q: u32, vl: u8, grant: crate::fabric::vl_arbiter::Grant) {
        let now = self.now;
        let upstream = self.queues[q as usize].upstream;
        // What this hop needs of the port's line, read once.
        let ps = &self.ports[port as usize];
        let (down, delivers, peer_switch, peer_local) =
            (ps.peer, ps.peer_is_host, ps.peer_switch, ps.peer_local as u32);
        // Whether the port sat idle for credits since its last transmission (the blocked
        // interval attribution and PortXmitWait close now); read here, from the line in hand.
        let was_blocked = ps.credit_waiting;
        let (switch, base) = (ps.switch, port - ps.local as u32);
        // Start the misses this packet-hop will take anyway, so that they overlap.
        if !delivers {
            prefetch(&self.queues[(down * self.vls + vl as u32) as usize]);
        }
        if upstream != NONE {
            prefetch(&self.ports[upstream as usize]);
            // Often (nearly half the time on a loaded fabric) a return is already on its way
            // there, and this one queues behind it.
            if self.deep_prefetch {
                prefetch(&self.returns[upstream as usize]);
            }
        }
        let id = self.queues[q as usize].pop(&self.packets.items);
        let pk = &self.packets.items[id as usize];
        let (wire, credits, message) = (pk.wire_bytes as u32, pk.credits(), pk.message);
        // An HCA's send and the last hop's delivery update the packet's message.
        if self.deep_prefetch && (upstream == NONE || delivers) {
            prefetch(&self.messages.items[message as usize]);
        }
        // Where the packet goes at the next switch, worked out now (when fixed) so that the lines
        // filing it there will touch (the output's port state and VL) are requested early and
        // their misses overlap with this hop's others, instead of following them.
        let mut next_site = None;
        let mut next_route = None;
        if !delivers {
            let site = InputSite { switch: peer_switch, base: down - peer_local, local: peer_local };
            next_site = Some(site);
            next_route = self.fixed_route(site, pk.src, pk.dst, pk.sl);
            if let Some((out, out_vl)) = next_route {
                prefetch(&self.ports[out as usize]);
                prefetch(&self.port_vls[(out * self.vls + out_vl as u32) as usize]);
            }
        }
        let done = if self.port_rates.is_empty() {
            // Nearly every packet is a full one: its serialization time is worked out once.
            now + if wire == self.full_wire { self.full_ser } else { self.rate.serialization(wire) }
        } else {
            self.mixed_rate_tx_end(port, upstream, wire, pk.eligible_at)
        };
        if self.attribution.is_some() {
            self.attribute_wait(port, q, now, done, was_blocked);
        }
        if was_blocked {
            if let Some(w) = self.xmit_wait.as_deref_mut() {
                let (since, total) = &mut w[port as usize];
                if *since != NEVER {
                    *total += self.window.overlap(*since, now);
                    *since = NEVER;
                }
            }
        }
        let idx = self.port_vl(port, vl);
        let pv = &mut self.port_vls[idx];
        pv.credits -= credits;
        pv.counters.busy_ps += self.window.overlap(now, done);
        if self.window.contains(now) {
            pv.counters.packets += 1;
            pv.counters.bytes += wire as u64;
        }
        let ps = &mut self.ports[port as usize];
        ps.arb.charge(grant, wire);
        ps.transmitting = true;
        ps.credit_waiting = false;
        ps.tx_queue = q;
        self.events.push(done, EventKind::TxEnd, port);
        self.packet_hops += 1;

        // Where the queue's next head is routed from: this port's switch, the queue's input.
        let mut site = None;
        if upstream != NONE {
            // The packet leaves the input buffer when its tail has left: credits go back then.
            let input = q / self.vls;
            let in_vl = (q - input * self.vls) as u8;
            self.return_credits(upstream, in_vl, credits, done + self.link_latency);
            site = Some(InputSite { switch, base, local: input - base });
        } else if self.window.contains(now) {
            let m = &self.messages.items[message as usize];
            let (sl, class) = (m.sl, m.class);
            for s in self.flow_classes(sl, class) {
                s.injected_wire_bytes += wire as u64;
            }
        }
        let queue = &mut self.queues[q as usize];
        queue.busy = true;
        if queue.head != NONE {
            self.register_head(q, site, None);
        }
        if upstream == NONE {
            self.on_hca_sent(message);
        }

        if delivers {
            let tail = done + self.link_latency;
            self.deliver(id, tail);
            self.return_credits(port, vl, credits, tail + self.link_latency);
        } else {
            self.packets.items[id as usize].eligible_at = now + self.link_latency + self.switch_latency;
            let dq = down * self.vls + vl as u32;
            if self.queues[dq as usize].push(id, &mut self.packets.items) {
                self.register_head(dq, next_site, next_route);
            }
        }
    }

    /// Attribution: queue `q`'s new head reached the head (its request about to be filed at
    /// `out_port`, `out_vl`); the queue still holds where its predecessor was filed.
    #[inline(never)]
    fn attribute_head(&mut self, q: u32, out_port: u32, out_vl: u8, eligible: Time, class: u16) {
        let (now, window, vls) = (self.now, self.window, self.vls as usize);
        let queue = &self.queues[q as usize];
        let previous = queue.out_port as usize * vls + queue.out_vl as usize;
        let (busy, idx) = (queue.busy, out_port as usize * vls + out_vl as usize);
        let a = self.attribution.as_deref_mut().expect("attribution on");
        a.new_head(q, class, idx, busy, previous, eligible, now, |from, to| window.overlap(from, to));
    }

    /// Attribution: queue `q`'s predecessor has left; its head now waits at its output.
    #[inline(never)]
    fn attribute_freed(&mut self, q: u32) {
        let queue = &self.queues[q as usize];
        let idx = self.port_vl(queue.out_port, queue.out_vl);
        self.attribution.as_deref_mut().expect("attribution on").queue_freed(q, idx);
    }

    /// Attribution (`run.interference`): `port` starts sending queue `q`'s former head until
    /// `done`; any credit-stalled idle time before is charged first.
    #[inline(never)]
    fn attribute_wait(&mut self, port: u32, q: u32, now: Time, done: Time, was_blocked: bool) {
        let window = self.window;
        let requests = self.ports[port as usize].request_mask;
        let a = self.attribution.as_deref_mut().expect("attribution on");
        if was_blocked {
            a.unblocked(port, |since| window.overlap(since, now));
        }
        a.transmitting(port, requests, q, done, window.overlap(now, done));
    }

    /// When a packet's transmission on `port` ends where links differ in rate: cut-through onto
    /// a faster link cannot finish before the packet's tail has arrived from the slower one.
    fn mixed_rate_tx_end(&self, port: u32, upstream: u32, wire: u32, eligible_at: Time) -> Time {
        let rate = self.port_rates[port as usize];
        let end = self.now + rate.serialization(wire);
        if upstream == NONE {
            return end;
        }
        // The header arrived a switch latency before the packet became eligible; its tail
        // follows at the upstream link's rate, and leaves here one byte time after arriving.
        let tail_in = eligible_at - self.switch_latency + self.port_rates[upstream as usize].serialization(wire);
        end.max(tail_in + rate.serialization(1))
    }

    /// An HCA put one more packet of `message` on its wire; a saturating source refills, an
    /// eager MPI send completes.
    fn on_hca_sent(&mut self, message: u32) {
        let m = &mut self.messages.items[message as usize];
        m.packets_unsent -= 1;
        if m.packets_unsent == 0 && m.mpi != NONE {
            if m.notify_injected {
                let id = m.mpi;
                self.with_mpi(|mpi, sim| mpi.on_injected(id, sim.now, sim));
            }
        } else if m.packets_unsent == 0 {
            let s = m.source;
            let src = &mut self.sources[s as usize];
            src.queued -= 1;
            if src.mean_gap_ps.is_none() {
                if src.queued < src.saturate_depth {
                    self.create_message(s);
                }
            } else if src.paused_since != NEVER {
                let (next, refused) = src.resume(self.now, &self.window, &mut self.refused_rng);
                let (sl, traffic) = (src.sl, src.traffic);
                for c in self.flow_classes(sl, traffic) {
                    c.refused_messages += refused;
                }
                self.events.push(next, EventKind::Source, s);
            }
        }
    }

    /// The packet's tail reaches its destination HCA at `tail` (possibly after the run ends).
    fn deliver(&mut self, id: u32, tail: Time) {
        let pk = self.packets.items[id as usize];
        let (wire, payload) = (pk.wire_bytes as u64, pk.wire_bytes as u64 - self.header as u64);
        self.packets.remove(id);
        self.packets_delivered_total += 1;
        let m = &mut self.messages.items[pk.message as usize];
        m.packets_left -= 1;
        m.last_delivery = m.last_delivery.max(tail);
        let m = *m;
        let in_window = self.window.contains(tail);
        if in_window {
            for s in self.flow_classes(m.sl, m.class) {
                s.delivered_wire_bytes += wire;
                s.delivered_payload_bytes += payload;
                s.delivered_packets += 1;
                s.nonminimal_packets += (pk.via != NO_VIA) as u64;
            }
        }
        if m.packets_left > 0 {
            return;
        }
        self.messages.remove(pk.message);
        self.messages_completed += 1;
        let done = m.last_delivery;
        if m.mpi != NONE {
            self.events.push(done, EventKind::MpiArrival, m.mpi);
        }
        if done < self.window.end {
            if m.created >= self.window.start {
                let latency = done - m.created;
                for s in self.flow_classes(m.sl, m.class) {
                    s.latencies.push(latency);
                }
            }
            if done >= self.window.start {
                for s in self.flow_classes(m.sl, m.class) {
                    s.delivered_messages += 1;
                }
            }
            if self.cfg.run.record_messages {
                self.message_log.push(MessageRecord {
                    src: m.src,
                    dst: m.dst,
                    sl: m.sl,
                    class: m.class,
                    bytes: m.bytes,
                    created: m.created,
                    delivered: done,
                });
            }
        }
    }

    /// The statistics classes a message counts in: everything, its SL, its traffic table or job.
    #[inline]
    fn flow_classes(&mut self, sl: u8, class: u16) -> [&mut FlowStats; 3] {
        [&mut self.all, &mut self.by_sl[sl as usize], &mut self.by_class[class as usize]]
    }

    /// Counts what sources still paused at the end refused until then.
    fn close_paused_sources(&mut self) {
        for s in 0..self.sources.len() {
            let src = &self.sources[s];
            if src.mean_gap_ps.is_some() && src.paused_since != NEVER {
                let refused = src.refused_until(self.now, &self.window, &mut self.refused_rng);
                let (sl, traffic) = (src.sl, src.traffic);
                for c in self.flow_classes(sl, traffic) {
                    c.refused_messages += refused;
                }
            }
        }
    }

    fn close_stalls(&mut self) {
        let now = self.now;
        if let Some(w) = self.xmit_wait.as_deref_mut() {
            for (since, total) in w.iter_mut().filter(|e| e.0 != NEVER) {
                *total += self.window.overlap(*since, now);
                *since = NEVER;
            }
        }
        if let Some(mut a) = self.attribution.take() {
            // Ports still blocked at the end: their wait so far is charged too.
            let window = self.window;
            for port in a.blocked_ports().collect::<Vec<_>>() {
                a.unblocked(port, |since| window.overlap(since, now));
            }
            self.attribution = Some(a);
        }
        for pv in &mut self.port_vls {
            pv.counters.set_stalled(false, now, &self.window);
        }
    }

    /// Checks that every packet and every credit is accounted for; returns the figures.
    pub fn conservation(&self) -> Result<serde_json::Value, String> {
        let g = self.topology.graph();
        let live = self.packets.live() as u64;
        let mut queued = 0u64;
        let mut queued_credits = vec![0u64; self.port_vls.len()];
        for q in 0..self.queues.len() as u32 {
            let mut id = self.queues[q as usize].head;
            while id != NONE {
                queued += 1;
                if self.queue_input(q) != NONE {
                    queued_credits[q as usize] += self.packets.items[id as usize].credits() as u64;
                }
                id = self.packets.items[id as usize].next;
            }
        }
        if queued != live {
            return Err(format!("{live} live packets but {queued} in queues"));
        }
        if self.packets_created != self.packets_delivered_total + live {
            return Err(format!(
                "packets created {} != delivered {} + in flight {live}",
                self.packets_created, self.packets_delivered_total
            ));
        }
        if self.messages_created != self.messages_completed + self.messages.live() as u64 {
            return Err("messages created != completed + open".into());
        }
        let mut checked = 0u64;
        for p in 0..g.ports() {
            let down = g.port_peer[p as usize];
            if down == NONE {
                continue;
            }
            for v in 0..self.vls {
                let idx = (p * self.vls + v) as usize;
                let returning: u64 =
                    self.pending_returns(p).filter(|r| r.vl as u32 == v).map(|r| r.credits as u64).sum();
                let held = queued_credits[(down * self.vls + v) as usize];
                let free = self.port_vls[idx].credits;
                let total = free as u64 + returning + held;
                if total != self.buffer_credits as u64 {
                    return Err(format!(
                        "port {p} VL{v}: {free} free + {returning} returning + {held} held != {} credits",
                        self.buffer_credits
                    ));
                }
                checked += 1;
            }
        }
        let delivered_after_end = self.packets_delivered_total - self.all.delivered_packets;
        Ok(serde_json::json!({
            "ok": true,
            "packets_created": self.packets_created,
            "packets_delivered": self.packets_delivered_total,
            "packets_in_flight": live,
            "packets_delivered_in_window": self.all.delivered_packets,
            "packets_delivered_outside_window": delivered_after_end,
            "messages_created": self.messages_created,
            "messages_completed": self.messages_completed,
            "credit_counters_checked": checked,
        }))
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunStatus {
    /// Open-loop traffic ran its duration, or every job completed once.
    Completed,
    /// Stopped by the caller (Ctrl-C).
    Interrupted,
    /// Jobs were still running at the time limit (`run.duration_us`).
    TimeLimit,
    /// No MPI rank could ever make progress again; the text names the ranks.
    Deadlock(String),
}

impl Transport for Simulation {
    fn send(
        &mut self,
        src_host: u32,
        dst_host: u32,
        sl: u8,
        bytes: u64,
        job: u32,
        message: u32,
        notify_injected: bool,
    ) {
        let class = (self.tables.len() as u32 + job) as u16;
        let m = Message::new(src_host, dst_host, sl, bytes, class, self.now);
        self.inject(Message { mpi: message, notify_injected, ..m });
    }

    fn schedule_arrival(&mut self, at: Time, message: u32) {
        self.events.push(at, EventKind::MpiArrival, message);
    }

    fn schedule_resume(&mut self, at: Time, rank: u32) {
        self.events.push(at, EventKind::RankResume, rank);
    }
}

impl Simulation {
    /// Requests that could be sent right now (eligible, input free, credits available) on an
    /// output port that is idle with nothing scheduled: a lost wake-up. Empty in a healthy run.
    pub fn sendable_but_idle(&self) -> Vec<String> {
        let mut out = Vec::new();
        for p in 0..self.ports.len() as u32 {
            if self.ports[p as usize].transmitting || self.ports[p as usize].wake_at != NEVER {
                continue;
            }
            let mut credits: Vec<u32> =
                (0..self.vls).map(|v| self.port_vls[(p * self.vls + v) as usize].credits).collect();
            for r in self.pending_returns(p).filter(|r| r.at <= self.now) {
                credits[r.vl as usize] += r.credits;
            }
            for v in 0..self.vls {
                let mut q = self.port_vls[(p * self.vls + v) as usize].first_request;
                while q != NONE {
                    let queue = &self.queues[q as usize];
                    let pk = &self.packets.items[queue.head as usize];
                    if pk.eligible_at <= self.now && !queue.busy && pk.credits() <= credits[v as usize] {
                        out.push(format!("port {p} VL{v}: packet {}->{} from queue {q} could be sent", pk.src, pk.dst));
                    }
                    q = queue.next_request;
                }
            }
        }
        out
    }
}

/// Asks the cache for the line holding `item` (a hint; nothing on other architectures).
#[inline(always)]
fn prefetch<T>(item: &T) {
    prefetch_addr(item as *const T as usize);
}

#[inline(always)]
fn prefetch_addr(addr: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint; it never faults, even on an invalid address.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(addr as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}

/// Asks for every line `item` spans (for structs larger than a line or not aligned to one).
#[inline(always)]
fn prefetch_all<T>(item: &T) {
    let start = item as *const T as usize;
    let end = start + std::mem::size_of::<T>();
    let mut line = start & !63;
    while line < end {
        // Only addresses inside `item` are formed: `line` is clipped to its first byte.
        prefetch_addr(line.max(start));
        line += 64;
    }
}
