//! The mutable state of a run, struct-of-arrays indexed by port, queue, packet and message ids.

use super::prechecked::PrecheckedVec;
use crate::ids::HostId;
use crate::topology::NONE;
use crate::units::Time;

/// A packet in flight. Lives in a slab; its `next` links it into exactly one FIFO. Kept to 32
/// bytes (two per cache line): the payload is `wire_bytes` less the header, and where the head
/// of a queue goes next is kept in its `Queue`.
#[derive(Debug, Clone, Copy)]
pub struct Packet {
    /// Earliest time it may be forwarded: header arrival plus the switch's cut-through delay.
    pub eligible_at: Time,
    pub message: u32,
    pub src: HostId,
    pub dst: HostId,
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
    pub src: HostId,
    pub dst: HostId,
    /// The open-loop source that made it, or NONE for an MPI message.
    pub source: u32,
    /// The MPI layer's id for it, or NONE for open-loop traffic.
    pub mpi: u32,
    /// Tell the MPI layer when the HCA has sent its last packet (eager sends complete then).
    pub notify_injected: bool,
    /// Statistics class: traffic tables first, then one per job.
    pub class: u16,
    pub sl: u8,
    /// The HCA send queue (QP lane) of its SL it joins: `Simulation::open_loop_lane` or
    /// `Simulation::connection_lane`.
    pub lane: u8,
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
    pub fn new(src: HostId, dst: HostId, sl: u8, bytes: u64, class: u16, created: Time) -> Message {
        Message {
            src,
            dst,
            source: NONE,
            mpi: NONE,
            notify_injected: false,
            class,
            sl,
            lane: 0,
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
    pub items: PrecheckedVec<T>,
    free: Vec<u32>,
}

impl<T: Copy> Slab<T> {
    pub fn new() -> Slab<T> {
        Slab { items: PrecheckedVec::new(Vec::new()), free: Vec::new() }
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

// Two packets per cache line.
const _: () = assert!(std::mem::size_of::<Packet>() == 32);
