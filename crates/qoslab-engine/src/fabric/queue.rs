//! A packet FIFO: one VL of a switch input buffer, or an HCA send queue.

use crate::ids::{PortId, QueueId};
use crate::sim::state::Packet;
use crate::topology::NONE;
use crate::units::Time;

/// A FIFO threaded through `Packet::next`. Queue ids: switch input (port, VL) first, then HCA
/// send queues (host, SL). A filed head (see `file_request`) also carries what arbitration needs
/// of it, so scanning the requests for an output touches queues, not packets.
#[derive(Debug, Clone, Copy)]
pub struct Queue {
    pub head: u32,
    pub tail: u32,
    /// The next queue whose head asks for the same (output port, VL), in filing order.
    pub next_request: QueueId,
    /// Output port the head leaves through (set when it becomes head).
    pub out_port: PortId,
    pub head_eligible_at: Time,
    pub head_credits: u16,
    pub out_vl: u8,
    /// A packet from this queue is still being sent (its tail has not left the buffer), so the
    /// next one cannot start yet. Per queue, i.e. per (input, VL): see docs/design/engine.md.
    pub busy: bool,
    /// The port that sends into this queue's input, which gets the credits back (NONE for an
    /// HCA send queue). Fixed; kept here, in the line a packet-hop loads anyway, so that sending
    /// need not load the input port's line to find it.
    pub upstream: PortId,
}

impl Queue {
    pub fn new(upstream: PortId) -> Queue {
        Queue {
            head: NONE,
            tail: NONE,
            next_request: QueueId::NONE,
            out_port: PortId::NONE,
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

// Two queues per cache line.
const _: () = assert!(std::mem::size_of::<Queue>() == 32);
