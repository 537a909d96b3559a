//! The mutable state of a run, struct-of-arrays indexed by port, queue, packet and message ids.

use crate::topology::NONE;
use crate::units::Time;
use std::collections::VecDeque;

/// A packet in flight. Lives in a slab; its `next` links it into exactly one FIFO.
#[derive(Debug, Clone, Copy)]
pub struct Packet {
    pub message: u32,
    pub src: u32,
    pub dst: u32,
    pub wire_bytes: u32,
    pub payload_bytes: u32,
    pub credits: u32,
    pub sl: u8,
    /// VL of the buffer it sits in (the VL it arrived on).
    pub vl: u8,
    /// VL it will use on its next link, and the port it leaves through (set when it becomes head).
    pub out_vl: u8,
    pub out_port: u32,
    /// Earliest time it may be forwarded: header arrival plus the switch's cut-through delay.
    pub eligible_at: Time,
    pub next: u32,
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

/// FIFOs threaded through `Packet::next`. Queue ids: switch input (port, VL) first, then HCA
/// send queues (host, SL).
pub struct Fifos {
    pub head: Vec<u32>,
    pub tail: Vec<u32>,
}

impl Fifos {
    pub fn new(count: usize) -> Fifos {
        Fifos { head: vec![NONE; count], tail: vec![NONE; count] }
    }

    /// Appends; returns true when the packet became the head.
    #[inline]
    pub fn push(&mut self, q: u32, id: u32, packets: &mut [Packet]) -> bool {
        packets[id as usize].next = NONE;
        let tail = self.tail[q as usize];
        self.tail[q as usize] = id;
        if tail == NONE {
            self.head[q as usize] = id;
            true
        } else {
            packets[tail as usize].next = id;
            false
        }
    }

    #[inline]
    pub fn pop(&mut self, q: u32, packets: &[Packet]) -> u32 {
        let id = self.head[q as usize];
        let next = packets[id as usize].next;
        self.head[q as usize] = next;
        if next == NONE {
            self.tail[q as usize] = NONE;
        }
        id
    }
}

/// Credits the receiver has freed, on their way back to the sender (they arrive after the link's
/// latency). Return times on one link only grow, so a FIFO per port suffices.
#[derive(Debug, Clone, Copy)]
pub struct CreditReturn {
    pub at: Time,
    pub vl: u8,
    pub credits: u32,
}

pub type CreditReturns = VecDeque<CreditReturn>;
