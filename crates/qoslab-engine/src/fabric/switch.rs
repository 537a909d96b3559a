//! A switch: input buffers (one FIFO per input port and VL) whose heads are routed and filed as
//! requests with the output port and VL they need; the crossbar grants them (`port.rs`).

use super::cc::CC_PHASE_BITS;
use super::port::{PortState, PortVl};
use super::sl2vl::Sl2Vl;
use crate::ids::{HostId, PortId, QueueId, SwitchId};
use crate::routing::dragonfly::Decision;
use crate::routing::{LoadView, Route, Router};
use crate::sim::prechecked::PrecheckedVec;
use crate::sim::Simulation;

/// Set in `Packet::phase` once a flowlet packet's minimal-or-not decision is taken.
pub(crate) const PATH_DECIDED: u8 = 0x80;

/// A switch input port, as routing needs it: its switch, the switch's first port id, its number.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InputSite {
    pub(crate) switch: SwitchId,
    pub(crate) base: PortId,
    pub(crate) local: u32,
}

impl InputSite {
    /// The switch's port with local number `local`.
    #[inline(always)]
    pub(crate) fn port(self, local: u32) -> PortId {
        PortId(self.base.0 + local)
    }
}

// An `OutputLoads` over the simulation's fields, built where a choice reads it (a method
// borrowing the whole simulation would clash with drawing from its routing random stream).
macro_rules! loads {
    ($sim:ident, $switch:expr, $base:expr, $input:expr, $sl:expr) => {
        OutputLoads {
            sl2vl: &$sim.sl2vl,
            port_vls: &$sim.port_vls,
            ports: &$sim.ports,
            vls: $sim.vls,
            qos_vls: $sim.qos_vls,
            buffer: $sim.buffer_credits as i64,
            switch: $switch,
            base: $base,
            input: $input,
            sl: $sl,
        }
    };
}

impl Simulation {
    /// Routes the new head of queue `q` and files its request with the output port it needs.
    /// `site`: the switch input the queue buffers for (None for an HCA send queue). `routed`:
    /// the head's output port and VL if the caller already worked them out (`fixed_route`).
    #[inline(always)]
    pub(crate) fn register_head(&mut self, q: QueueId, site: Option<InputSite>, routed: Option<(PortId, u8)>) {
        let head = self.queues[q].head;
        let pk = &self.packets.items[head as usize];
        let (eligible, credits, src, dst, sl, class) =
            (pk.eligible_at, pk.credits() as u16, pk.src, pk.dst, pk.sl, pk.class);
        let (out_port, out_vl) = match (routed, site) {
            (Some(r), _) => r,
            (None, None) => (PortId(self.graph().host_port(src.0)), self.sl2vl.ca[sl as usize]),
            (None, Some(site)) if matches!(self.router, Router::Dragonfly(_)) => self.route_dragonfly(site, head),
            (None, Some(site)) => self.route(site, src, dst, sl),
        };
        if self.attribution.is_some() {
            self.attribute_head(q, eligible, class);
        }
        let queue = &mut self.queues[q];
        queue.out_port = out_port;
        queue.out_vl = out_vl;
        queue.head_eligible_at = eligible;
        queue.head_credits = credits;
        queue.next_request = QueueId::NONE;
        let busy = queue.busy;
        let idx = self.port_vl(out_port, out_vl);
        let pv = &mut self.port_vls[idx];
        let last = pv.last_request;
        pv.last_request = q;
        pv.requested_credits += credits as u32;
        if last.is_none() {
            pv.first_request = q;
        } else {
            self.queues[last].next_request = q;
        }
        let out = &mut self.ports[out_port];
        out.request_mask |= 1 << out_vl;
        if !out.transmitting && !busy {
            self.schedule_wake(out_port, eligible.max(self.now));
        }
    }

    /// Takes queue `q`'s request off the list of (port, VL) `idx`; `prev` is the request filed
    /// just before it (NONE if it is the oldest).
    #[inline]
    pub(crate) fn unfile_request(&mut self, idx: usize, prev: QueueId, q: QueueId) {
        let queue = self.queues[q];
        let pv = &mut self.port_vls[idx];
        if prev.is_none() {
            pv.first_request = queue.next_request;
        } else {
            self.queues[prev].next_request = queue.next_request;
        }
        if queue.next_request.is_none() {
            pv.last_request = prev;
        }
        pv.requested_credits -= queue.head_credits as u32;
        if pv.first_request.is_none() {
            self.ports[queue.out_port].request_mask &= !(1 << queue.out_vl);
        }
    }

    /// Output port and VL for a packet from `src` to `dst` on `sl` at the head of a switch
    /// input's queue, on tables and fat trees.
    #[inline]
    pub(crate) fn route(&mut self, site: InputSite, src: HostId, dst: HostId, sl: u8) -> (PortId, u8) {
        let InputSite { switch, base, local: input } = site;
        let router = &self.router;
        let local = match router.route(switch.0, src.0, dst.0) {
            Route::Port(p) => p,
            Route::AnyUp { first, count } => {
                router.choose_up(first, count, &mut self.routing_rng, &mut loads!(self, switch, base, input, sl))
            }
        };
        (site.port(local), self.sl2vl.switch_vl(switch.0, input, local, sl))
    }

    /// Dragonfly+: output port and VL for packet `id` at a switch input; updates its path state.
    /// The VL is the SL2VL table's, moved up one layer of `qos_vls` VLs per routing phase.
    fn route_dragonfly(&mut self, site: InputSite, id: u32) -> (PortId, u8) {
        let InputSite { switch, base, local: input } = site;
        let Router::Dragonfly(router) = &self.router else { unreachable!("a Dragonfly+ router") };
        let pk = self.packets.items[id as usize];
        let decided_before = pk.phase & PATH_DECIDED != 0;
        // Only flowlet decisions (Decision::Once) read or write the flow's entry.
        let flow = (pk.src.0 as u64) << 32 | pk.dst.0 as u64;
        let decision = if self.flowlet_gap == 0 {
            Decision::PerPacket
        } else if decided_before {
            Decision::Done
        } else {
            let now = self.now;
            Decision::Once(self.flowlets.get(&flow).filter(|f| now - f.1 < self.flowlet_gap).map(|f| f.0))
        };
        let hop = router.route(
            switch.0,
            input,
            pk.dst.0,
            pk.via,
            pk.phase & !(PATH_DECIDED | CC_PHASE_BITS),
            decision,
            &mut self.routing_rng,
            loads!(self, switch, base, input, pk.sl),
        );
        if hop.decided {
            // A new flowlet, or the next packet of one: either way its timer restarts now.
            self.flowlets.insert(flow, (hop.via, self.now));
        }
        let packet = &mut self.packets.items[id as usize];
        packet.via = hop.via;
        packet.phase =
            hop.phase | if hop.decided || decided_before { PATH_DECIDED } else { 0 } | (pk.phase & CC_PHASE_BITS);
        let vl = self.sl2vl.switch_vl(switch.0, input, hop.port, pk.sl) as u32 + hop.phase as u32 * self.qos_vls;
        (site.port(hop.port), vl as u8)
    }

    /// The output port and VL at `site` when they depend on the packet alone (no per-packet
    /// choice among up ports, which draws random numbers and must happen once, at filing).
    #[inline]
    pub(crate) fn fixed_route(&self, site: InputSite, src: HostId, dst: HostId, sl: u8) -> Option<(PortId, u8)> {
        if let Router::Dragonfly(_) = self.router {
            return None; // Dragonfly+ routes depend on the packet's path state: routed at filing
        }
        match self.router.route(site.switch.0, src.0, dst.0) {
            Route::Port(local) => Some((site.port(local), self.sl2vl.switch_vl(site.switch.0, site.local, local, sl))),
            Route::AnyUp { .. } => None,
        }
    }
}

/// What adaptive routing sees of a switch's outputs (`LoadView`): for (local port, VL layer),
/// the requests filed there and the downstream buffer in use on the packet's VL, in credits,
/// plus one while the port is sending.
struct OutputLoads<'a> {
    sl2vl: &'a Sl2Vl,
    port_vls: &'a PrecheckedVec<PortVl>,
    ports: &'a PrecheckedVec<PortState, PortId>,
    vls: u32,
    qos_vls: u32,
    buffer: i64,
    switch: SwitchId,
    base: PortId,
    input: u32,
    sl: u8,
}

impl LoadView for OutputLoads<'_> {
    #[inline(always)]
    fn load(&mut self, local: u32, layer: u8) -> i64 {
        let port = PortId(self.base.0 + local);
        let vl = self.sl2vl.switch_vl(self.switch.0, self.input, local, self.sl) as u32 + layer as u32 * self.qos_vls;
        let pv = &self.port_vls[(port.0 * self.vls + vl) as usize];
        pv.requested_credits as i64 + self.buffer - pv.credits as i64 + self.ports[port].transmitting as i64
    }
}
