//! Routing deadlock: a cycle of full input buffers, each waiting for credits that only the next
//! one can free. Routing on a topology with cycles (a ring, non-minimal Dragonfly+ paths on one
//! VL, some LFTs) can build one; it never clears, so the run stops and names it.

use super::Simulation;
use crate::topology::NONE;

impl Simulation {
    /// Queue whose draining queue `q`'s head is waiting for, if it waits for credits only that
    /// queue can free: its output has too few credits on its VL and none on the way back.
    fn waits_for(&self, q: u32) -> u32 {
        let queue = &self.queues[q as usize];
        if queue.head == NONE || queue.busy {
            return NONE;
        }
        let (out, vl) = (queue.out_port, queue.out_vl);
        let ps = &self.ports[out as usize];
        if ps.peer_is_host || ps.peer == NONE {
            return NONE;
        }
        if self.port_vls[self.port_vl(out, vl)].credits >= queue.head_credits as u32 {
            return NONE;
        }
        let returning = (ps.next_return_at != crate::units::NEVER && ps.next_return_vl == vl)
            || self.returns[out as usize].iter().any(|r| r.vl == vl);
        if returning {
            return NONE;
        }
        ps.peer * self.vls + vl as u32
    }

    /// A description of a cycle of blocked switch input buffers, or None.
    pub(super) fn credit_cycle(&self) -> Option<String> {
        let switch_queues = self.ports.len() * self.vls as usize;
        // 0: not seen, 1: on the current walk, 2: known not to lead into a cycle.
        let mut state = vec![0u8; switch_queues];
        let mut walk = Vec::new();
        for start in 0..switch_queues as u32 {
            if state[start as usize] != 0 || self.ports[(start / self.vls) as usize].switch == NONE {
                continue;
            }
            walk.clear();
            let mut q = start;
            while q != NONE && (q as usize) < switch_queues && state[q as usize] == 0 {
                state[q as usize] = 1;
                walk.push(q);
                q = self.waits_for(q);
            }
            if q != NONE && (q as usize) < switch_queues && state[q as usize] == 1 {
                let first = walk.iter().position(|&x| x == q).unwrap();
                return Some(self.describe_cycle(&walk[first..]));
            }
            for &x in &walk {
                state[x as usize] = 2;
            }
        }
        None
    }

    fn describe_cycle(&self, cycle: &[u32]) -> String {
        let g = self.graph();
        let name = |q: u32| {
            let port = q / self.vls;
            let node = g.port_node[port as usize];
            // Ports as the InfiniBand tools number them, from 1.
            format!("{} port {} VL{}", g.node_names[node as usize], g.local_port(port) + 1, q % self.vls)
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
