//! InfiniBand congestion control (IBA Annex A10; docs/design/congestion-control.md section 4):
//! switches mark FECN on packets leaving a congested output VL, the destination HCA answers each
//! marked packet with a CNP (a header-only packet, the BECN) on the same SL, and the source raises
//! its flow's CCTI, which spaces that flow's packets by the CCT entry's injection delay; a timer
//! lowers the CCTI again.
//!
//! Everything here is reached through `Simulation::cc` (None when the config has no
//! `congestion_control`): the hot path pays one check per transmission and per delivery, and
//! one per message head filed at an HCA. The hooks are `cc_mark` (marking at switch ports),
//! `cc_hca_sent` (throttling at HCAs), `cc_deliver` (FECN -> CNP, CNP -> BECN), `cc_new_hca_head` and the two
//! event handlers.

use crate::config_cc::{CongestionControlConfig, CC_SLS};
use crate::fabric::hca::SlSlots;
use crate::ids::{HostId, PortId, QueueId};
use crate::queue::EventKind;
use crate::routing::dragonfly::NO_VIA;
use crate::sim::state::Packet;
use crate::sim::Simulation;
use crate::topology::NONE;
use crate::units::{Time, NEVER};
use std::collections::HashMap;

/// `Packet::phase` bit: the packet carries a FECN (Dragonfly+ uses 0x01 and `PATH_DECIDED` 0x80).
pub(crate) const FECN: u8 = 0x40;
/// `Packet::phase` bit: the packet is a CNP (a BECN to its destination).
pub(crate) const CNP: u8 = 0x20;
/// The phase bits congestion control owns; routing must neither read nor clear them.
pub(crate) const CC_PHASE_BITS: u8 = FECN | CNP;

/// 1.024 µs, the A10 time unit (CCTI_Timer), in picoseconds.
pub const CC_TIME_UNIT_PS: Time = 1_024_000;

/// One flow's congestion state: per HCA send queue ("QP"), or per (host, SL) when SL-based.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CcFlow {
    /// The CCTI as of the ticks applied so far (`CongestionControl::advance`).
    pub(crate) ccti: u16,
    /// The time of the timer's next tick not applied yet (NEVER: the timer is not running). Ticks
    /// fall every `ccti_timer` from the timer's start; they are applied where the CCTI is read,
    /// not by events.
    pub(crate) next_tick: Time,
    /// The flow's next packet may start no earlier (end of the last one plus its IRD).
    pub(crate) next_send_at: Time,
    /// End of the flow's last packet: where its current gap began (`cc_throttle_ps`).
    pub(crate) gap_from: Time,
    /// The flow's SL (a byte in the struct's padding, so that finding its parameters divides
    /// nothing).
    pub(crate) sl: u8,
}

// Two flows a 64-byte line, as before the SL byte.
const _: () = assert!(std::mem::size_of::<CcFlow>() == 32);

/// A CA setting of one SL, resolved.
#[derive(Debug, Clone, Copy, Default)]
struct CcSl {
    enabled: bool,
    timer_ps: Time,
    increase: u16,
    min: u16,
    trigger: u16,
}

impl CcSl {
    /// Timer ticks of flow `f` due by `now` and not applied yet (the timer runs every
    /// `timer_ps` from `f.next_tick`).
    fn ticks_due(&self, f: &CcFlow, now: Time) -> u64 {
        if f.next_tick <= now {
            (now - f.next_tick) / self.timer_ps + 1
        } else {
            0
        }
    }
}

/// Whole-run counters (not clipped to the measurement window).
#[derive(Debug, Clone, Copy, Default)]
pub struct CcStats {
    pub cnp_packets: u64,
    /// Wire bytes of the CNPs the destination HCAs sent (each CNP once, as injected data counts).
    pub cnp_wire_bytes: u64,
    pub marks_root: u64,
    pub marks_victim: u64,
    pub max_ccti: u16,
    pub trigger_events: u64,
}

/// Whole-run counters of one statistics class (a traffic table or a job), under the names the
/// summary gives them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CcClassStats {
    /// The class's packets a switch marked with a FECN.
    pub fecn_marked_packets: u64,
    /// CNPs (BECNs) for the class's marked packets that reached the class's sources.
    pub becn_received: u64,
    /// Send-queue time the class's packets were held back by the inter-packet delay: for each
    /// head CC held, from when it could otherwise have started (its own eligibility, or the end of
    /// its flow's previous packet, whichever is later) to the end of the gap. Summed over send
    /// queues: an SL-based flow's gap holds the head of each of its lanes.
    pub cc_throttle_ps: u64,
}

/// One CCTI change (`congestion_control.trace`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CctiChange {
    pub time: Time,
    pub host: u32,
    pub sl: u8,
    /// The send queue lane ("QP"); 0 when SL-based.
    pub lane: u32,
    pub ccti: u16,
}

/// One BECN: when the switch marked the packet (its grant) and when the source's CCTI rose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BecnDelay {
    pub marked_at: Time,
    pub increased_at: Time,
    pub host: u32,
    pub sl: u8,
    /// Its mark, an index into `CcTrace::marks`.
    pub mark: u32,
}

/// One FECN mark at a switch output port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    pub time: Time,
    pub port: u32,
    pub vl: u8,
    pub sl: u8,
    pub src: u32,
    pub dst: u32,
    pub credits: u32,
    pub victim: bool,
}

/// What `congestion_control.trace = true` records.
#[derive(Debug, Clone, Default)]
pub struct CcTrace {
    pub ccti: Vec<CctiChange>,
    pub becn: Vec<BecnDelay>,
    pub marks: Vec<Mark>,
    /// Marking-eligible packets that left a congested output VL (marked or not).
    pub eligible_in_congestion: u64,
    /// The mark (index into `marks`) of marked packets and CNPs in flight, by packet id.
    marked_at: HashMap<u32, u32>,
    /// Per row of `ccti`: its place among the rows of the same time (see `CongestionControl::finish`).
    ccti_order: Vec<u64>,
    /// BECNs handled so far (all flows), and per flow the count when its timer last started.
    becns: u64,
    anchors: Vec<u64>,
}

pub(crate) struct CongestionControl {
    /// Credits still requested at an output VL after a grant from which it is congested
    /// (u32::MAX: threshold 0, never).
    threshold_credits: u32,
    packet_size_credits: u32,
    marking_rate: u16,
    victim_ports: [u64; 4],
    sl_based: bool,
    sls: [CcSl; CC_SLS],
    /// (shift, multiplier) per CCT index.
    cct: Vec<(u32, u64)>,
    limit: u16,
    /// The SLs the HCAs have send queues (and so flows) for.
    sl_slots: SlSlots,
    lanes: u32,
    /// First HCA send queue id, and first CNP queue id (one per host and SL after the send queues).
    hca_base: u32,
    cnp_base: u32,
    /// Serialization of an MTU packet at each host's port (one entry when every link has one rate).
    t_max: Vec<Time>,
    pub(crate) flows: Vec<CcFlow>,
    /// Per (port, VL): marking-eligible packets in congestion since the last mark.
    mark_counters: Vec<u16>,
    pub(crate) stats: CcStats,
    /// Per statistics class (traffic tables, then jobs, as `Simulation::by_class`).
    pub(crate) by_class: Vec<CcClassStats>,
    pub(crate) trace: Option<Box<CcTrace>>,
    /// By CNP packet id, the flow its BECN throttles: the marked packet's (source host, SL,
    /// lane), read from its message when the CNP is made (the message may be gone when the CNP
    /// arrives, and the lane is not a function of the hosts for MPI connections).
    cnp_flows: Vec<u32>,
}

impl CongestionControl {
    /// Adds statistics class `class`'s CC counters to its summary entry (called only with CC on,
    /// so that runs without CC keep their summaries exactly).
    pub(crate) fn class_summary(&self, class: usize, entry: &mut serde_json::Value) {
        let c = self.by_class[class];
        entry["fecn_marked_packets"] = serde_json::json!(c.fecn_marked_packets);
        entry["becn_received"] = serde_json::json!(c.becn_received);
        entry["cc_throttle_ps"] = serde_json::json!(c.cc_throttle_ps);
    }

    /// `t_max`: an MTU packet's serialization per host port (or one value for all).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        cfg: &CongestionControlConfig,
        buffer_credits: u32,
        hosts: u32,
        sl_slots: SlSlots,
        lanes: u32,
        hca_base: u32,
        port_vls: usize,
        t_max: Vec<Time>,
        classes: usize,
    ) -> CongestionControl {
        let t = cfg.threshold as u32;
        let threshold_credits = if t == 0 { u32::MAX } else { ((16 - t) * buffer_credits).div_ceil(16) };
        let mut victim_ports = [0u64; 4];
        for &p in &cfg.victim_ports {
            victim_ports[(p / 64) as usize] |= 1 << (p % 64);
        }
        let mut sls = [CcSl::default(); CC_SLS];
        for (s, c) in sls.iter_mut().zip(&cfg.sls) {
            *s = CcSl {
                enabled: c.enabled,
                timer_ps: c.ccti_timer as Time * CC_TIME_UNIT_PS,
                increase: c.ccti_increase as u16,
                min: c.ccti_min as u16,
                trigger: c.trigger_threshold as u16,
            };
        }
        let per_host = if cfg.sl_based { 1 } else { lanes };
        let flow_count = hosts as usize * sl_slots.count() as usize * per_host as usize;
        // Big fabrics' flows span megabytes, touched one line a transmission: on huge pages.
        let flows = crate::sim::mem::huge_vec(
            flow_count,
            (0..flow_count).map(|f| {
                let sl = sl_slots.sl((f / per_host as usize) as u32 % sl_slots.count());
                CcFlow { ccti: sls[sl as usize].min, next_tick: NEVER, next_send_at: 0, gap_from: 0, sl }
            }),
        );
        CongestionControl {
            threshold_credits,
            packet_size_credits: cfg.packet_size_credits,
            marking_rate: cfg.marking_rate as u16,
            victim_ports,
            sl_based: cfg.sl_based,
            sls,
            cct: cfg.cct.iter().map(|&[s, m]| (s, m as u64)).collect(),
            limit: (cfg.cct.len() - 1) as u16,
            sl_slots,
            lanes,
            hca_base,
            cnp_base: hca_base + hosts * sl_slots.count() * lanes,
            t_max,
            flows,
            mark_counters: vec![0; port_vls],
            stats: CcStats::default(),
            by_class: vec![CcClassStats::default(); classes],
            trace: cfg.trace.then(|| Box::new(CcTrace { anchors: vec![0; flow_count], ..CcTrace::default() })),
            cnp_flows: Vec::new(),
        }
    }

    /// Credits still requested at an output VL after a grant from which it is congested
    /// (u32::MAX: never), for the inline test before `cc_mark`.
    pub(crate) fn threshold_credits(&self) -> u32 {
        self.threshold_credits
    }

    /// CC flows (for the event id range check).
    pub(crate) fn flow_count(&self) -> usize {
        self.flows.len()
    }

    /// The flow of (host, SL, lane).
    #[inline]
    pub(crate) fn flow(&self, host: u32, sl: u8, lane: u32) -> u32 {
        let hs = host * self.sl_slots.count() + self.sl_slots.slot(sl);
        if self.sl_based {
            hs
        } else {
            hs * self.lanes + lane
        }
    }

    /// (host, SL, lane) of a flow, for the CCTI trace.
    fn flow_parts(&self, flow: u32) -> (u32, u8, u32) {
        let (hs, lane) = if self.sl_based { (flow, 0) } else { (flow / self.lanes, flow % self.lanes) };
        (hs / self.sl_slots.count(), self.flows[flow as usize].sl, lane)
    }

    /// The HCA send queues a flow's throttling gates: its own lane, or every lane of its SL.
    /// Flows are numbered as the send queues are (`flow`), per lane or per (host, SL).
    fn flow_queues(&self, flow: u32) -> std::ops::Range<u32> {
        if self.sl_based {
            let first = self.hca_base + flow * self.lanes;
            first..first + self.lanes
        } else {
            let queue = self.hca_base + flow;
            queue..queue + 1
        }
    }

    /// The flow a data packet from HCA send queue `q` belongs to (its SL may have CC off).
    #[inline]
    fn flow_of_queue(&self, q: QueueId) -> u32 {
        let i = q.0 - self.hca_base;
        if self.sl_based {
            i / self.lanes
        } else {
            i
        }
    }

    /// Requests the line of the flow of HCA send queue `q` (nothing for a CNP queue), which the
    /// hooks of its next transmission or message read: under load it is rarely in cache.
    #[inline]
    pub(crate) fn prefetch_flow(&self, q: QueueId) {
        if q.0 < self.cnp_base {
            if let Some(f) = self.flows.get(self.flow_of_queue(q) as usize) {
                crate::sim::prefetch::prefetch(f);
            }
        }
    }

    /// Whether HCA send queue `q`'s flow holds no throttle at `now`: its CCTI at its SL's minimum
    /// once the timer's ticks due by now are counted (read here, applied where the CCTI is used)
    /// and no injection delay pending. SL-based flows are shared by every lane: true.
    pub(crate) fn lane_unthrottled(&self, q: QueueId, now: Time) -> bool {
        if self.sl_based {
            return true;
        }
        let flow = self.flow_of_queue(q);
        let f = self.flows[flow as usize];
        let s = self.sls[f.sl as usize];
        let ccti = (f.ccti as u64).saturating_sub(s.ticks_due(&f, now)).max(s.min as u64);
        ccti <= s.min as u64 && f.next_send_at <= now
    }

    /// The injection delay of CCT index `ccti` at host `host`: (T_max >> shift) x multiplier.
    #[inline]
    pub(crate) fn ird(&self, host: u32, ccti: u16) -> Time {
        let t_max = self.t_max[if self.t_max.len() == 1 { 0 } else { host as usize }];
        let (shift, mult) = self.cct[ccti as usize];
        (t_max >> shift) * mult
    }

    /// Records flow `flow`'s CCTI as it became at `time`; `order` places the row among the rows of
    /// the same time (`finish`).
    fn record_ccti(&mut self, time: Time, flow: u32, order: u64) {
        let ccti = self.flows[flow as usize].ccti;
        let (host, sl, lane) = self.flow_parts(flow);
        if let Some(t) = self.trace.as_deref_mut() {
            t.ccti.push(CctiChange { time, host, sl, lane, ccti });
            t.ccti_order.push(order);
        }
    }

    /// Applies flow `flow`'s timer ticks up to and including `now`. A tick lowers the CCTI by one
    /// if it is above `ccti_min`; the timer stops at the tick that leaves it at (or below) the
    /// minimum. These are the steps the `CcTimer` events of earlier versions took, one per
    /// period from the timer's start, computed where the CCTI is read. A tick at `now` counts as
    /// already done: the event version pushed it one period earlier, so it ran before every event
    /// of the same time pushed later (BECNs, and the transmissions that read the CCTI; design
    /// note: engine.md, "Congestion control").
    #[inline]
    fn advance(&mut self, flow: u32, now: Time) {
        if self.flows[flow as usize].next_tick <= now {
            self.advance_ticks(flow, now);
        }
    }

    #[cold]
    #[inline(never)]
    fn advance_ticks(&mut self, flow: u32, now: Time) {
        let f = self.flows[flow as usize];
        let s = self.sls[f.sl as usize];
        let due = s.ticks_due(&f, now);
        // Ticks until the one that stops the timer (one, when the CCTI is at the minimum already).
        let to_stop = if f.ccti > s.min { (f.ccti - s.min) as u64 } else { 1 };
        let ticks = due.min(to_stop);
        if self.trace.is_some() {
            let order = self.trace.as_deref().map_or(0, |t| t.anchors[flow as usize]);
            for k in 0..ticks {
                let c = &mut self.flows[flow as usize].ccti;
                if *c > s.min {
                    *c -= 1;
                    self.record_ccti(f.next_tick + k * s.timer_ps, flow, order);
                }
            }
        } else if f.ccti > s.min {
            self.flows[flow as usize].ccti = f.ccti - ticks as u16;
        }
        let f = &mut self.flows[flow as usize];
        f.next_tick += ticks * s.timer_ps;
        if ticks == to_stop {
            f.next_tick = NEVER;
        }
    }

    /// At the end of a run (or of a stretch of it): applies every flow's ticks up to `cut` (the
    /// last time the event version would have run a tick at), and puts the trace's rows in the
    /// order the event version wrote them: by time, and among rows of one time, ticks (which the
    /// event version pushed one period ahead) before BECNs, ticks by their timer's start (the BECN
    /// that started it), BECNs in the order they arrived.
    pub(crate) fn finish(&mut self, cut: Time) {
        for flow in 0..self.flows.len() as u32 {
            self.advance(flow, cut);
        }
        if let Some(t) = self.trace.as_deref_mut() {
            let mut rows: Vec<(Time, u64, CctiChange)> =
                t.ccti.iter().zip(&t.ccti_order).map(|(c, &o)| (c.time, o, *c)).collect();
            rows.sort_by_key(|&(time, order, _)| (time, order));
            t.ccti = rows.iter().map(|r| r.2).collect();
            t.ccti_order = rows.iter().map(|r| r.1).collect();
        }
    }
}

impl Simulation {
    /// FECN marking as switch port `port` starts sending packet `id` on `vl` (after its request
    /// was taken off the VL's list, before the input's next head is filed): congested (the
    /// credits still requested reach the threshold), a root (or a victim port while
    /// credit-blocked), big enough, and due by the marking rate.
    #[cold]
    #[inline(never)]
    pub(crate) fn cc_mark(&mut self, port: PortId, id: u32, vl: u8, was_blocked: bool) {
        let now = self.now;
        let idx = self.port_vl(port, vl);
        let local = self.ports[port].local as u32;
        let pk = self.packets.items[id as usize];
        let cc = self.cc.as_deref_mut().expect("congestion control on");
        // The caller (transmit) has tested the packet (data, unmarked) and the congestion.
        debug_assert!(pk.phase & CC_PHASE_BITS == 0 && self.port_vls[idx].requested_credits >= cc.threshold_credits);
        if pk.credits() < cc.packet_size_credits {
            return;
        }
        let victim = was_blocked;
        if victim && cc.victim_ports[(local / 64) as usize] & (1 << (local % 64)) == 0 {
            return;
        }
        if let Some(t) = cc.trace.as_deref_mut() {
            t.eligible_in_congestion += 1;
        }
        // With marking rate 0 (every eligible packet) the counters stay 0: not even read.
        if cc.marking_rate != 0 {
            let counter = &mut cc.mark_counters[idx];
            if *counter < cc.marking_rate {
                *counter += 1;
                return;
            }
            *counter = 0;
        }
        self.packets.items[id as usize].phase |= FECN;
        cc.by_class[pk.class as usize].fecn_marked_packets += 1;
        if victim {
            cc.stats.marks_victim += 1;
        } else {
            cc.stats.marks_root += 1;
        }
        if let Some(t) = cc.trace.as_deref_mut() {
            t.marked_at.insert(id, t.marks.len() as u32);
            let (sl, src, dst, credits) = (pk.sl, pk.src.0, pk.dst.0, pk.credits());
            t.marks.push(Mark { time: now, port: port.0, vl, sl, src, dst, credits, victim });
        }
    }

    /// An HCA starts sending packet `id` from its send queue `q`, ending at `done`: a data
    /// packet's flow holds its next packet back by the IRD of its CCTI. Returns whether `id` is
    /// a CNP (no message of its own: the caller skips the message bookkeeping).
    #[cold]
    #[inline(never)]
    pub(crate) fn cc_hca_sent(&mut self, q: QueueId, id: u32, done: Time) -> bool {
        let pk = self.packets.items[id as usize];
        let cc = self.cc.as_deref_mut().expect("congestion control on");
        if pk.phase & CNP != 0 {
            cc.stats.cnp_wire_bytes += pk.wire_bytes as u64;
            return true;
        }
        if !cc.sls[pk.sl as usize].enabled {
            return false;
        }
        let flow = cc.flow_of_queue(q);
        cc.advance(flow, self.now);
        let next = done + cc.ird(pk.src.0, cc.flows[flow as usize].ccti);
        let f = &mut cc.flows[flow as usize];
        f.next_send_at = next;
        f.gap_from = done;
        for lane_q in cc.flow_queues(flow).map(QueueId) {
            let queue = &mut self.queues[lane_q];
            if queue.head != NONE {
                let head = &mut self.packets.items[queue.head as usize];
                // The port sends nothing of this flow before `done` anyway: only the gap counts.
                let held = next.saturating_sub(head.eligible_at.max(done));
                cc.by_class[head.class as usize].cc_throttle_ps += held;
                head.eligible_at = head.eligible_at.max(next);
                // Filed heads (other lanes of an SL-based flow) wait too; queue `q`'s new head
                // is filed after this, from the packet.
                queue.head_eligible_at = queue.head_eligible_at.max(next);
            }
        }
        false
    }

    /// A packet became the head of HCA send queue `q` (a message injected into an empty queue):
    /// it waits for its flow's throttle.
    #[cold]
    #[inline(never)]
    pub(crate) fn cc_new_hca_head(&mut self, q: QueueId, id: u32) {
        let cc = self.cc.as_deref_mut().expect("congestion control on");
        let pk = &mut self.packets.items[id as usize];
        if !cc.sls[pk.sl as usize].enabled {
            return;
        }
        let f = cc.flows[cc.flow_of_queue(q) as usize];
        cc.by_class[pk.class as usize].cc_throttle_ps += f.next_send_at.saturating_sub(pk.eligible_at.max(f.gap_from));
        pk.eligible_at = pk.eligible_at.max(f.next_send_at);
    }

    /// Congestion control's part of delivering packet `id` (tail at `tail`): a FECN-marked packet
    /// gets a CNP back to its source; a CNP is consumed here (its BECN takes effect at `tail`).
    /// Returns true when `id` was a CNP (fully handled).
    #[cold]
    #[inline(never)]
    pub(crate) fn cc_deliver(&mut self, id: u32, tail: Time) -> bool {
        let pk = self.packets.items[id as usize];
        let cc = self.cc.as_deref_mut().expect("congestion control on");
        if pk.phase & CNP != 0 {
            // The source (the CNP's destination) throttles the flow of the marked packet.
            let flow = cc.cnp_flows[id as usize];
            cc.by_class[pk.class as usize].becn_received += 1;
            if let Some(t) = cc.trace.as_deref_mut() {
                if let Some(mark) = t.marked_at.remove(&id) {
                    let marked_at = t.marks[mark as usize].time;
                    t.becn.push(BecnDelay { marked_at, increased_at: tail, host: pk.dst.0, sl: pk.sl, mark });
                }
            }
            if cc.sls[pk.sl as usize].enabled {
                self.events.push(tail, EventKind::CcBecn, flow);
            }
            self.packets.remove(id);
            self.packets_delivered_total += 1;
            return true;
        }
        if pk.phase & FECN == 0 {
            return false;
        }
        // One CNP per marked packet, header only, on the marked packet's SL, sent when its tail
        // has arrived. It names the marked packet's message only so that it is a valid index.
        let cnp = Packet {
            eligible_at: tail,
            message: pk.message,
            src: pk.dst,
            dst: pk.src,
            next: NONE,
            wire_bytes: self.header as u16,
            class: pk.class,
            sl: pk.sl,
            phase: CNP,
            via: NO_VIA,
        };
        cc.stats.cnp_packets += 1;
        let q = QueueId(cc.cnp_base + pk.dst.0 * cc.sl_slots.count() + cc.sl_slots.slot(pk.sl));
        let mark = cc.trace.as_deref_mut().and_then(|t| t.marked_at.remove(&id));
        let flow = cc.flow(pk.src.0, pk.sl, self.messages.items[pk.message as usize].lane as u32);
        let cnp_id = self.packets.insert(cnp);
        self.packets_created += 1;
        let cnp_flows = &mut self.cc.as_deref_mut().expect("congestion control on").cnp_flows;
        if cnp_flows.len() <= cnp_id as usize {
            cnp_flows.resize(cnp_id as usize + 1, 0);
        }
        cnp_flows[cnp_id as usize] = flow;
        if let (Some(t), Some(mark)) = (self.cc.as_deref_mut().and_then(|c| c.trace.as_deref_mut()), mark) {
            t.marked_at.insert(cnp_id, mark);
        }
        if self.queues[q].push(cnp_id, &mut self.packets.items) {
            self.register_head(q, None, None);
        }
        false
    }

    /// A BECN reaches its source: the flow's CCTI rises (after the timer's ticks up to now); its
    /// timer starts if idle.
    pub(crate) fn on_cc_becn(&mut self, flow: u32) {
        let now = self.now;
        let cc = self.cc.as_deref_mut().expect("congestion control on");
        cc.advance(flow, now);
        let f = &mut cc.flows[flow as usize];
        let s = cc.sls[f.sl as usize];
        let before = f.ccti;
        f.ccti = (f.ccti as u32 + s.increase as u32).min(cc.limit as u32) as u16;
        let ccti = f.ccti;
        let start_timer = f.next_tick == NEVER;
        if start_timer {
            f.next_tick = now + s.timer_ps;
        }
        cc.stats.max_ccti = cc.stats.max_ccti.max(ccti);
        if s.trigger != 0 && ccti >= s.trigger {
            cc.stats.trigger_events += 1;
        }
        let mut order = 0;
        if let Some(t) = cc.trace.as_deref_mut() {
            order = t.becns;
            t.becns += 1;
            if start_timer {
                t.anchors[flow as usize] = order;
            }
        }
        if ccti != before {
            cc.record_ccti(now, flow, order);
        }
    }

    /// The summary's `congestion_control` object (None with CC off).
    pub(crate) fn cc_summary(&self) -> Option<serde_json::Value> {
        let cc = self.cc.as_deref()?;
        let s = cc.stats;
        Some(serde_json::json!({
            "cnp_packets": s.cnp_packets,
            "cnp_wire_bytes": s.cnp_wire_bytes,
            "marks_root": s.marks_root,
            "marks_victim": s.marks_victim,
            "max_ccti": s.max_ccti,
            "trigger_events": s.trigger_events,
        }))
    }

    /// Congestion control's counters of statistics class `class` (None with CC off).
    pub fn cc_class_stats(&self, class: usize) -> Option<CcClassStats> {
        self.cc.as_deref().map(|c| c.by_class[class])
    }

    /// The CCTI and BECN trace (`congestion_control.trace = true`), for validation.
    pub fn cc_trace(&self) -> Option<&CcTrace> {
        self.cc.as_deref()?.trace.as_deref()
    }

    /// Congestion control's counters (None with CC off).
    pub fn cc_stats(&self) -> Option<CcStats> {
        self.cc.as_deref().map(|c| c.stats)
    }

    /// The current CCTI of (host, SL, lane) (lane ignored when SL-based; None with CC off, or on
    /// an SL no message of the run carries, which has no flows).
    pub fn cc_ccti(&self, host: HostId, sl: u8, lane: u32) -> Option<u16> {
        let cc = self.cc.as_deref().filter(|c| c.sl_slots.in_use(sl))?;
        // Outside `run_reporting`, whose end applied every tick the run reached.
        Some(cc.flows[cc.flow(host.0, sl, lane) as usize].ccti)
    }

    /// The injection delay (ps) of CCT index `ccti` at `host` (None with CC off).
    pub fn cc_ird(&self, host: HostId, ccti: u16) -> Option<Time> {
        Some(self.cc.as_deref()?.ird(host.0, ccti))
    }
}
