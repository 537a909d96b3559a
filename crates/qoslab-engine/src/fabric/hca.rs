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

/// SLs per HCA send queue set.
pub(crate) const SLS: u32 = 16;

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
        QueueId((self.ports.len() as u32) * self.vls + (host.0 * SLS + sl as u32) * lanes + lane as u32)
    }

    /// An open-loop source's lane for a message to `dst`. A source is one process per host, so a
    /// destination host is a connection: lane `dst mod n`, connections sharing a lane when more
    /// destinations than lanes are in use.
    #[inline]
    pub(crate) fn open_loop_lane(&self, dst: HostId) -> u8 {
        (dst.0 % self.cfg.fabric.hca_send_queues_per_sl) as u8
    }

    /// The lane of MPI rank `from`'s connection to rank `to` on `sl` (`from` runs on `host`). Each
    /// process has a QP of its own per peer (RC; a rank pair is a connection) and keeps it: a
    /// connection takes a lane at its first message, the next of its host and SL's lanes in turn
    /// (as QPs are set up on demand), and keeps it for the run, so its messages stay in order and
    /// congestion control throttles the same lane. Until 2026-11-27 (model version .12) a message
    /// took lane `destination host mod n`, so all the ranks of a host sending to one other host
    /// shared one FIFO and were served message after message, not round robin.
    pub(crate) fn connection_lane(&mut self, host: HostId, sl: u8, from: u32, to: u32) -> u8 {
        let lanes = self.cfg.fabric.hca_send_queues_per_sl;
        let next = &mut self.connection_lanes.next;
        *self.connection_lanes.bound.entry((from, to, sl)).or_insert_with(|| {
            let i = (host.0 * SLS + sl as u32) as usize;
            if next.len() <= i {
                next.resize(i + 1, 0);
            }
            let lane = next[i];
            next[i] = ((lane as u32 + 1) % lanes) as u8;
            lane
        })
    }

    /// An HCA started sending one more packet of `message`; after its last, a saturating source refills, an
    /// eager MPI send completes.
    pub(crate) fn on_hca_sent(&mut self, message: u32) {
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

/// MPI connections' lanes (`Simulation::connection_lane`): the lane each (from rank, to rank, SL)
/// took, and per (host, SL) the lane the next new connection takes. Empty without MPI jobs.
#[derive(Debug, Default)]
pub(crate) struct ConnectionLanes {
    bound: HashMap<(u32, u32, u8), u8>,
    next: Vec<u8>,
}
