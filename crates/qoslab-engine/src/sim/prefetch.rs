//! Prefetching: on large fabrics each event starts with cache misses that the events queued next
//! make predictable, so their lines are requested while the current event is handled. The one
//! place that knows which lines a hop will touch.

use super::Simulation;
use crate::ids::PortId;
use crate::queue::EventKind;
use crate::topology::NONE;

/// Fabrics with more ports than this take the deep prefetch chain (`prefetch_upcoming`): their
/// hot per-port state (about 200 bytes a port) is several MB, well beyond the L2 cache.
pub(crate) const DEEP_PREFETCH_PORTS: usize = 16384;

impl Simulation {
    /// On large fabrics almost every event starts with cache misses on its port's state, and
    /// each line leads to the next (port -> its VL's first request and the queue it sends from
    /// -> that queue's head packet). The next events are known, so their lines are requested
    /// while this one is handled, one link of the chain per event, so that each request has
    /// about an event's time to complete before the next stage reads it. Small fabrics, whose
    /// state stays in the caches, only take the first two links: the deeper stages cost more
    /// instructions than the misses they save there.
    #[inline(always)]
    pub(crate) fn prefetch_upcoming(&self) {
        if self.deep_prefetch {
            self.prefetch_chain();
        } else {
            // Inline: these run on every event, and a call would cost about as much as they do.
            if let Some(port) = self.events.upcoming_port(3) {
                prefetch(&self.ports[PortId(port)]);
            }
            if let Some(port) = self.events.upcoming_port(1) {
                self.prefetch_port_lines(PortId(port));
            }
        }
    }

    /// The deep chain: each upcoming event is looked up once, and its stage's lines requested.
    #[inline(never)]
    pub(crate) fn prefetch_chain(&self) {
        let upcoming = self.events.upcoming_events();
        match upcoming.event(4) {
            Some((EventKind::TxEnd | EventKind::Wake, port)) => prefetch(&self.ports[PortId(port)]),
            Some((EventKind::Source, s)) => prefetch_all(&self.sources[s as usize]),
            _ => {}
        }
        if let Some(port) = upcoming.port(3) {
            self.prefetch_port_lines(PortId(port));
        }
        match upcoming.event(2) {
            Some((EventKind::TxEnd | EventKind::Wake, port)) => self.prefetch_request(PortId(port)),
            Some((EventKind::Source, s)) => self.prefetch_source_port(s),
            _ => {}
        }
        if let Some(port) = upcoming.port(1) {
            self.prefetch_head_packet(PortId(port));
            self.prefetch_poked_output(PortId(port));
        }
    }

    /// The HCA port a source's message will be filed with: its port line and VL line.
    #[inline(always)]
    pub(crate) fn prefetch_source_port(&self, s: u32) {
        let src = &self.sources[s as usize];
        let port = PortId(self.graph().host_port(src.host));
        prefetch(&self.ports[port]);
        prefetch(&self.port_vls[self.port_vl(port, self.sl2vl.ca[src.sl as usize])]);
    }

    /// The lines a port's line points to: the queue it sends from, its first requested VL and
    /// its credit returns.
    #[inline(always)]
    pub(crate) fn prefetch_port_lines(&self, port: PortId) {
        let ps = &self.ports[port];
        if !ps.tx_queue.is_none() {
            prefetch(&self.queues[ps.tx_queue]);
        }
        if ps.request_mask != 0 {
            prefetch(&self.port_vls[(port.0 * self.vls + ps.request_mask.trailing_zeros()) as usize]);
        }
        if ps.credits_due.behind {
            prefetch(&self.returns[port]);
        }
    }

    /// The queue of the oldest request on the port's first requested VL, and the output that
    /// the queue it sends from waits for next (ending a transmission pokes that output).
    #[inline(always)]
    pub(crate) fn prefetch_request(&self, port: PortId) {
        let ps = &self.ports[port];
        if ps.request_mask != 0 {
            let first = self.port_vls[(port.0 * self.vls + ps.request_mask.trailing_zeros()) as usize].first_request;
            if !first.is_none() {
                prefetch(&self.queues[first]);
            }
        }
        if ps.transmitting {
            let queue = &self.queues[ps.tx_queue];
            if queue.head != NONE && queue.out_port != port {
                prefetch(&self.ports[queue.out_port]);
            }
        }
    }

    /// That output's line for the waiting packet's VL (arbitration there reads it first).
    #[inline(always)]
    pub(crate) fn prefetch_poked_output(&self, port: PortId) {
        let ps = &self.ports[port];
        if ps.transmitting {
            let queue = &self.queues[ps.tx_queue];
            if queue.head != NONE && queue.out_port != port {
                prefetch(&self.port_vls[self.port_vl(queue.out_port, queue.out_vl)]);
            }
        }
    }

    /// The packet at the head of that oldest request's queue, which the port will send next.
    #[inline(always)]
    pub(crate) fn prefetch_head_packet(&self, port: PortId) {
        let ps = &self.ports[port];
        if ps.request_mask != 0 {
            let first = self.port_vls[(port.0 * self.vls + ps.request_mask.trailing_zeros()) as usize].first_request;
            if !first.is_none() && self.queues[first].head != NONE {
                prefetch(&self.packets.items[self.queues[first].head as usize]);
            }
        }
    }
}

/// Asks the cache for the line holding `item` (a hint; nothing on other architectures).
#[inline(always)]
pub(crate) fn prefetch<T>(item: &T) {
    prefetch_addr(item as *const T as usize);
}

#[inline(always)]
fn prefetch_addr(addr: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint; it never faults, even on an invalid address.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(addr as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}

/// Asks for every line `item` spans (for structs larger than a line or not aligned to one).
#[inline(always)]
pub(crate) fn prefetch_all<T>(item: &T) {
    let start = item as *const T as usize;
    let end = start + std::mem::size_of::<T>();
    let mut line = start & !63;
    while line < end {
        // Only addresses inside `item` are formed: `line` is clipped to its first byte.
        prefetch_addr(line.max(start));
        line += 64;
    }
}
