//! A run: the `Simulation` (the fabric's state as flat arrays indexed by port, queue, packet and
//! message ids) and its event loop. The hardware's behaviour lives in `fabric/`, one piece per
//! file (HCA, switch input, output port, credits, VL arbiter); assembly in `build.rs`, the
//! self-checks in `checks.rs`, cache prefetching in `prefetch.rs`.
//!
//! Timing shortcuts that keep one event per packet-hop (see docs/design/engine.md):
//! - a packet is placed in the downstream FIFO when its transmission *starts*, stamped with the
//!   time its header arrives plus the switch delay (`eligible_at`); nothing may forward it earlier;
//! - credits are pushed onto the sender's return FIFO with their future arrival time and applied
//!   when the sender next arbitrates; a port stalled on credits asks for a wake-up instead;
//! - a delivery to an HCA is recorded when the last hop starts, with its future tail-arrival time,
//!   and counted only if that time falls inside the run.

pub(crate) mod attribution;
mod build;
mod checks;
#[cfg(test)]
mod faults;
pub(crate) mod mem;
pub mod output;
pub(crate) mod prechecked;
pub(crate) mod prefetch;
pub(crate) mod state;

pub use output::RunOutput;

use crate::config::{ConfigError, EngineConfig};
use crate::fabric::credits::CreditReturns;
use crate::fabric::port::{PortState, PortVl};
use crate::fabric::queue::Queue;
use crate::fabric::sl2vl::Sl2Vl;
use crate::fabric::vl_arbiter::ArbTables;
use crate::ids::{HostId, PortId, QueueId};
use crate::mpi::{Mpi, Transport};
use crate::queue::{EventKind, EventQueue};
use crate::routing::Router;
use crate::stats::{FlowStats, Window};
use crate::topology::{Graph, Topology};
use crate::traffic::{Source, TrafficTable};
use crate::units::{Rate, Time, NEVER};
#[cfg(test)]
use faults::Fault;
use prechecked::PrecheckedVec;
use rand_pcg::Pcg64Mcg;
use state::{Message, Packet, Slab};
use std::collections::HashMap;

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
    /// The MPI layer's view (ranks, protocol part, tag); None for open-loop traffic.
    pub mpi: Option<crate::mpi::MessageView>,
}

pub struct Simulation {
    pub(crate) cfg: EngineConfig,
    pub(crate) topology: Topology,
    pub(crate) router: Router,
    pub(crate) sl2vl: Sl2Vl,
    /// Arbitration tables: index 0 for CA ports, 1 for switch external ports.
    pub(crate) arb_tables: [ArbTables; 2],
    pub(crate) vls: u32,
    /// VLs of one routing layer (data_vls / routing.vls): SL2VL's range.
    pub(crate) qos_vls: u32,
    pub(crate) rate: Rate,
    /// Per output port, when link rates differ (an imported fabric); empty when every link runs
    /// at `rate`, so the common case pays nothing.
    pub(crate) port_rates: Vec<Rate>,
    /// Per packet id, when its tail left the last port it crossed (`mixed_rate_tx_end`): kept
    /// only when `port_rates` is set, beside the 32-byte `Packet` rather than in it.
    pub(crate) tail_left: Vec<Time>,
    /// MPI connections' HCA send queue lanes (fabric/hca.rs).
    pub(crate) connection_lanes: crate::fabric::hca::ConnectionLanes,
    /// The SLs the HCAs have send queues for (fabric/hca.rs).
    pub(crate) sl_slots: crate::fabric::hca::SlSlots,
    pub(crate) link_latency: Time,
    pub(crate) switch_latency: Time,
    pub(crate) mtu: u32,
    pub(crate) header: u32,
    pub(crate) buffer_credits: u32,
    /// Serialization time by wire size, 0 to a full (MTU) packet's: a load, not a branch on
    /// whether the packet is full, which mispredicts when sizes mix (congestion control's CNPs).
    pub(crate) ser_by_wire: Vec<Time>,
    pub(crate) window: Window,

    /// The hot per-port scalars, one cache line per port (see `PortState`).
    pub(crate) ports: PrecheckedVec<PortState, PortId>,
    /// Per (port, VL): credits, filed requests, counters; one cache line each.
    pub(crate) port_vls: PrecheckedVec<PortVl>,
    pub(crate) returns: PrecheckedVec<CreditReturns, PortId>,
    pub(crate) queues: PrecheckedVec<Queue, QueueId>,

    pub(crate) packets: Slab<Packet>,
    pub(crate) messages: Slab<Message>,
    pub(crate) sources: Vec<Source>,
    pub(crate) tables: Vec<TrafficTable>,
    pub(crate) routing_rng: Pcg64Mcg,
    /// Draws how many arrivals paused Poisson sources refused.
    pub(crate) refused_rng: Pcg64Mcg,

    pub(crate) events: EventQueue,
    /// Large fabric: prefetch the whole chain of lines upcoming events will touch.
    pub(crate) deep_prefetch: bool,
    pub(crate) now: Time,
    pub(crate) event_count: u64,
    pub(crate) pending_sum: u128,
    /// Dragonfly+ adaptive flowlets: the gap that ends one (0: decisions per packet), and per
    /// flow (source << 32 | destination) the last decision's path and time.
    pub(crate) flowlet_gap: Time,
    pub(crate) flowlets: HashMap<u64, (u16, Time)>,
    pub(crate) packet_hops: u64,
    pub(crate) packets_created: u64,
    pub(crate) packets_delivered_total: u64,
    pub(crate) messages_created: u64,
    pub(crate) messages_completed: u64,

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
    /// InfiniBand congestion control (fabric/cc.rs); None (off) costs one check per hop.
    pub(crate) cc: Option<Box<crate::fabric::cc::CongestionControl>>,
    /// Congestion control's marking threshold (`CongestionControl::threshold_credits`), kept
    /// beside it so that the test before `cc_mark` needs no second load.
    pub(crate) cc_mark_credits: u32,
    /// A fault to inject once this many events have run (tests of the conservation check).
    #[cfg(test)]
    fault: Option<(u64, Fault)>,
}

impl Simulation {
    pub fn new(cfg: EngineConfig) -> Result<Simulation, ConfigError> {
        Simulation::with_traces(cfg, &HashMap::new())
    }

    pub fn graph(&self) -> &Graph {
        self.topology.graph()
    }

    pub fn describe(&self) -> serde_json::Value {
        let mut v = self.topology.describe();
        // What the HCAs were built with: send queues for the SLs in use only (fabric/hca.rs).
        let slots = self.sl_slots;
        v["hca_send_queues"] = serde_json::json!({
            "sls": (0..slots.count()).map(|slot| slots.sl(slot)).collect::<Vec<u8>>(),
            "per_sl": self.cfg.fabric.hca_send_queues_per_sl,
        });
        v
    }

    /// Runs to the configured duration, or until `should_stop` says so (checked every few
    /// thousand events). Returns whether the run was interrupted.
    pub fn run(&mut self, should_stop: &mut dyn FnMut() -> bool) -> bool {
        self.run_reporting(&mut |_| should_stop())
    }

    /// `run`, telling `should_stop` where the run stands each time it is polled (every
    /// `STOP_CHECK_EVENTS` events): a progress display costs nothing between polls.
    // Out of line so that instruction counters (`benchmarks/run.py --instructions`) can find it:
    // every run, with or without a progress display, goes through here.
    #[inline(never)]
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
                EventKind::TxEnd => self.on_tx_end(PortId(id)),
                EventKind::Wake => self.on_wake(PortId(id)),
                EventKind::Source => self.on_source(id),
                EventKind::RankResume => self.with_mpi(|mpi, sim| mpi.on_resume(id, sim.now, sim)),
                EventKind::MpiArrival => self.with_mpi(|mpi, sim| mpi.on_arrival(id, sim.now, sim)),
                EventKind::CcBecn => self.on_cc_becn(id),
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
        if self.cc.is_some() {
            // Congestion control's timer ticks are applied where the CCTI is read; here, those the
            // run reached: every tick before `end` (the events ran out or reached it), unless the
            // run stopped at its last event (jobs done, interrupted, deadlock).
            let stopped = interrupted || deadlock.is_some() || self.mpi_finished();
            let cut = if stopped { self.now } else { end.saturating_sub(1) };
            self.cc.as_deref_mut().expect("congestion control on").finish(cut);
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
    pub(crate) fn with_mpi(&mut self, f: impl FnOnce(&mut Mpi, &mut Simulation)) {
        if let Some(mut mpi) = self.mpi.take() {
            f(&mut mpi, self);
            self.mpi = Some(mpi);
        }
    }

    pub fn status(&self) -> &RunStatus {
        &self.status
    }

    /// Input port a queue belongs to (NONE for HCA send queues, which have no crossbar input).
    #[inline]
    pub(crate) fn queue_input(&self, q: QueueId) -> PortId {
        let switch_queues = self.ports.len() as u32 * self.vls;
        if q.0 < switch_queues {
            PortId(q.0 / self.vls)
        } else {
            PortId::NONE
        }
    }

    #[inline]
    pub(crate) fn port_vl(&self, port: PortId, vl: u8) -> usize {
        (port.0 * self.vls + vl as u32) as usize
    }

    /// The statistics classes a message counts in: everything, its SL, its traffic table or job.
    #[inline]
    pub(crate) fn flow_classes(&mut self, sl: u8, class: u16) -> [&mut FlowStats; 3] {
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
        if let Some(a) = self.attribution.as_deref() {
            // Ports still blocked at the end: their wait so far is charged too.
            for port in a.blocked_ports().collect::<Vec<_>>() {
                self.charge_waits(port, now, true, None);
            }
        }
        for pv in self.port_vls.iter_mut() {
            pv.counters.set_stalled(false, now, &self.window);
        }
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
        ranks: (u32, u32),
        sl: u8,
        bytes: u64,
        job: u32,
        message: u32,
        notify_injected: bool,
    ) {
        let class = (self.tables.len() as u32 + job) as u16;
        let (lane, shared) = self.connection_lane(HostId(src_host), sl, ranks.0, ranks.1);
        if shared {
            self.connection_lanes.count_shared(job);
        }
        let m = Message::new(HostId(src_host), HostId(dst_host), sl, bytes, class, self.now);
        self.inject(Message { mpi: message, notify_injected, lane, ..m });
    }

    fn schedule_arrival(&mut self, at: Time, message: u32) {
        self.events.push(at, EventKind::MpiArrival, message);
    }

    fn schedule_resume(&mut self, at: Time, rank: u32) {
        self.events.push(at, EventKind::RankResume, rank);
    }
}
