//! An output port: its hot state, its per-VL credit view and request lists, arbitration between
//! VLs (the VL arbiter, `vl_arbiter.rs`) and between the inputs asking for one VL (oldest first),
//! and transmission: serialization, cut-through to the next buffer, credits back upstream.

use super::cc::CC_PHASE_BITS;
use super::credits::CreditsDue;
use super::switch::InputSite;
use super::vl_arbiter::{ArbState, Grant};
use crate::ids::{PortId, QueueId, SwitchId};
use crate::queue::EventKind;
use crate::sim::prefetch::prefetch;
use crate::sim::Simulation;
use crate::stats::PortVlCounters;
use crate::topology::NONE;
use crate::units::{Time, NEVER};

/// Per-port state touched on every event at that port, kept together so one event costs one
/// cache miss for it rather than one per array: the hot scalars and the port's place in the
/// cabling (so forwarding and routing need no lookups in the topology's arrays).
#[derive(Debug, Clone)]
#[repr(align(64))]
pub(crate) struct PortState {
    pub(crate) wake_at: Time,
    /// The oldest credit return on its way here (the rest wait in `Simulation::returns`).
    pub(crate) credits_due: CreditsDue,
    pub(crate) arb: ArbState,
    /// Queue (input, VL; or HCA send queue) feeding the packet now on this port's wire.
    pub(crate) tx_queue: QueueId,
    /// Port at the other end of the cable (NONE if uncabled).
    pub(crate) peer: PortId,
    /// The switch this port belongs to (NONE for an HCA port) and its number there.
    pub(crate) switch: SwitchId,
    pub(crate) local: u16,
    /// The same for the peer, so a packet sent from here is routed at its next switch without
    /// loading the peer's line (NONE / 0 when the peer is an HCA or there is none).
    pub(crate) peer_local: u16,
    pub(crate) peer_switch: SwitchId,
    /// Bit v set while VL v has filed requests (skips idle VLs quickly).
    pub(crate) request_mask: u16,
    /// Bit v set while VL v is in a credit stall (mirror of the VL's counters).
    pub(crate) stalled_mask: u16,
    /// A packet is on the wire; cleared when its TxEnd is handled (not merely when time passes,
    /// so a same-instant poke cannot start a new packet before the old one's input is released).
    pub(crate) transmitting: bool,
    pub(crate) credit_waiting: bool,
    /// Packets sent from here are delivered: the peer is an HCA.
    pub(crate) peer_is_host: bool,
}

/// Per (output port, VL): the sender's credit view, the requests waiting for it and what it sent.
/// One cache line, so an arbitration or a transmission on a VL costs one miss for all of it;
/// ports with idle VLs never load those VLs' lines.
#[derive(Debug, Clone, Copy)]
#[repr(align(64))]
pub struct PortVl {
    /// Sender's view of the receiver's free buffer.
    pub credits: u32,
    /// Credits asked for by the filed requests (adaptive routing's backlog).
    pub requested_credits: u32,
    /// Oldest and newest filed request (queue ids linked through `Queue::next_request`).
    pub first_request: QueueId,
    pub last_request: QueueId,
    pub counters: PortVlCounters,
    /// Interference attribution only (`sim/attribution.rs`): the packet this VL is sending or
    /// last sent, its end (picoseconds, bits 16 and up) and class (bits 0-15). Here, in the line
    /// a transmission writes anyway, rather than in a side array (one miss a hop).
    pub on_wire: u64,
}
// The layout is the point of these structs: each is one cache line.
const _: () = assert!(std::mem::size_of::<PortState>() == 64);
const _: () = assert!(std::mem::size_of::<PortVl>() == 64);

impl Simulation {
    #[inline(always)]
    pub(crate) fn schedule_wake(&mut self, port: PortId, at: Time) {
        if at < self.ports[port].wake_at {
            self.ports[port].wake_at = at;
            self.events.push(at, EventKind::Wake, port.0);
        }
    }

    pub(crate) fn on_wake(&mut self, port: PortId) {
        if self.ports[port].wake_at == self.now {
            self.ports[port].wake_at = NEVER;
        }
        self.try_send(port);
    }

    pub(crate) fn on_tx_end(&mut self, port: PortId) {
        let ps = &mut self.ports[port];
        ps.transmitting = false;
        let q = ps.tx_queue;
        let queue = &mut self.queues[q];
        queue.busy = false;
        let queue = &self.queues[q];
        // The queue's next packet may now go, possibly to another output.
        let out = queue.out_port;
        if queue.head != NONE && out != port {
            self.try_send(out);
        }
        self.try_send(port);
    }

    /// Arbitrates an idle output port: picks a VL by the VL arbiter, then the oldest request on
    /// that VL whose packet is eligible, whose input is free and which fits the downstream credits.
    /// About a third of the calls find the port sending or with nothing filed and no credits due;
    /// those are answered here, inline, from the port's line.
    #[inline(always)]
    pub(crate) fn try_send(&mut self, port: PortId) {
        let ps = &self.ports[port];
        if ps.transmitting || (ps.request_mask == 0 && ps.credits_due.at > self.now) {
            return;
        }
        self.arbitrate(port);
    }

    #[inline(never)]
    pub(crate) fn arbitrate(&mut self, port: PortId) {
        let now = self.now;
        self.apply_returned_credits(port);
        let mut mask = self.ports[port].request_mask;
        if mask == 0 {
            return;
        }
        let base = port.0 * self.vls;
        let mut ready: u16 = 0;
        // The last VL found ready and the request filed just before its first sendable one
        // (NONE if that is the oldest), for unlinking it. Usually a port has one VL in use; when
        // the arbiter grants another, that VL's list is searched again (`sendable_prev`).
        let (mut last_ready_vl, mut last_ready_prev) = (0u8, QueueId::NONE);
        let mut next_eligible = NEVER;
        let mut credit_blocked = false;
        let mut stalled_mask = self.ports[port].stalled_mask;
        // The usual case (nearly nine in ten arbitrations with requests on the 1024-host tree),
        // answered without the scan below: one VL has requests (so its list is not empty), it
        // was not credit-stalled, and its oldest request is sendable. The scan would stop at that
        // request and change nothing else (no stall to record, no wake-up to ask for).
        if mask & (mask - 1) == 0 && stalled_mask & mask == 0 {
            let v = mask.trailing_zeros();
            let pv = &self.port_vls[(base + v) as usize];
            let r = &self.queues[pv.first_request];
            if r.head_eligible_at <= now && !r.busy && r.head_credits as u32 <= pv.credits {
                (ready, last_ready_vl) = (mask, v as u8);
                mask = 0;
            }
        }
        while mask != 0 {
            let v = mask.trailing_zeros();
            mask &= mask - 1;
            let idx = (base + v) as usize;
            let pv = &self.port_vls[idx];
            let available = pv.credits;
            let mut stalled = false;
            let (mut prev, mut q) = (QueueId::NONE, pv.first_request);
            while !q.is_none() {
                let r = &self.queues[q];
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
                self.ports[port].stalled_mask = stalled_mask;
            }
            credit_blocked |= stalled;
        }
        let ps = &mut self.ports[port];
        let table = &self.arb_tables[!ps.switch.is_none() as usize];
        let grant = if ready != 0 { ps.arb.select(table, ready) } else { None };
        let Some(grant) = grant else {
            if credit_blocked {
                if let Some(w) = self.xmit_wait.as_deref_mut() {
                    if w[port.index()].0 == NEVER {
                        w[port.index()].0 = now;
                    }
                }
                if self.attribution.is_some() {
                    let ps = &self.ports[port];
                    let downstream = (!ps.peer_is_host).then(|| QueueId::input(ps.peer, 0, self.vls));
                    let a = self.attribution.as_deref_mut().expect("attribution on");
                    a.blocked(port, stalled_mask, now, downstream, (&self.queues, &self.packets.items));
                }
                self.ports[port].credit_waiting = true;
                let at = self.ports[port].credits_due.at;
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
        let q = if prev.is_none() { self.port_vls[idx].first_request } else { self.queues[prev].next_request };
        self.unfile_request(idx, prev, q);
        self.transmit(port, q, grant.vl, grant);
    }

    /// The request filed just before the first sendable one on (port, VL) `idx` (NONE if that
    /// is the oldest): the same one the scan in `arbitrate` found, as nothing changed since.
    pub(crate) fn sendable_prev(&self, idx: usize) -> QueueId {
        let (now, available) = (self.now, self.port_vls[idx].credits);
        let (mut prev, mut q) = (QueueId::NONE, self.port_vls[idx].first_request);
        loop {
            let r = &self.queues[q];
            if r.head_eligible_at <= now && !r.busy && r.head_credits as u32 <= available {
                return prev;
            }
            (prev, q) = (q, r.next_request);
        }
    }

    /// Starts sending the head of queue `q` on `port`, VL `vl`.
    pub(crate) fn transmit(&mut self, port: PortId, q: QueueId, vl: u8, grant: Grant) {
        let now = self.now;
        let upstream = self.queues[q].upstream;
        // What this hop needs of the port's line, read once.
        let ps = &self.ports[port];
        let (down, delivers, peer_switch, peer_local) =
            (ps.peer, ps.peer_is_host, ps.peer_switch, ps.peer_local as u32);
        // Whether the port sat idle for credits since its last transmission (the blocked
        // interval attribution and PortXmitWait close now); read here, from the line in hand.
        let was_blocked = ps.credit_waiting;
        let (switch, base) = (ps.switch, PortId(port.0 - ps.local as u32));
        // Start the misses this packet-hop will take anyway, so that they overlap.
        if !delivers {
            prefetch(&self.queues[QueueId::input(down, vl, self.vls)]);
        }
        if !upstream.is_none() {
            prefetch(&self.ports[upstream]);
            // Often (nearly half the time on a loaded fabric) a return is already on its way
            // there, and this one queues behind it.
            if self.deep_prefetch {
                prefetch(&self.returns[upstream]);
            }
        } else if let Some(cc) = self.cc.as_deref() {
            // An HCA: congestion control reads the sending flow's state below.
            cc.prefetch_flow(q);
        }
        let id = self.queues[q].pop(&self.packets.items);
        let pk = &self.packets.items[id as usize];
        let (wire, credits, message, class) = (pk.wire_bytes as u32, pk.credits(), pk.message, pk.class);
        // An HCA's send and the last hop's delivery update the packet's message.
        if self.deep_prefetch && (upstream.is_none() || delivers) {
            prefetch(&self.messages.items[message as usize]);
        }
        // Where the packet goes at the next switch, worked out now (when fixed) so that the lines
        // filing it there will touch (the output's port state and VL) are requested early and
        // their misses overlap with this hop's others, instead of following them.
        let mut next_site = None;
        let mut next_route = None;
        if !delivers {
            let site = InputSite { switch: peer_switch, base: PortId(down.0 - peer_local), local: peer_local };
            next_site = Some(site);
            next_route = self.fixed_route(site, pk.src, pk.dst, pk.sl);
            if let Some((out, out_vl)) = next_route {
                prefetch(&self.ports[out]);
                prefetch(&self.port_vls[self.port_vl(out, out_vl)]);
            }
        }
        let done = if self.port_rates.is_empty() {
            now + self.ser_by_wire[wire as usize]
        } else {
            self.mixed_rate_tx_end(port, upstream, wire, id)
        };
        if self.attribution.is_some() {
            self.attribute_wait(port, vl, class, now, done, was_blocked);
        }
        if was_blocked {
            if let Some(w) = self.xmit_wait.as_deref_mut() {
                let (since, total) = &mut w[port.index()];
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
        let ps = &mut self.ports[port];
        ps.arb.charge(grant, wire);
        ps.transmitting = true;
        ps.credit_waiting = false;
        ps.tx_queue = q;
        self.events.push(done, EventKind::TxEnd, port.0);
        self.packet_hops += 1;

        // Where the queue's next head is routed from: this port's switch, the queue's input.
        let mut site = None;
        // An HCA sent a packet of a message (not a CNP): its message is updated below.
        let mut hca_message = upstream.is_none();
        if !upstream.is_none() {
            // The packet leaves the input buffer when its tail has left: credits go back then.
            let input = q.0 / self.vls;
            let in_vl = (q.0 - input * self.vls) as u8;
            self.return_credits(upstream, in_vl, credits, done + self.link_latency);
            site = Some(InputSite { switch, base, local: input - base.0 });
            // Congestion control (fabric/cc.rs): FECN marking at a switch port, called only for
            // a data packet leaving a congested VL. One branch on both tests (a marked packet or
            // a CNP is never congested): each alone is close to a coin flip under CC.
            if self.cc.is_some() {
                let data = self.packets.items[id as usize].phase & CC_PHASE_BITS == 0;
                let threshold = std::hint::select_unpredictable(data, self.cc_mark_credits, u32::MAX);
                if self.port_vls[idx].requested_credits >= threshold {
                    self.cc_mark(port, id, vl, was_blocked);
                }
            }
        } else if self.cc.is_some() && self.cc_hca_sent(q, id, done) {
            // Congestion control: a CNP, which has no message.
            hca_message = false;
        } else if self.window.contains(now) {
            let m = &self.messages.items[message as usize];
            let (sl, class) = (m.sl, m.class);
            for s in self.flow_classes(sl, class) {
                s.injected_wire_bytes += wire as u64;
            }
        }
        let queue = &mut self.queues[q];
        queue.busy = true;
        if queue.head != NONE {
            self.register_head(q, site, None);
        }
        if hca_message {
            self.on_hca_sent(message);
        }

        if delivers {
            let tail = done + self.link_latency;
            self.deliver(id, tail);
            self.return_credits(port, vl, credits, tail + self.link_latency);
        } else {
            self.packets.items[id as usize].eligible_at = now + self.link_latency + self.switch_latency;
            let dq = QueueId::input(down, vl, self.vls);
            if self.queues[dq].push(id, &mut self.packets.items) {
                self.register_head(dq, next_site, next_route);
            }
        }
    }

    /// When packet `id`'s transmission on `port` ends where links differ in rate, recorded in
    /// `tail_left` for its next hop: cut-through onto a faster link cannot finish before the
    /// packet's tail has arrived, and the tail comes in at the pace of the slowest link it has
    /// crossed so far, not just the last one (so it is carried, not rebuilt from one rate).
    // Out of line: only imported fabrics take it, and inlined it cost uniform ones instructions.
    #[inline(never)]
    pub(crate) fn mixed_rate_tx_end(&mut self, port: PortId, upstream: PortId, wire: u32, id: u32) -> Time {
        let rate = self.port_rates[port.index()];
        let mut end = self.now + rate.serialization(wire);
        let slot = id as usize;
        if slot >= self.tail_left.len() {
            // Grows with the packet slab, whose ids it shares (freed ids are reused).
            self.tail_left.resize(slot + 1, 0);
        }
        if !upstream.is_none() {
            // The tail left the previous port at `tail_left` and arrives a link latency later;
            // it leaves here one byte time after arriving.
            let tail_in = self.tail_left[slot] + self.link_latency;
            end = end.max(tail_in + rate.serialization(1));
        }
        self.tail_left[slot] = end;
        end
    }
}
