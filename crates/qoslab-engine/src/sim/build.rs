//! Assembly: a run's fabric, routing, state arrays and traffic built from its configuration,
//! every index and size checked here so that the event loop never meets one out of range.

use super::attribution::Attribution;
use super::prechecked::PrecheckedVec;
use super::{mem, RunStatus, Simulation};
use crate::config::{ConfigError, EngineConfig};
use crate::fabric::cc::CongestionControl;
use crate::fabric::credits::{CreditReturns, CreditsDue};
use crate::fabric::hca::{SlSlots, SLS};
use crate::fabric::port::{PortState, PortVl};
use crate::fabric::queue::Queue;
use crate::fabric::sl2vl::{table, Sl2Vl};
use crate::fabric::vl_arbiter::{ArbState, ArbTables};
use crate::ids::{PortId, QueueId, SwitchId};
use crate::mpi::{program::PackedTrace, Mpi};
use crate::queue::{EventQueue, MAX_EVENT_ID};
use crate::routing::Router;
use crate::sim::prefetch::DEEP_PREFETCH_PORTS;
use crate::sim::state::Slab;
use crate::stats::{FlowStats, PortVlCounters, Window};
use crate::topology::{Topology, NONE};
use crate::traffic::{build_sources, stream_rng, RNG_REFUSED, RNG_ROUTING};
use crate::units::{credits_for, ns_to_ps, us_to_ps, Rate, NEVER};
use std::collections::HashMap;

impl Simulation {
    /// Builds a run whose trace-replay jobs take their rank programs from `traces(job index)`.
    pub fn with_traces(cfg: EngineConfig, traces: &HashMap<usize, PackedTrace>) -> Result<Simulation, ConfigError> {
        cfg.validate()?;
        let topology = Topology::build(&cfg.topology)?;
        let router = Router::new(&topology, &cfg.routing, credits_for(cfg.fabric.mtu_bytes + cfg.fabric.header_bytes))?;
        if cfg.routing.flowlet_gap_us > 0.0 && !matches!(router, Router::Dragonfly(_)) {
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
        // Before anything sized by a radix (per-pair SL2VL tables are radix x radix).
        if (0..g.hosts + g.switches).any(|n| g.radix(n) > u16::MAX as u32) {
            return Err(ConfigError::new("topology", "a switch has more ports than 65535"));
        }
        let mut sl2vl = Sl2Vl::new(table(&cfg.qos.ca.sl2vl), table(&cfg.qos.swe.sl2vl));
        for (i, o) in cfg.qos.sl2vl_pairs.iter().enumerate() {
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
        if ports > MAX_EVENT_ID {
            return Err(ConfigError::new("topology", "too many ports for the event encoding"));
        }
        let (sources, tables) = build_sources(&cfg.traffic, g.hosts, cfg.seed, f.mtu_bytes, f.header_bytes, rate)?;
        if sources.len() as u32 > MAX_EVENT_ID {
            return Err(ConfigError::new("traffic", "too many traffic sources"));
        }
        if let Some(cc) = &cfg.congestion_control {
            cc.validate()?;
        }
        // Congestion control adds one CNP send queue per (host, SL) after the send queues.
        let cnp_lanes = cfg.congestion_control.is_some() as u32;
        let sl_slots = SlSlots::new(cfg.sls_in_use());
        check_queue_ids(ports, vls, g.hosts, sl_slots.count(), f.hca_send_queues_per_sl + cnp_lanes)?;
        let np = ports as usize;
        let pv = np * vls as usize;
        let buffer_credits = f.vl_buffer_bytes / crate::units::CREDIT_BYTES;
        let hca_queues = g.hosts as usize * sl_slots.count() as usize * (f.hca_send_queues_per_sl + cnp_lanes) as usize;
        let cc = cfg.congestion_control.as_ref().map(|c| {
            let full = f.mtu_bytes + f.header_bytes;
            let t_max = if port_rates.is_empty() {
                vec![rate.serialization(full)]
            } else {
                (0..g.hosts).map(|h| port_rates[g.host_port(h) as usize].serialization(full)).collect()
            };
            Box::new(CongestionControl::new(
                c,
                buffer_credits,
                g.hosts,
                sl_slots,
                f.hca_send_queues_per_sl,
                ports * vls,
                pv,
                t_max,
                cfg.traffic.len() + cfg.jobs.len(),
            ))
        });
        if cc.as_ref().is_some_and(|c| c.flow_count() > MAX_EVENT_ID as usize) {
            return Err(ConfigError::new(
                "congestion_control",
                "too many CC flows (hosts x SLs x send queues) for the event encoding",
            ));
        }
        let port_states = mem::huge_vec(
            np,
            (0..np).map(|p| {
                let node = g.port_node[p];
                let peer = g.port_peer[p];
                PortState {
                    wake_at: NEVER,
                    credits_due: CreditsDue::NONE,
                    arb: ArbState::default(),
                    tx_queue: QueueId::NONE,
                    peer: PortId(peer),
                    switch: if g.is_host(node) { SwitchId::NONE } else { SwitchId(node - g.hosts) },
                    local: g.local_port(p as u32) as u16,
                    peer_local: if peer == NONE { 0 } else { g.local_port(peer) as u16 },
                    peer_switch: if peer == NONE || g.is_host(g.port_node[peer as usize]) {
                        SwitchId::NONE
                    } else {
                        SwitchId(g.port_node[peer as usize] - g.hosts)
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
            tail_left: Vec::new(),
            connection_lanes: crate::fabric::hca::ConnectionLanes::new(cfg.jobs.len()),
            sl_slots,
            link_latency: ns_to_ps(f.link_latency_ns),
            switch_latency: ns_to_ps(f.switch_latency_ns),
            mtu: f.mtu_bytes,
            header: f.header_bytes,
            buffer_credits,
            ser_by_wire: (0..=f.mtu_bytes + f.header_bytes).map(|wire| rate.serialization(wire)).collect(),
            window,
            ports: PrecheckedVec::new(port_states),
            port_vls: PrecheckedVec::new(mem::huge_vec(
                pv,
                std::iter::repeat_n(
                    PortVl {
                        credits: buffer_credits,
                        requested_credits: 0,
                        first_request: QueueId::NONE,
                        last_request: QueueId::NONE,
                        counters: PortVlCounters::default(),
                        on_wire: 0,
                    },
                    pv,
                ),
            )),
            returns: PrecheckedVec::new(mem::huge_vec(np, std::iter::repeat_with(CreditReturns::default).take(np))),
            queues: PrecheckedVec::new(mem::huge_vec(
                pv + hca_queues,
                (0..pv as u32)
                    .map(|q| Queue::new(PortId(g.port_peer[(q / vls) as usize])))
                    .chain((0..hca_queues).map(|_| Queue::new(PortId::NONE))),
            )),
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
            attribution: cfg.run.interference.then(|| Box::new(Attribution::new(np, vls as usize, classes.max(1)))),
            xmit_wait: cfg.run.port_counters.then(|| Box::new(vec![(NEVER, 0); np])),
            cc_mark_credits: cc.as_ref().map_or(u32::MAX, |c| c.threshold_credits()),
            cc,
            #[cfg(test)]
            fault: None,
            topology,
            cfg,
        };
        Ok(sim)
    }
}

/// Queue ids (the switch inputs' (port, VL) queues, then every host's send queues) are u32s that
/// the hot path computes without checks: all of them must fit below `QueueId::NONE`.
fn check_queue_ids(ports: u32, vls: u32, hosts: u32, sls: u32, lanes: u32) -> Result<(), ConfigError> {
    let queues = ports as u64 * vls as u64 + hosts as u64 * sls as u64 * lanes as u64;
    if queues < QueueId::NONE.0 as u64 {
        return Ok(());
    }
    Err(ConfigError::new(
        "fabric.hca_send_queues_per_sl",
        format!(
            "{ports} ports x {vls} VLs and {hosts} hosts x {sls} SLs in use x {lanes} send queues make {queues} queues, \
             beyond the engine's {} (fewer send queues per SL, VLs or hosts)",
            QueueId::NONE.0 - 1
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::check_queue_ids;

    #[test]
    fn queue_ids_beyond_32_bits_are_refused_before_anything_is_built() {
        // 2^22 hosts x 16 SLs x 64 send queues is 2^32 queues: the count would wrap to 0.
        let e = check_queue_ids(2 << 22, 4, 1 << 22, 16, 64).expect_err("refused");
        assert_eq!(e.key, "fabric.hca_send_queues_per_sl");
        assert!(e.message.contains("send queues"), "{}", e.message);
        assert!(check_queue_ids(2 << 22, 4, 1 << 22, 16, 8).is_ok());
        // Fewer SLs in use leave room for more send queues per SL, not unlimited room.
        assert!(check_queue_ids(2 << 22, 4, 1 << 22, 4, 256).is_err());
        assert!(check_queue_ids(2 << 20, 4, 1 << 20, 2, 256).is_ok());
    }
}
