//! The run's self-checks: conservation of packets and credits, and the wake-up audit (a request
//! that could be sent on an idle port with nothing scheduled). A routing deadlock: a cycle of full input
//! buffers, each waiting for credits that only the next one can free. Routing on a topology with
//! cycles (a ring, non-minimal Dragonfly+ paths on one VL, some LFTs) can build one; it never
//! clears, so the run stops and names it.

use super::Simulation;
use crate::ids::{PortId, QueueId};
use crate::topology::NONE;
use crate::units::NEVER;

impl Simulation {
    /// Checks that every packet and every credit is accounted for; returns the figures.
    pub fn conservation(&self) -> Result<serde_json::Value, String> {
        let g = self.topology.graph();
        let live = self.packets.live() as u64;
        let mut queued = 0u64;
        let mut queued_credits = vec![0u64; self.port_vls.len()];
        for q in (0..self.queues.len() as u32).map(QueueId) {
            let mut id = self.queues[q].head;
            while id != NONE {
                queued += 1;
                if !self.queue_input(q).is_none() {
                    queued_credits[q.index()] += self.packets.items[id as usize].credits() as u64;
                }
                id = self.packets.items[id as usize].next;
            }
        }
        if queued != live {
            return Err(format!("{live} live packets but {queued} in queues"));
        }
        if self.packets_created != self.packets_delivered_total + live {
            return Err(format!(
                "packets created {} != delivered {} + in flight {live}",
                self.packets_created, self.packets_delivered_total
            ));
        }
        if self.messages_created != self.messages_completed + self.messages.live() as u64 {
            return Err("messages created != completed + open".into());
        }
        let mut checked = 0u64;
        for p in (0..g.ports()).map(PortId) {
            let down = g.port_peer[p.index()];
            if down == NONE {
                continue;
            }
            for v in 0..self.vls {
                let idx = self.port_vl(p, v as u8);
                let returning: u64 =
                    self.pending_returns(p).filter(|r| r.vl as u32 == v).map(|r| r.credits as u64).sum();
                let held = queued_credits[(down * self.vls + v) as usize];
                let free = self.port_vls[idx].credits;
                let total = free as u64 + returning + held;
                if total != self.buffer_credits as u64 {
                    return Err(format!(
                        "port {p} VL{v}: {free} free + {returning} returning + {held} held != {} credits",
                        self.buffer_credits
                    ));
                }
                checked += 1;
            }
        }
        let delivered_after_end = self.packets_delivered_total - self.all.delivered_packets;
        Ok(serde_json::json!({
            "ok": true,
            "packets_created": self.packets_created,
            "packets_delivered": self.packets_delivered_total,
            "packets_in_flight": live,
            "packets_delivered_in_window": self.all.delivered_packets,
            "packets_delivered_outside_window": delivered_after_end,
            "messages_created": self.messages_created,
            "messages_completed": self.messages_completed,
            "credit_counters_checked": checked,
        }))
    }

    /// Requests that could be sent right now (eligible, input free, credits available) on an
    /// output port that is idle with nothing scheduled: a lost wake-up. Empty in a healthy run.
    pub fn sendable_but_idle(&self) -> Vec<String> {
        let mut out = Vec::new();
        for p in (0..self.ports.len() as u32).map(PortId) {
            if self.ports[p].transmitting || self.ports[p].wake_at != NEVER {
                continue;
            }
            let mut credits: Vec<u32> =
                (0..self.vls).map(|v| self.port_vls[self.port_vl(p, v as u8)].credits).collect();
            for r in self.pending_returns(p).filter(|r| r.at <= self.now) {
                credits[r.vl as usize] += r.credits;
            }
            for v in 0..self.vls {
                let mut q = self.port_vls[self.port_vl(p, v as u8)].first_request;
                while !q.is_none() {
                    let queue = &self.queues[q];
                    let pk = &self.packets.items[queue.head as usize];
                    if pk.eligible_at <= self.now && !queue.busy && pk.credits() <= credits[v as usize] {
                        out.push(format!("port {p} VL{v}: packet {}->{} from queue {q} could be sent", pk.src, pk.dst));
                    }
                    q = queue.next_request;
                }
            }
        }
        out
    }
}

impl Simulation {
    /// Queue whose draining queue `q`'s head is waiting for, if it waits for credits only that
    /// queue can free: its output has too few credits on its VL and none on the way back.
    fn waits_for(&self, q: QueueId) -> QueueId {
        let queue = &self.queues[q];
        if queue.head == NONE || queue.busy {
            return QueueId::NONE;
        }
        let (out, vl) = (queue.out_port, queue.out_vl);
        let ps = &self.ports[out];
        if ps.peer_is_host || ps.peer.is_none() {
            return QueueId::NONE;
        }
        if self.port_vls[self.port_vl(out, vl)].credits >= queue.head_credits as u32 {
            return QueueId::NONE;
        }
        if self.pending_returns(out).any(|r| r.vl == vl) {
            return QueueId::NONE;
        }
        QueueId::input(ps.peer, vl, self.vls)
    }

    /// A description of a cycle of blocked switch input buffers, or None.
    pub(super) fn credit_cycle(&self) -> Option<String> {
        let switch_queues = self.ports.len() * self.vls as usize;
        // 0: not seen, 1: on the current walk, 2: known not to lead into a cycle.
        let mut state = vec![0u8; switch_queues];
        let mut walk = Vec::new();
        for start in (0..switch_queues as u32).map(QueueId) {
            if state[start.index()] != 0 || self.ports[self.queue_input(start)].switch.is_none() {
                continue;
            }
            walk.clear();
            let mut q = start;
            while !q.is_none() && q.index() < switch_queues && state[q.index()] == 0 {
                state[q.index()] = 1;
                walk.push(q);
                q = self.waits_for(q);
            }
            if !q.is_none() && q.index() < switch_queues && state[q.index()] == 1 {
                let first = walk.iter().position(|&x| x == q).unwrap();
                return Some(self.describe_cycle(&walk[first..]));
            }
            for &x in &walk {
                state[x.index()] = 2;
            }
        }
        None
    }

    fn describe_cycle(&self, cycle: &[QueueId]) -> String {
        let g = self.graph();
        let name = |q: QueueId| {
            let port = q.0 / self.vls;
            let node = g.port_node[port as usize];
            // Ports as the InfiniBand tools number them, from 1.
            format!("{} port {} VL{}", g.node_names[node as usize], g.local_port(port) + 1, q.0 % self.vls)
        };
        let mut text: Vec<String> = cycle.iter().map(|&q| name(q)).collect();
        text.push(name(cycle[0]));
        format!(
            "routing deadlock at {:.3} us: a cycle of {} full input buffers, each waiting for credits \
             only the next one can free: {}. The routing is not deadlock-free on these VLs: route \
             these paths on separate VLs (a Dragonfly+ with routing.vls = 2; OpenSM's lash or dfsssp \
             engines elsewhere) or choose routes without this cycle",
            self.now as f64 / 1e6,
            cycle.len(),
            text.join(" -> ")
        )
    }
}
