//! The host channel adapter: open-loop sources and MPI sends become messages, cut into MTU
//! packets on per-SL send queues (lanes standing for queue pairs, one per connection while there
//! are enough); a sent packet refills its source; delivery at the destination completes messages
//! and records their latency.

use std::collections::HashMap;

use crate::ids::{HostId, QueueId};
use crate::queue::EventKind;
use crate::routing::dragonfly::NO_VIA;
use crate::sim::state::{Message, Packet};
use crate::sim::{MessageRecord, Simulation};
use crate::topology::NONE;
use crate::units::{Time, NEVER};

/// Service levels InfiniBand has.
pub(crate) const SLS: u32 = 16;

/// The SLs an HCA has send queues for: the ones a message of the run can carry
/// (`EngineConfig::sls_in_use`), each at its place among them. Until 2026-11-27 (model version .13) every host had
/// queues (and CC flows) for all 16 SLs, so a run on two SLs paid eight times the memory for
/// them, which held the send queues per SL to 64.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SlSlots {
    slot: [u8; SLS as usize],
    sl: [u8; SLS as usize],
    count: u32,
}

impl SlSlots {
    const UNUSED: u8 = u8::MAX;

    /// The SLs whose bits are set in `mask`.
    pub(crate) fn new(mask: u16) -> SlSlots {
        let mut slots = SlSlots { slot: [Self::UNUSED; SLS as usize], sl: [0; SLS as usize], count: 0 };
        for sl in (0..SLS as u8).filter(|&sl| mask & 1 << sl != 0) {
            slots.slot[sl as usize] = slots.count as u8;
            slots.sl[slots.count as usize] = sl;
            slots.count += 1;
        }
        slots
    }

    /// `sl`'s place among the SLs in use. Every SL a message can carry is in use by
    /// construction; the check stays in release builds because the place indexes queues whose
    /// ids are not checked again (sim/prechecked.rs). Once a message, never a hop.
    #[inline]
    pub(crate) fn slot(&self, sl: u8) -> u32 {
        let slot = self.slot[sl as usize & (SLS as usize - 1)];
        assert!(slot != Self::UNUSED && sl < SLS as u8, "SL{sl} is not among the run's SLs");
        slot as u32
    }

    /// Whether messages of the run can carry `sl`.
    pub(crate) fn in_use(&self, sl: u8) -> bool {
        sl < SLS as u8 && self.slot[sl as usize] != Self::UNUSED
    }

    /// The SL at place `slot`.
    pub(crate) fn sl(&self, slot: u32) -> u8 {
        self.sl[slot as usize]
    }

    /// How many SLs are in use.
    pub(crate) fn count(&self) -> u32 {
        self.count
    }
}

impl Simulation {
    pub(crate) fn start_sources(&mut self) {
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

    pub(crate) fn on_source(&mut self, s: u32) {
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
    pub(crate) fn create_message(&mut self, s: u32) {
        let src = &mut self.sources[s as usize];
        let dst = src.next_destination(&self.tables[src.traffic as usize]);
        src.queued += 1;
        let (host, sl, bytes, class) = (src.host, src.sl, src.message_bytes, src.traffic);
        let lane = self.open_loop_lane(HostId(dst));
        self.inject(Message { source: s, lane, ..Message::new(HostId(host), HostId(dst), sl, bytes, class, self.now) });
    }

    /// Cuts a message into MTU packets (at least one: a zero-byte message is a bare header) and
    /// appends them to the sender's HCA send queue for its SL.
    #[inline(always)]
    pub(crate) fn inject(&mut self, mut m: Message) {
        let now = self.now;
        let (host, dst, sl, bytes, m_class) = (m.src, m.dst, m.sl, m.bytes, m.class);
        let packets = bytes.div_ceil(self.mtu as u64).max(1) as u32;
        m.packets_left = packets;
        m.packets_unsent = packets;
        let q = self.hca_queue(host, sl, m.lane);
        if let Some(cc) = self.cc.as_deref() {
            // Read below if the message's first packet becomes the queue's head.
            cc.prefetch_flow(q);
        }
        let message = self.messages.insert(m);
        self.messages_created += 1;
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
            if self.queues[q].push(id, &mut self.packets.items) {
                if self.cc.is_some() {
                    self.cc_new_hca_head(q, id);
                }
                self.register_head(q, None, None);
            }
        }
    }

    /// The HCA send queue of `host`'s `sl` whose lane is `lane`. An HCA serves its queue pairs
    /// round robin, packet by packet, so a short message on one connection does not wait behind a
    /// long one on another; the `hca_send_queues_per_sl` lanes of an SL stand for the QPs.
    #[inline]
    pub(crate) fn hca_queue(&self, host: HostId, sl: u8, lane: u8) -> QueueId {
        let lanes = self.cfg.fabric.hca_send_queues_per_sl;
        let host_sl = host.0 * self.sl_slots.count() + self.sl_slots.slot(sl);
        QueueId((self.ports.len() as u32) * self.vls + host_sl * lanes + lane as u32)
    }

    /// An open-loop source's lane for a message to `dst`. A source is one process per host, so a
    /// destination host is a connection: lane `dst mod n`, connections sharing a lane when more
    /// destinations than lanes are in use.
    #[inline]
    pub(crate) fn open_loop_lane(&self, dst: HostId) -> u8 {
        (dst.0 % self.cfg.fabric.hca_send_queues_per_sl) as u8
    }

    /// The lane of MPI rank `from`'s connection to rank `to` on `sl` (`from` runs on `host`)
    /// for a new message. Each process has a QP of its own per peer (RC: a rank pair is a
    /// connection), and the HCA serves them round robin. A connection with messages still in its
    /// send queue keeps that lane, so its messages stay in order (a QP is). Otherwise it takes
    /// the lane it used last if that is empty and no other connection has used it since; else,
    /// from the next lane in turn, the first empty one that holds no congestion control throttle
    /// (so a cold connection does not inherit a hot one's CCTI), else the first empty one; when
    /// every lane is busy it shares the next in turn. Only connections with queued messages and
    /// each lane's last user are remembered, so memory follows what is queued, not the N^2 pairs
    /// an all-to-all opens over a run. Until 2026-11-27 (model version .12) a message took lane
    /// `destination host mod n`, so all the ranks of a host sending to one other host shared one
    /// FIFO and were served message after message.
    ///
    /// Also returns whether the lane holds another connection's messages as well (a send queue
    /// shared for want of lanes), which the run counts per job.
    pub(crate) fn connection_lane(&mut self, host: HostId, sl: u8, from: u32, to: u32) -> (u8, bool) {
        let key = (from, to, sl);
        let connection_lanes = &mut self.connection_lanes;
        if let Some(c) = connection_lanes.active.get_mut(&key) {
            c.queued += 1;
            return (c.lane, connection_lanes.host_sl_lanes[c.host_sl_lanes as usize].users[c.lane as usize] > 1);
        }
        let host_sl = host.0 * SLS + sl as u32;
        let lanes = self.cfg.fabric.hca_send_queues_per_sl;
        let user = (from as u64) << 32 | to as u64;
        let base = self.hca_queue(host, sl, 0).0;
        let (queues, cc, now) = (&self.queues, self.cc.as_deref(), self.now);
        // An active connection's lane holds its packets, so an empty lane has none bound to it.
        let empty = |l: u8| queues[QueueId(base + l as u32)].head == NONE;
        let unthrottled = |l: u8| cc.is_none_or(|c| c.lane_unthrottled(QueueId(base + l as u32), now));
        let connection_lanes = &mut self.connection_lanes;
        let all = &mut connection_lanes.host_sl_lanes;
        let index = *connection_lanes.by_host_sl.entry(host_sl).or_insert_with(|| {
            all.push(HostSlLanes::new(lanes as usize));
            all.len() as u32 - 1
        });
        let entry = &mut all[index as usize];
        let first = entry.next as u32;
        let lane = match entry.lane_of.get(&user).copied().filter(|&l| empty(l)) {
            Some(l) => l,
            None => {
                let in_turn = || (0..lanes).map(|k| ((first + k) % lanes) as u8);
                let l = in_turn()
                    .find(|&l| empty(l) && unthrottled(l))
                    .or_else(|| in_turn().find(|&l| empty(l)))
                    .unwrap_or(first as u8);
                entry.next = ((l as u32 + 1) % lanes) as u8;
                l
            }
        };
        // A connection is the last user of one lane at most: the one it takes now.
        if let Some(old) = entry.lane_of.insert(user, lane).filter(|&old| old != lane) {
            entry.last_user[old as usize] = u64::MAX;
        }
        let previous = std::mem::replace(&mut entry.last_user[lane as usize], user);
        if previous != u64::MAX && previous != user {
            entry.lane_of.remove(&previous);
        }
        entry.users[lane as usize] += 1;
        let shared = entry.users[lane as usize] > 1;
        connection_lanes.active.insert(key, ActiveConnection { lane, queued: 1, host_sl_lanes: index });
        (lane, shared)
    }

    /// A message of connection `from` -> `to` on `sl` has left its send queue.
    pub(crate) fn release_connection_lane(&mut self, from: u32, to: u32, sl: u8) {
        let key = (from, to, sl);
        let lanes = &mut self.connection_lanes;
        let Some(c) = lanes.active.get_mut(&key) else {
            debug_assert!(false, "a message left the queue of a connection with none queued");
            return;
        };
        c.queued -= 1;
        if c.queued == 0 {
            let (lane, index) = (c.lane, c.host_sl_lanes);
            lanes.active.remove(&key);
            lanes.host_sl_lanes[index as usize].users[lane as usize] -= 1;
        }
    }

    /// An HCA started sending one more packet of `message`; after its last, a saturating source refills, an
    /// eager MPI send completes.
    pub(crate) fn on_hca_sent(&mut self, message: u32) {
        let m = &mut self.messages.items[message as usize];
        m.packets_unsent -= 1;
        if m.packets_unsent == 0 && m.mpi != NONE {
            let (id, sl, notify) = (m.mpi, m.sl, m.notify_injected);
            self.on_mpi_message_sent(id, sl, notify);
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

    /// MPI message `id` on `sl` has left its send queue: its connection's lane is released, and an
    /// eager send completes if `notify`. Out of line: inlined into the transmission, the hash
    /// lookups cost every hop's arbitration about 1% of its instructions (layout, not work).
    #[inline(never)]
    fn on_mpi_message_sent(&mut self, id: u32, sl: u8, notify: bool) {
        let (from, to) = self.mpi.as_deref().expect("an MPI message without MPI").message_ranks(id);
        self.release_connection_lane(from, to, sl);
        if notify {
            self.with_mpi(|mpi, sim| mpi.on_injected(id, sim.now, sim));
        }
    }

    /// The packet's tail reaches its destination HCA at `tail` (possibly after the run ends).
    pub(crate) fn deliver(&mut self, id: u32, tail: Time) {
        // Congestion control (fabric/cc.rs): a FECN gets a CNP back; a CNP is consumed there.
        if self.cc.is_some() && self.cc_deliver(id, tail) {
            return;
        }
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
            if self.cfg.run.messages {
                // The MPI message is still in flight: its arrival is handled at `done`.
                let mpi = self.mpi.as_deref().filter(|_| m.mpi != NONE).map(|mpi| mpi.message_view(m.mpi));
                self.message_log.push(MessageRecord {
                    src: m.src.0,
                    dst: m.dst.0,
                    sl: m.sl,
                    class: m.class,
                    bytes: m.bytes,
                    created: m.created,
                    delivered: done,
                    mpi,
                });
            }
        }
    }
}

/// MPI connections' lanes (`Simulation::connection_lane`): per (from rank, to rank, SL) with
/// messages in its send queue, its lane and how many; per (host, SL) that sends MPI messages,
/// its lanes' state. Empty without MPI jobs.
#[derive(Debug, Default)]
pub(crate) struct ConnectionLanes {
    active: HashMap<(u32, u32, u8), ActiveConnection>,
    /// Per (host, SL) key (`host * 16 + SL`) that has sent an MPI message, its place in
    /// `host_sl_lanes`; an active connection keeps that place, so its messages index the lanes
    /// directly instead of hashing the key again.
    by_host_sl: HashMap<u32, u32>,
    host_sl_lanes: Vec<HostSlLanes>,
    /// Per job, messages that joined a send queue holding another connection's messages too.
    shared_by_job: Vec<u64>,
}

impl ConnectionLanes {
    /// No connection yet, for a run of `jobs` jobs.
    pub(crate) fn new(jobs: usize) -> ConnectionLanes {
        ConnectionLanes { shared_by_job: vec![0; jobs], ..ConnectionLanes::default() }
    }

    /// Counts a message of `job` that joined a shared send queue.
    pub(crate) fn count_shared(&mut self, job: u32) {
        self.shared_by_job[job as usize] += 1;
    }

    /// Messages of `job` that joined a send queue holding another connection's messages too.
    pub(crate) fn shared_messages(&self, job: u32) -> u64 {
        self.shared_by_job[job as usize]
    }
}

/// A connection with messages in its send queue: its lane, how many, and its (host, SL)'s place
/// in `ConnectionLanes::host_sl_lanes`.
#[derive(Debug)]
struct ActiveConnection {
    lane: u8,
    queued: u32,
    host_sl_lanes: u32,
}

/// The lanes of one host's SL: the next in turn, each lane's last connection (from rank in the
/// high 32 bits, to rank in the low; u64::MAX for none yet) and, the other way, each such
/// connection's lane (so that finding it does not scan up to 256 lanes), and how many
/// connections with messages queued each lane holds (more than one: a send queue shared for
/// want of lanes).
#[derive(Debug)]
struct HostSlLanes {
    next: u8,
    last_user: Vec<u64>,
    lane_of: HashMap<u64, u8>,
    users: Vec<u32>,
}

impl HostSlLanes {
    fn new(lanes: usize) -> HostSlLanes {
        HostSlLanes { next: 0, last_user: vec![u64::MAX; lanes], lane_of: HashMap::new(), users: vec![0; lanes] }
    }
}

#[cfg(test)]
mod tests {
    use super::SlSlots;
    use crate::{EngineConfig, Simulation};
    use serde_json::json;

    /// 4 hosts x 4 ranks, two pairwise all-to-alls of 64 KiB: 192 connections over 8 lanes.
    fn alltoall() -> Simulation {
        Simulation::new(EngineConfig::from_json(&config(8).to_string()).unwrap()).unwrap()
    }

    fn config(lanes: u32) -> serde_json::Value {
        let sl2vl: Vec<u8> = (0..16).map(|s| s % 4).collect();
        let port = json!({"sl2vl": sl2vl, "vlarb_high": [], "vlarb_low": [[0, 255]], "high_limit": 0});
        let job = json!({"name": "a", "hosts": [0, 1, 2, 3], "ranks_per_node": 4, "sl": 0, "restart": false,
            "collectives": {"allreduce": "ring", "alltoall": "pairwise"},
            "workload": {"kind": "all-to-all", "bytes": 65536, "iterations": 2, "compute_us": 0.0}});
        json!({
            "seed": 1,
            "fabric": {"link_gbps": 100.0, "link_latency_ns": 20.0, "switch_latency_ns": 100.0, "mtu_bytes": 4096,
                       "header_bytes": 26, "data_vls": 4, "vl_buffer_bytes": 32768, "hca_send_queues_per_sl": lanes},
            "topology": {"kind": "single-switch", "hosts": 4},
            "routing": {"algorithm": "dmodk"},
            "qos": {"ca": port, "swe": port},
            "traffic": [],
            "run": {"duration_us": 1000000.0, "warmup_us": 0.0, "messages": false},
            "jobs": [job],
            "mpi": {"eager_threshold_bytes": 16384, "control_bytes": 64, "shm_latency_ns": 300.0, "shm_gbps": 160.0},
        })
    }

    #[test]
    fn a_new_connection_passes_over_an_empty_lane_that_is_throttled() {
        // QP-based congestion control keeps a CCTI per lane: a connection that takes a lane a hot
        // connection left would inherit its throttle, so it takes another empty lane if one holds
        // none; the hot connection itself goes back to its own lane.
        let mut v = config(2);
        let sl =
            json!({"enabled": true, "ccti_timer": 1000, "ccti_increase": 1, "ccti_min": 0, "trigger_threshold": 0});
        v["congestion_control"] = json!({"threshold": 12, "packet_size_credits": 0, "marking_rate": 0,
            "victim_ports": [], "sl_based": false, "sls": vec![sl; 16], "cct": [[0, 0], [0, 8], [0, 64]], "trace": false});
        let mut sim = Simulation::new(EngineConfig::from_json(&v.to_string()).unwrap()).unwrap();
        let host = crate::ids::HostId(0);
        let open = |sim: &mut Simulation, to: u32| {
            let (lane, shared) = sim.connection_lane(host, 0, 0, to);
            assert!(!shared);
            sim.release_connection_lane(0, to, 0);
            lane
        };
        assert_eq!(open(&mut sim, 4), 0, "the hot connection takes lane 0");
        assert_eq!(open(&mut sim, 8), 1, "the next connection the next lane");
        let cc = sim.cc.as_deref_mut().unwrap();
        let hot = cc.flow(0, 0, 0) as usize;
        cc.flows[hot].ccti = 2; // a BECN or two: lane 0's flow is throttled, its timer far off
        cc.flows[hot].next_tick = 1_000_000_000;
        assert_eq!(open(&mut sim, 12), 1, "lane 0 is next in turn and empty, but throttled");
        assert_eq!(open(&mut sim, 4), 0, "the hot connection goes back to its own lane");
    }

    #[test]
    fn connections_are_forgotten_when_their_queues_empty() {
        // Memory follows what is queued: after the run no connection is remembered, and each
        // host keeps only its SL's lanes, not the pairs its ranks opened.
        let mut sim = alltoall();
        sim.run(&mut || false);
        assert_eq!(*sim.status(), crate::sim::RunStatus::Completed);
        let lanes = &sim.connection_lanes;
        assert!(lanes.active.is_empty(), "{} connections left", lanes.active.len());
        assert!(lanes.host_sl_lanes.iter().all(|h| h.users.iter().all(|&u| u == 0)), "a lane still has users");
        assert_eq!(lanes.by_host_sl.len(), 4);
        assert_eq!(lanes.host_sl_lanes.len(), 4);
        // Every lane of every host was used: 12 remote peers per rank, 48 connections a host.
        assert!(lanes.host_sl_lanes.iter().all(|h| h.last_user.iter().all(|&u| u != u64::MAX)));
        // And each lane's last connection maps back to that lane, and only those.
        for h in &lanes.host_sl_lanes {
            assert_eq!(h.lane_of.len(), h.last_user.len());
            assert!(h.last_user.iter().enumerate().all(|(l, u)| h.lane_of[u] as usize == l));
        }
    }

    #[test]
    fn a_lane_is_shared_only_while_two_connections_have_messages_on_it() {
        let mut sim = Simulation::new(EngineConfig::from_json(&config(2).to_string()).unwrap()).unwrap();
        let host = crate::ids::HostId(0);
        // Two lanes, three connections with messages queued (nothing is sent: the run has not
        // started, so the lanes' emptiness is what the connections hold).
        let a = sim.connection_lane(host, 0, 0, 4);
        let b = sim.connection_lane(host, 0, 0, 8);
        assert_eq!((a, b), ((0, false), (1, false)));
        let queue = |sim: &Simulation, lane: u8| sim.hca_queue(host, 0, lane);
        // Bind packets to the lanes the way `inject` would, so that they are not empty.
        for lane in [0, 1] {
            let q = queue(&sim, lane);
            sim.queues[q].head = 0;
        }
        assert_eq!(sim.connection_lane(host, 0, 0, 12), (0, true), "no empty lane: shares the next in turn");
        assert_eq!(sim.connection_lane(host, 0, 0, 4), (0, true), "lane 0's first connection now shares it");
        assert_eq!(sim.connection_lane(host, 0, 0, 8), (1, false), "lane 1 is still its own");
        sim.release_connection_lane(0, 12, 0);
        assert_eq!(sim.connection_lane(host, 0, 0, 4), (0, false), "alone again once the other's message left");
    }

    #[test]
    fn send_queues_are_built_for_the_sls_messages_can_carry_only() {
        // The job's SL 0, its policy's SL 5 and a traffic table's SL 12: three SLs of 16.
        let mut v = config(8);
        v["jobs"][0]["sl_policy"] = json!({"kind": "ranks", "ranks": [1], "sl": 5, "match": "source"});
        v["traffic"] = json!([{"pattern": "uniform", "hosts": [0], "destinations": [1, 2], "load": 0.1,
            "message_bytes": 4096, "sl": 12, "arrival": "poisson", "shift": 0, "hotspot_hosts": [],
            "hotspot_fraction": 0.0, "saturate_depth": 1, "max_queued_messages": 4}]);
        let cfg = EngineConfig::from_json(&v.to_string()).unwrap();
        assert_eq!(cfg.sls_in_use(), 1 << 0 | 1 << 5 | 1 << 12);
        let slots = SlSlots::new(cfg.sls_in_use());
        assert_eq!((slots.count(), slots.slot(0), slots.slot(5), slots.slot(12)), (3, 0, 1, 2));
        assert_eq!((slots.sl(0), slots.sl(1), slots.sl(2)), (0, 5, 12));
        assert!(!slots.in_use(1) && !slots.in_use(16));
        let sim = Simulation::new(cfg).unwrap();
        let switch_queues = sim.ports.len() * sim.vls as usize;
        assert_eq!(sim.queues.len() - switch_queues, 4 * 3 * 8, "4 hosts x 3 SLs x 8 send queues");
        assert_eq!(sim.hca_queue(crate::ids::HostId(3), 12, 7).0 as usize, sim.queues.len() - 1);
    }

    #[test]
    #[should_panic(expected = "SL1 is not among the run's SLs")]
    fn a_message_on_an_sl_without_send_queues_stops_the_run() {
        SlSlots::new(1).slot(1);
    }
}
