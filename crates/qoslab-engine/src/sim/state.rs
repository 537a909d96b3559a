//! The mutable state of a run, struct-of-arrays indexed by port, queue, packet and message ids.

use crate::stats::PortVlCounters;
use crate::topology::NONE;
use crate::units::Time;
use std::collections::VecDeque;

/// A packet in flight. Lives in a slab; its `next` links it into exactly one FIFO. Kept to 32
/// bytes (two per cache line): the payload is `wire_bytes` less the header, and where the head
/// of a queue goes next is kept in its `Queue`.
#[derive(Debug, Clone, Copy)]
pub struct Packet {
    /// Earliest time it may be forwarded: header arrival plus the switch's cut-through delay.
    pub eligible_at: Time,
    pub message: u32,
    pub src: u32,
    pub dst: u32,
    pub next: u32,
    pub wire_bytes: u16,
    /// Its message's statistics class (traffic table or job): what interference attribution
    /// charges, without a lookup in the message slab on every hop.
    pub class: u16,
    pub sl: u8,
    /// Dragonfly+ path state: VL layer, and the intermediate group (NO_VIA if none).
    pub phase: u8,
    pub via: u16,
}

impl Packet {
    /// Buffer space it takes: whole 64-byte credits (computed: a shift and an add, cheaper than
    /// the 2 bytes of every packet it would take to store).
    #[inline(always)]
    pub fn credits(&self) -> u32 {
        crate::units::credits_for(self.wire_bytes as u32)
    }
}

/// A message: its packets complete it when the last one's tail reaches the destination.
#[derive(Debug, Clone, Copy)]
pub struct Message {
    pub src: u32,
    pub dst: u32,
    /// The open-loop source that made it, or NONE for an MPI message.
    pub source: u32,
    /// The MPI layer's id for it, or NONE for open-loop traffic.
    pub mpi: u32,
    /// Tell the MPI layer when the HCA has sent its last packet (eager sends complete then).
    pub notify_injected: bool,
    /// Statistics class: traffic tables first, then one per job.
    pub class: u16,
    pub sl: u8,
    pub bytes: u64,
    pub created: Time,
    pub last_delivery: Time,
    pub packets_left: u32,
    /// Packets not yet sent by the HCA; the message leaves the send queue when this hits 0.
    pub packets_unsent: u32,
}

impl Message {
    /// A message from neither a source nor the MPI layer yet (callers set one); `inject` fills
    /// in the packet counts.
    pub fn new(src: u32, dst: u32, sl: u8, bytes: u64, class: u16, created: Time) -> Message {
        Message {
            src,
            dst,
            source: NONE,
            mpi: NONE,
            notify_injected: false,
            class,
            sl,
            bytes,
            created,
            last_delivery: 0,
            packets_left: 0,
            packets_unsent: 0,
        }
    }
}

/// Slab allocator: freed slots are reused, so steady state allocates nothing per packet.
pub struct Slab<T> {
    pub items: Vec<T>,
    free: Vec<u32>,
}

impl<T: Copy> Slab<T> {
    pub fn new() -> Slab<T> {
        Slab { items: Vec::new(), free: Vec::new() }
    }

    #[inline]
    pub fn insert(&mut self, item: T) -> u32 {
        if let Some(id) = self.free.pop() {
            self.items[id as usize] = item;
            id
        } else {
            self.items.push(item);
            (self.items.len() - 1) as u32
        }
    }

    #[inline]
    pub fn remove(&mut self, id: u32) {
        self.free.push(id);
    }

    pub fn live(&self) -> usize {
        self.items.len() - self.free.len()
    }
}

/// A FIFO threaded through `Packet::next`. Queue ids: switch input (port, VL) first, then HCA
/// send queues (host, SL). A filed head (see `file_request`) also carries what arbitration needs
/// of it, so scanning the requests for an output touches queues, not packets.
#[derive(Debug, Clone, Copy)]
pub struct Queue {
    pub head: u32,
    pub tail: u32,
    /// The next queue whose head asks for the same (output port, VL), in filing order.
    pub next_request: u32,
    /// Output port the head leaves through (set when it becomes head).
    pub out_port: u32,
    pub head_eligible_at: Time,
    pub head_credits: u16,
    pub out_vl: u8,
    /// A packet from this queue is still being sent (its tail has not left the buffer), so the
    /// next one cannot start yet. Per queue, i.e. per (input, VL): see docs/design/engine.md.
    pub busy: bool,
    /// The port that sends into this queue's input, which gets the credits back (NONE for an
    /// HCA send queue). Fixed; kept here, in the line a packet-hop loads anyway, so that sending
    /// need not load the input port's line to find it.
    pub upstream: u32,
}

impl Queue {
    pub fn new(upstream: u32) -> Queue {
        Queue {
            head: NONE,
            tail: NONE,
            next_request: NONE,
            out_port: NONE,
            head_eligible_at: 0,
            head_credits: 0,
            out_vl: 0,
            busy: false,
            upstream,
        }
    }

    /// Appends; returns true when the packet became the head.
    #[inline]
    pub fn push(&mut self, id: u32, packets: &mut [Packet]) -> bool {
        packets[id as usize].next = NONE;
        let tail = self.tail;
        self.tail = id;
        if tail == NONE {
            self.head = id;
            true
        } else {
            packets[tail as usize].next = id;
            false
        }
    }

    #[inline]
    pub fn pop(&mut self, packets: &[Packet]) -> u32 {
        let id = self.head;
        self.head = packets[id as usize].next;
        if self.head == NONE {
            self.tail = NONE;
        }
        id
    }
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
    pub first_request: u32,
    pub last_request: u32,
    pub counters: PortVlCounters,
}

/// Credits the receiver has freed, on their way back to the sender (they arrive after the link's
/// latency). Return times on one link only grow, so a FIFO per port suffices.
#[derive(Debug, Clone, Copy)]
pub struct CreditReturn {
    pub at: Time,
    pub vl: u8,
    pub credits: u32,
}

/// Returns held inline: rarely more are on their way to one port at once.
const INLINE_RETURNS: usize = 4;

/// The credit returns on their way to one sender behind the oldest (which `PortState` holds), in
/// arrival order. The next few sit inline in one cache line, so a push or an arbitration costs
/// one miss rather than a header and a buffer; the rest wait, in order, in a deque allocated the
/// first time it is needed.
#[derive(Debug, Clone, Default)]
#[repr(align(64))]
pub struct CreditReturns {
    at: [Time; INLINE_RETURNS],
    credits: [u16; INLINE_RETURNS],
    vl: [u8; INLINE_RETURNS],
    first: u8,
    inline: u8,
    #[allow(clippy::box_collection)] // keeps the struct in one 64-byte line (asserted in sim/mod.rs)
    overflow: Option<Box<VecDeque<CreditReturn>>>,
}

impl CreditReturns {
    #[inline]
    pub fn push(&mut self, r: CreditReturn) {
        let overflowing = self.overflow.as_ref().is_some_and(|o| !o.is_empty());
        if self.inline as usize == INLINE_RETURNS || overflowing {
            self.overflow.get_or_insert_with(Default::default).push_back(r);
        } else {
            self.put_inline(r);
        }
    }

    #[inline]
    fn put_inline(&mut self, r: CreditReturn) {
        let i = (self.first as usize + self.inline as usize) % INLINE_RETURNS;
        self.at[i] = r.at;
        self.credits[i] = r.credits as u16;
        self.vl[i] = r.vl;
        self.inline += 1;
    }

    /// Arrival time of the oldest return.
    #[inline]
    pub fn front_at(&self) -> Option<Time> {
        (self.inline > 0).then(|| self.at[self.first as usize])
    }

    /// Removes the oldest return (there is one).
    #[inline]
    pub fn pop_front(&mut self) -> CreditReturn {
        let i = self.first as usize;
        let r = CreditReturn { at: self.at[i], vl: self.vl[i], credits: self.credits[i] as u32 };
        self.first = ((i + 1) % INLINE_RETURNS) as u8;
        self.inline -= 1;
        if let Some(next) = self.overflow.as_mut().and_then(|o| o.pop_front()) {
            self.put_inline(next);
        }
        r
    }

    pub fn iter(&self) -> impl Iterator<Item = CreditReturn> + '_ {
        let inline = (0..self.inline as usize).map(move |k| {
            let i = (self.first as usize + k) % INLINE_RETURNS;
            CreditReturn { at: self.at[i], vl: self.vl[i], credits: self.credits[i] as u32 }
        });
        inline.chain(self.overflow.iter().flat_map(|o| o.iter().copied()))
    }
}
