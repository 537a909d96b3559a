//! The event list: a min-heap of (time, insertion order) keys; ties break by insertion order.

use crate::units::Time;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// What happens at a port when its event fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// An output port finished putting a packet on its wire.
    TxEnd = 0,
    /// An idle output port should look again (a head became eligible, credits came back).
    Wake = 1,
    /// A traffic source creates its next message.
    Source = 2,
    /// An MPI rank's compute phase ends.
    RankResume = 3,
    /// An MPI message has arrived (shared memory, or the fabric's last byte).
    MpiArrival = 4,
}

const ID_BITS: u32 = 29;
const ID_MASK: u64 = (1 << ID_BITS) - 1;
const KIND_SHIFT: u32 = ID_BITS;
const KIND_BITS: u32 = 3;
const SEQ_SHIFT: u32 = ID_BITS + KIND_BITS;

/// Largest component id an event can carry.
pub const MAX_EVENT_ID: u32 = ID_MASK as u32;

/// Each entry packs (time, sequence, kind, id) into one u128, so ordering is a single compare.
pub struct EventQueue {
    heap: BinaryHeap<Reverse<u128>>,
    seq: u64,
}

impl Default for EventQueue {
    fn default() -> Self {
        Self::new()
    }
}

impl EventQueue {
    pub fn new() -> EventQueue {
        EventQueue { heap: BinaryHeap::with_capacity(1 << 12), seq: 0 }
    }

    #[inline]
    pub fn push(&mut self, time: Time, kind: EventKind, id: u32) {
        debug_assert!(id <= MAX_EVENT_ID);
        let tag = (self.seq << SEQ_SHIFT) | ((kind as u64) << KIND_SHIFT) | id as u64;
        self.seq += 1;
        self.heap.push(Reverse(((time as u128) << 64) | tag as u128));
    }

    #[inline]
    pub fn pop(&mut self) -> Option<(Time, EventKind, u32)> {
        let Reverse(key) = self.heap.pop()?;
        let time = (key >> 64) as Time;
        let tag = key as u64;
        let kind = match (tag >> KIND_SHIFT) & ((1 << KIND_BITS) - 1) {
            0 => EventKind::TxEnd,
            1 => EventKind::Wake,
            2 => EventKind::Source,
            3 => EventKind::RankResume,
            _ => EventKind::MpiArrival,
        };
        Some((time, kind, (tag & ID_MASK) as u32))
    }

    #[inline]
    pub fn peek_time(&self) -> Option<Time> {
        self.heap.peek().map(|Reverse(k)| (k >> 64) as Time)
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_time_order_and_ties_in_insertion_order() {
        let mut q = EventQueue::new();
        q.push(50, EventKind::Wake, 7);
        q.push(10, EventKind::TxEnd, 3);
        q.push(50, EventKind::Source, 1);
        q.push(10, EventKind::Wake, 9);
        assert_eq!(q.pop(), Some((10, EventKind::TxEnd, 3)));
        assert_eq!(q.pop(), Some((10, EventKind::Wake, 9)));
        assert_eq!(q.pop(), Some((50, EventKind::Wake, 7)));
        assert_eq!(q.pop(), Some((50, EventKind::Source, 1)));
        assert_eq!(q.pop(), None);
    }
}
