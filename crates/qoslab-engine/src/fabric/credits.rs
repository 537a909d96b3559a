//! Link-level flow control: credits freed at a receiver travel back to the sending port over the
//! link's latency and become the sender's view of the receiver's free buffer on that VL.

use crate::ids::PortId;
use crate::sim::Simulation;
use crate::units::{Time, NEVER};
use std::collections::VecDeque;

/// Credits the receiver has freed, on their way back to the sender (they arrive after the link's
/// latency). Kept in arrival order: they are nearly always freed in that order, but not quite
/// (two VLs of one input leave for different outputs at once, and a small packet that starts
/// later can finish first), so a return earlier than the last is put in its place.
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
    #[allow(clippy::box_collection)] // keeps the struct in one 64-byte line (asserted below)
    overflow: Option<Box<VecDeque<CreditReturn>>>,
}

impl CreditReturns {
    /// Adds a return in arrival order: behind the others (nearly always), or in its place.
    #[inline]
    pub fn insert(&mut self, r: CreditReturn) {
        if self.inline == 0 {
            // The usual case: nothing else on its way (the overflow fills only behind a full inline).
            self.put_inline(r);
        } else if self.back_at() <= r.at {
            self.push(r);
        } else {
            self.insert_in_place(r);
        }
    }

    /// The rare case: every return taken out, `r` put in its place, all put back.
    #[cold]
    #[inline(never)]
    fn insert_in_place(&mut self, r: CreditReturn) {
        let mut all: Vec<CreditReturn> = self.iter().collect();
        let at = all.partition_point(|x| x.at <= r.at);
        all.insert(at, r);
        self.first = 0;
        self.inline = 0;
        if let Some(o) = self.overflow.as_mut() {
            o.clear();
        }
        for x in all {
            self.push(x);
        }
    }

    /// Arrival time of the latest return (there is one).
    #[inline]
    fn back_at(&self) -> Time {
        if let Some(last) = self.overflow.as_ref().and_then(|o| o.back()) {
            return last.at;
        }
        self.at[(self.first as usize + self.inline as usize - 1) % INLINE_RETURNS]
    }

    #[inline]
    fn push(&mut self, r: CreditReturn) {
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
// One cache line.
const _: () = assert!(std::mem::size_of::<CreditReturns>() == 64);

/// The oldest credit return on its way to a port, kept in the port's own line: usually it is the
/// only one, so returning and applying credits touch no other line. The sender's view of the
/// receiver's buffer on a VL is that VL's `PortVl::credits` plus the returns due to it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CreditsDue {
    /// Arrival time (NEVER: no return on its way), VL and credits.
    pub(crate) at: Time,
    pub(crate) credits: u16,
    pub(crate) vl: u8,
    /// More returns wait behind it, in the port's `CreditReturns`.
    pub(crate) behind: bool,
}

impl CreditsDue {
    pub(crate) const NONE: CreditsDue = CreditsDue { at: NEVER, credits: 0, vl: 0, behind: false };

    /// The return itself, if one is due.
    fn pending(&self) -> Option<CreditReturn> {
        (self.at != NEVER).then_some(CreditReturn { at: self.at, vl: self.vl, credits: self.credits as u32 })
    }
}

impl Simulation {
    /// Credits freed at a receiver, arriving back at the sending port `port` at time `at`.
    #[inline(always)]
    pub(crate) fn return_credits(&mut self, port: PortId, vl: u8, credits: u32, at: Time) {
        let due = &mut self.ports[port].credits_due;
        if due.at == NEVER {
            *due = CreditsDue { at, credits: credits as u16, vl, behind: false };
        } else if at < due.at {
            self.return_before_due(port, vl, credits, at);
        } else {
            due.behind = true;
            self.returns[port].insert(CreditReturn { at, vl, credits });
        }
        if self.ports[port].credit_waiting && !self.ports[port].transmitting {
            self.schedule_wake(port, at);
        }
    }

    /// A return freed before the oldest on its way (another VL's packet that left sooner): it is
    /// due first, and the one that was goes behind it.
    #[cold]
    #[inline(never)]
    fn return_before_due(&mut self, port: PortId, vl: u8, credits: u32, at: Time) {
        let due = &mut self.ports[port].credits_due;
        let was = CreditReturn { at: due.at, vl: due.vl, credits: due.credits as u32 };
        *due = CreditsDue { at, credits: credits as u16, vl, behind: true };
        self.returns[port].insert(was);
    }

    #[inline]
    pub(crate) fn apply_returned_credits(&mut self, port: PortId) {
        let now = self.now;
        let due = &mut self.ports[port].credits_due;
        while due.at <= now {
            self.port_vls[(port.0 * self.vls + due.vl as u32) as usize].credits += due.credits as u32;
            if due.behind {
                let returns = &mut self.returns[port];
                let r = returns.pop_front();
                *due =
                    CreditsDue { at: r.at, credits: r.credits as u16, vl: r.vl, behind: returns.front_at().is_some() };
            } else {
                due.at = NEVER;
            }
        }
    }

    /// Every credit return on its way to `port`, oldest first.
    pub(crate) fn pending_returns(&self, port: PortId) -> impl Iterator<Item = CreditReturn> + '_ {
        self.ports[port].credits_due.pending().into_iter().chain(self.returns[port].iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returns_come_out_in_arrival_order_whatever_order_they_go_in() {
        let mut q = CreditReturns::default();
        // More than the inline four, so the overflow deque is used too; 35 and 5 arrive early.
        let times = [10, 20, 30, 40, 50, 60, 35, 70, 5, 70];
        for (i, &at) in times.iter().enumerate() {
            q.insert(CreditReturn { at, vl: i as u8, credits: 1 });
        }
        let order: Vec<(Time, u8)> = q.iter().map(|r| (r.at, r.vl)).collect();
        assert_eq!(order, [(5, 8), (10, 0), (20, 1), (30, 2), (35, 6), (40, 3), (50, 4), (60, 5), (70, 7), (70, 9)]);
        let popped: Vec<Time> = (0..times.len()).map(|_| q.pop_front().at).collect();
        assert!(popped.windows(2).all(|w| w[0] <= w[1]) && q.front_at().is_none());
    }
}
