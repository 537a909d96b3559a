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

pub mod output;
pub(crate) mod state;

pub use output::RunOutput;

use crate::config::{ConfigError, EngineConfig, RoutingAlgorithm};
use crate::fabric::sl2vl::{table, Sl2Vl};
use crate::fabric::vl_arbiter::{ArbState, ArbTables};
use crate::mpi::{program::PackedTrace, Mpi, Transport};
use std::collections::HashMap;
use crate::queue::{EventKind, EventQueue, MAX_EVENT_ID};
use crate::routing::{Route, Router};
use crate::stats::{FlowStats, PortVlCounters, Window};
use crate::topology::{Graph, Topology, NONE};
use crate::traffic::{build_sources, stream_rng, Source, TrafficTable, RNG_ROUTING};
use crate::units::{credits_for, ns_to_ps, us_to_ps, Rate, Time, NEVER};
use rand::Rng;
use rand_pcg::Pcg64Mcg;
use state::{CreditReturn, CreditReturns, Fifos, Message, Packet, Slab};

/// SLs per HCA send queue set.
const SLS: u32 = 16;
/// How often (in events) the run asks its caller whether to stop.
const STOP_CHECK_EVENTS: u64 = 1 << 16;

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

/// A FIFO head asking for an output port, with what arbitration needs of its packet copied in
/// so that scanning requests touches no packet.
#[derive(Debug, Clone, Copy)]
struct Request {
    queue: u32,
    credits: u32,
    eligible_at: Time,
}

/// Per-port state touched on every event at that port, kept together so one event costs one
/// cache miss for it rather than one per array.
#[derive(Debug, Clone)]
struct PortState {
    /// A packet is on the wire; cleared when its TxEnd is handled (not merely when time passes,
    /// so a same-instant poke cannot start a new packet before the old one's input is released).
    transmitting: bool,
    credit_waiting: bool,
    port_is_switch: bool,
    /// As an input: feeding an output until that output's TxEnd (one output at a time).
    input_busy: bool,
    /// Bit v set when `requests[(port, v)]` is non-empty (skips idle VLs quickly).
    request_mask: u16,
    /// Bit v set while VL v is in a credit stall (mirror of `counters`).
    stalled_mask: u16,
    /// Input port feeding the packet now on this port's wire (NONE for an HCA's own packets).
    tx_input: u32,
    wake_at: Time,
    /// Arrival time of the oldest credit return (NEVER if none), so the common "nothing has come
    /// back yet" case touches no deque.
    next_return_at: Time,
    arb: ArbState,
}

pub struct Simulation {
    cfg: EngineConfig,
    topology: Topology,
    router: Router,
    sl2vl: Sl2Vl,
    /// Arbitration tables: index 0 for CA ports, 1 for switch external ports.
    arb_tables: [ArbTables; 2],
    vls: u32,
    rate: Rate,
    link_latency: Time,
    switch_latency: Time,
    mtu: u32,
    header: u32,
    buffer_credits: u32,
    window: Window,

    /// The hot per-port scalars, one cache line per port (see `PortState`).
    ports: Vec<PortState>,
    /// Sender's view of the receiver's free buffer, per (port, VL).
    credits: Vec<u32>,
    returns: Vec<CreditReturns>,
    /// Queues whose head wants this (port, VL), oldest request first.
    requests: Vec<Vec<Request>>,
    counters: Vec<PortVlCounters>,
    fifos: Fifos,

    packets: Slab<Packet>,
    messages: Slab<Message>,
    sources: Vec<Source>,
    tables: Vec<TrafficTable>,
    routing_rng: Pcg64Mcg,

    events: EventQueue,
    now: Time,
    event_count: u64,
    pending_sum: u128,
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
}

impl Simulation {
    pub fn new(cfg: EngineConfig) -> Result<Simulation, ConfigError> {
        Simulation::with_traces(cfg, &HashMap::new())
    }

    /// Builds a run whose trace-replay jobs take their rank programs from `traces(job index)`.
    pub fn with_traces(cfg: EngineConfig, traces: &HashMap<usize, PackedTrace>) -> Result<Simulation, ConfigError> {
        cfg.validate()?;
        let topology = Topology::build(&cfg.topology)?;
        let router = Router::new(&topology, cfg.routing.algorithm);
        let g = topology.graph();
        let f = &cfg.fabric;
        let vls = f.data_vls as u32;
        let rate = Rate::from_gbps(f.link_gbps);
        let mut sl2vl = Sl2Vl::new(table(&cfg.qos.ca.sl2vl), table(&cfg.qos.swe.sl2vl));
        for (i, o) in cfg.qos.sl2vl_overrides.iter().enumerate() {
            let key = format!("qos.sl2vl_pairs[{i}]");
            if o.switch >= g.switches {
                return Err(ConfigError::new(key, format!("switch {} does not exist (0..{})", o.switch, g.switches - 1)));
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
        let port_is_switch: Vec<bool> = (0..ports).map(|p| !g.is_host(g.port_node[p as usize])).collect();
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
            rate,
            link_latency: ns_to_ps(f.link_latency_ns),
            switch_latency: ns_to_ps(f.switch_latency_ns),
            mtu: f.mtu_bytes,
            header: f.header_bytes,
            buffer_credits,
            window,
            ports: port_is_switch
                .into_iter()
                .map(|is_switch| PortState {
                    transmitting: false,
                    credit_waiting: false,
                    port_is_switch: is_switch,
                    input_busy: false,
                    request_mask: 0,
                    stalled_mask: 0,
                    tx_input: NONE,
                    wake_at: NEVER,
                    next_return_at: NEVER,
                    arb: ArbState::default(),
                })
                .collect(),
            credits: vec![buffer_credits; pv],
            returns: (0..np).map(|_| CreditReturns::new()).collect(),
            requests: vec![Vec::new(); pv],
            counters: vec![PortVlCounters::default(); pv],
            fifos: Fifos::new(pv + (g.hosts * SLS * f.hca_send_queues_per_sl) as usize),
            packets: Slab::new(),
            messages: Slab::new(),
            sources,
            tables,
            routing_rng: stream_rng(cfg.seed, RNG_ROUTING, 0),
            events: EventQueue::new(),
            now: 0,
            event_count: 0,
            pending_sum: 0,
            packet_hops: 0,
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
    pub fn run(&mut self, should_stop: &mut dyn FnMut() -> bool) -> bool {
        self.start_sources();
        self.with_mpi(|mpi, sim| mpi.start(0, sim));
        let end = self.window.end;
        let mut interrupted = false;
        while let Some(t) = self.events.peek_time() {
            if t >= end || self.mpi_finished() {
                break;
            }
            let (t, kind, id) = self.events.pop().unwrap();
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
            if self.event_count % STOP_CHECK_EVENTS == 0 && should_stop() {
                interrupted = true;
                break;
            }
        }
        self.status = match self.mpi.as_deref() {
            _ if interrupted => RunStatus::Interrupted,
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
        let gap = self.sources[s as usize].next_gap();
        self.events.push(self.now + gap, EventKind::Source, s);
    }

    /// An open-loop source's next message.
    fn create_message(&mut self, s: u32) {
        let src = &mut self.sources[s as usize];
        let dst = src.next_destination(&self.tables[src.traffic as usize]);
        src.queued += 1;
        let (host, sl, bytes, class) = (src.host, src.sl, src.message_bytes, src.traffic);
        self.inject(Message {
            src: host,
            dst,
            source: s,
            mpi: NONE,
            notify_injected: false,
            class,
            sl,
            bytes,
            created: self.now,
            last_delivery: 0,
            packets_left: 0,
            packets_unsent: 0,
        });
    }

    /// Cuts a message into MTU packets (at least one: a zero-byte message is a bare header) and
    /// appends them to the sender's HCA send queue for its SL.
    fn inject(&mut self, mut m: Message) {
        let now = self.now;
        let (host, dst, sl, bytes) = (m.src, m.dst, m.sl, m.bytes);
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
                message,
                src: host,
                dst,
                wire_bytes: wire,
                payload_bytes: payload,
                credits: credits_for(wire),
                sl,
                vl: 0,
                out_vl: 0,
                out_port: NONE,
                eligible_at: now,
                next: NONE,
            });
            self.packets_created += 1;
            if self.fifos.push(q, id, &mut self.packets.items) {
                self.register_head(q);
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
        if q < switch_queues { q / self.vls } else { NONE }
    }

    /// Routes the new head of queue `q` and files its request with the output port it needs.
    fn register_head(&mut self, q: u32) {
        let id = self.fifos.head[q as usize];
        let input = self.queue_input(q);
        let (out_port, out_vl) = {
            let pk = self.packets.items[id as usize];
            if input == NONE {
                let port = self.graph().host_port(pk.src);
                (port, self.sl2vl.ca[pk.sl as usize])
            } else {
                self.route(input, &pk)
            }
        };
        let pk = &mut self.packets.items[id as usize];
        pk.out_port = out_port;
        pk.out_vl = out_vl;
        let eligible = pk.eligible_at;
        let credits = pk.credits;
        self.requests[(out_port * self.vls + out_vl as u32) as usize].push(Request { queue: q, credits, eligible_at: eligible });
        self.ports[out_port as usize].request_mask |= 1 << out_vl;
        if !self.ports[out_port as usize].transmitting && (input == NONE || !self.ports[input as usize].input_busy) {
            self.schedule_wake(out_port, eligible.max(self.now));
        }
    }

    /// Output port and VL for a packet at the head of a switch input port's queue.
    fn route(&mut self, input: u32, pk: &Packet) -> (u32, u8) {
        let g = self.topology.graph();
        let node = g.port_node[input as usize];
        let base = g.port_base[node as usize];
        let switch = node - g.hosts;
        let local = match self.router.route(switch, pk.src, pk.dst) {
            Route::Port(p) => p,
            Route::AnyUp { first, count } => match self.router.algorithm {
                RoutingAlgorithm::Adaptive => self.least_loaded_up_port(switch, base, first, count, pk.sl, input - base),
                _ => first + self.routing_rng.gen_range(0..count),
            },
        };
        let vl = self.sl2vl.switch_vl(switch, input - base, local, pk.sl);
        (base + local, vl)
    }

    /// Adaptive choice: the up port with the most free downstream credits on the packet's VL,
    /// less the credits already requested there; ties go to a random starting point.
    fn least_loaded_up_port(&mut self, switch: u32, base: u32, first: u32, count: u32, sl: u8, input_local: u32) -> u32 {
        let start = self.routing_rng.gen_range(0..count);
        let mut best = (i64::MIN, first);
        for k in 0..count {
            let local = first + (start + k) % count;
            let port = base + local;
            let vl = self.sl2vl.switch_vl(switch, input_local, local, sl) as u32;
            let idx = (port * self.vls + vl) as usize;
            let backlog: u32 = self.requests[idx].iter().map(|r| r.credits).sum();
            let busy = self.ports[port as usize].transmitting as i64;
            let score = self.credits[idx] as i64 - backlog as i64 - busy;
            if score > best.0 {
                best = (score, local);
            }
        }
        best.1
    }

    #[inline]
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
        self.ports[port as usize].transmitting = false;
        let input = self.ports[port as usize].tx_input;
        if input != NONE {
            self.ports[input as usize].input_busy = false;
            // The input is free again: its other VLs' heads may now go to their outputs.
            for v in 0..self.vls {
                let head = self.fifos.head[(input * self.vls + v) as usize];
                if head != NONE {
                    let out = self.packets.items[head as usize].out_port;
                    if out != port && !self.ports[out as usize].transmitting {
                        self.try_send(out);
                    }
                }
            }
        }
        self.try_send(port);
    }

    /// Credits freed at a receiver, arriving back at the sending port `port` at time `at`.
    #[inline]
    fn return_credits(&mut self, port: u32, vl: u8, credits: u32, at: Time) {
        self.returns[port as usize].push_back(CreditReturn { at, vl, credits });
        let next = &mut self.ports[port as usize].next_return_at;
        *next = (*next).min(at);
        if self.ports[port as usize].credit_waiting && !self.ports[port as usize].transmitting {
            self.schedule_wake(port, at);
        }
    }

    #[inline]
    fn apply_returned_credits(&mut self, port: u32) {
        let now = self.now;
        if self.ports[port as usize].next_return_at > now {
            return;
        }
        let returns = &mut self.returns[port as usize];
        while let Some(r) = returns.front() {
            if r.at > now {
                break;
            }
            self.credits[(port * self.vls + r.vl as u32) as usize] += r.credits;
            returns.pop_front();
        }
        self.ports[port as usize].next_return_at = returns.front().map_or(NEVER, |r| r.at);
    }

    /// Arbitrates an idle output port: picks a VL by the VL arbiter, then the oldest request on
    /// that VL whose packet is eligible, whose input is free and which fits the downstream credits.
    fn try_send(&mut self, port: u32) {
        let now = self.now;
        if self.ports[port as usize].transmitting {
            return;
        }
        self.apply_returned_credits(port);
        let base = port * self.vls;
        let mut ready: u16 = 0;
        // Position in its request list of the first sendable request of each VL.
        let mut candidate = [0u16; 16];
        let mut next_eligible = NEVER;
        let mut credit_blocked = false;
        let mut mask = self.ports[port as usize].request_mask;
        while mask != 0 {
            let v = mask.trailing_zeros();
            mask &= mask - 1;
            let idx = (base + v) as usize;
            let available = self.credits[idx];
            let mut stalled = false;
            for (pos, r) in self.requests[idx].iter().enumerate() {
                if r.eligible_at > now {
                    next_eligible = next_eligible.min(r.eligible_at);
                    continue;
                }
                let input = self.queue_input(r.queue);
                if input != NONE && self.ports[input as usize].input_busy {
                    continue;
                }
                if r.credits > available {
                    stalled = true;
                    continue;
                }
                ready |= 1 << v;
                candidate[v as usize] = pos as u16;
                stalled = false;
                break;
            }
            let was_stalled = self.ports[port as usize].stalled_mask & (1 << v) != 0;
            if stalled != was_stalled {
                self.counters[idx].set_stalled(stalled, now, &self.window);
                self.ports[port as usize].stalled_mask ^= 1 << v;
            }
            credit_blocked |= stalled;
        }
        let table = &self.arb_tables[self.ports[port as usize].port_is_switch as usize];
        let grant = if ready != 0 { self.ports[port as usize].arb.select(table, ready) } else { None };
        let Some(grant) = grant else {
            if credit_blocked {
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
        let q = self.requests[idx].remove(candidate[grant.vl as usize] as usize).queue;
        if self.requests[idx].is_empty() {
            self.ports[port as usize].request_mask &= !(1 << grant.vl);
        }
        self.transmit(port, q, grant.vl, grant);
    }

    /// Starts sending the head of queue `q` on `port`, VL `vl`.
    fn transmit(&mut self, port: u32, q: u32, vl: u8, grant: crate::fabric::vl_arbiter::Grant) {
        let now = self.now;
        let id = self.fifos.pop(q, &self.packets.items);
        let pk = self.packets.items[id as usize];
        let idx = (port * self.vls + vl as u32) as usize;
        self.credits[idx] -= pk.credits;
        self.ports[port as usize].arb.charge(grant, pk.wire_bytes);
        let ser = self.rate.serialization(pk.wire_bytes);
        let done = now + ser;
        self.ports[port as usize].transmitting = true;
        self.ports[port as usize].credit_waiting = false;
        self.events.push(done, EventKind::TxEnd, port);
        self.packet_hops += 1;
        let c = &mut self.counters[idx];
        c.busy_ps += self.window.overlap(now, done);
        if self.window.contains(now) {
            c.packets += 1;
            c.bytes += pk.wire_bytes as u64;
        }

        let input = self.queue_input(q);
        self.ports[port as usize].tx_input = input;
        if input != NONE {
            // The packet leaves the input buffer when its tail has left: credits go back then.
            self.ports[input as usize].input_busy = true;
            let upstream = self.topology.graph().port_peer[input as usize];
            let in_vl = (q % self.vls) as u8;
            self.return_credits(upstream, in_vl, pk.credits, done + self.link_latency);
        } else if self.window.contains(now) {
            let m = self.messages.items[pk.message as usize];
            for s in self.flow_classes(&m) {
                s.injected_wire_bytes += pk.wire_bytes as u64;
            }
        }
        if self.fifos.head[q as usize] != NONE {
            self.register_head(q);
        }
        if input == NONE {
            self.on_hca_sent(pk.message);
        }

        let g = self.topology.graph();
        let down = g.port_peer[port as usize];
        if g.is_host(g.port_node[down as usize]) {
            let tail = done + self.link_latency;
            self.deliver(id, tail);
            self.return_credits(port, vl, pk.credits, tail + self.link_latency);
        } else {
            let p = &mut self.packets.items[id as usize];
            p.vl = vl;
            p.eligible_at = now + self.link_latency + self.switch_latency;
            let dq = down * self.vls + vl as u32;
            if self.fifos.push(dq, id, &mut self.packets.items) {
                self.register_head(dq);
            }
        }
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
            if src.mean_gap_ps.is_none() && src.queued < src.saturate_depth {
                self.create_message(s);
            }
        }
    }

    /// The packet's tail reaches its destination HCA at `tail` (possibly after the run ends).
    fn deliver(&mut self, id: u32, tail: Time) {
        let pk = self.packets.items[id as usize];
        self.packets.remove(id);
        self.packets_delivered_total += 1;
        let m = &mut self.messages.items[pk.message as usize];
        m.packets_left -= 1;
        m.last_delivery = m.last_delivery.max(tail);
        let m = *m;
        let in_window = self.window.contains(tail);
        if in_window {
            for s in self.flow_classes(&m) {
                s.delivered_wire_bytes += pk.wire_bytes as u64;
                s.delivered_payload_bytes += pk.payload_bytes as u64;
                s.delivered_packets += 1;
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
                for s in self.flow_classes(&m) {
                    s.latencies.push(latency);
                }
            }
            if done >= self.window.start {
                for s in self.flow_classes(&m) {
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

    /// The statistics classes a message counts in: everything, its SL, its traffic table.
    #[inline]
    fn flow_classes(&mut self, m: &Message) -> [&mut FlowStats; 3] {
        [&mut self.all, &mut self.by_sl[m.sl as usize], &mut self.by_class[m.class as usize]]
    }

    fn close_stalls(&mut self) {
        let now = self.now;
        for c in &mut self.counters {
            c.set_stalled(false, now, &self.window);
        }
    }

    /// Checks that every packet and every credit is accounted for; returns the figures.
    pub fn conservation(&self) -> Result<serde_json::Value, String> {
        let g = self.topology.graph();
        let live = self.packets.live() as u64;
        let mut queued = 0u64;
        let mut queued_credits = vec![0u64; self.credits.len()];
        for q in 0..self.fifos.head.len() as u32 {
            let mut id = self.fifos.head[q as usize];
            while id != NONE {
                queued += 1;
                if self.queue_input(q) != NONE {
                    queued_credits[q as usize] += self.packets.items[id as usize].credits as u64;
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
                    self.returns[p as usize].iter().filter(|r| r.vl as u32 == v).map(|r| r.credits as u64).sum();
                let held = queued_credits[(down * self.vls + v) as usize];
                let total = self.credits[idx] as u64 + returning + held;
                if total != self.buffer_credits as u64 {
                    return Err(format!(
                        "port {p} VL{v}: {} free + {returning} returning + {held} held != {} credits",
                        self.credits[idx], self.buffer_credits
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
    fn send(&mut self, src_host: u32, dst_host: u32, sl: u8, bytes: u64, job: u32, message: u32, notify_injected: bool) {
        let class = (self.tables.len() as u32 + job) as u16;
        self.inject(Message {
            src: src_host,
            dst: dst_host,
            source: NONE,
            mpi: message,
            notify_injected,
            class,
            sl,
            bytes,
            created: self.now,
            last_delivery: 0,
            packets_left: 0,
            packets_unsent: 0,
        });
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
            let mut credits: Vec<u32> = (0..self.vls).map(|v| self.credits[(p * self.vls + v) as usize]).collect();
            for r in self.returns[p as usize].iter().filter(|r| r.at <= self.now) {
                credits[r.vl as usize] += r.credits;
            }
            for v in 0..self.vls {
                for q in self.requests[(p * self.vls + v) as usize].iter().map(|r| r.queue) {
                    let pk = &self.packets.items[self.fifos.head[q as usize] as usize];
                    let input = self.queue_input(q);
                    let input_free = input == NONE || !self.ports[input as usize].input_busy;
                    if pk.eligible_at <= self.now && input_free && pk.credits <= credits[v as usize] {
                        out.push(format!("port {p} VL{v}: packet {}->{} from queue {q} could be sent", pk.src, pk.dst));
                    }
                }
            }
        }
        out
    }
}
