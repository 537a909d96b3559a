//! Collectives as algorithms over point-to-point messages, expanded one step at a time.
//!
//! Every step is "post the receives, post the sends, wait for all", like MPICH's implementations
//! of the same algorithms. Peers here are positions in the collective's group (0..p).

use super::program::{CollectiveKind, Op, SendMode, COLLECTIVE_CONTEXT, COLLECTIVE_TAG_BASE};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllreduceAlgorithm {
    RecursiveDoubling,
    Ring,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlltoallAlgorithm {
    Pairwise,
    Bruck,
}

/// The algorithm choices of one job.
#[derive(Debug, Clone, Copy)]
pub struct Algorithms {
    pub allreduce: AllreduceAlgorithm,
    pub alltoall: AlltoallAlgorithm,
}

/// Tag of the messages of a rank's `seq`-th collective. Members call collectives in the same
/// order (MPI's rule), so the sequence number keeps consecutive collectives apart; inside one,
/// matching in posting order pairs the messages up, as MPICH's one tag per collective does.
pub fn collective_tag(seq: u32) -> u32 {
    COLLECTIVE_TAG_BASE | (seq & !COLLECTIVE_TAG_BASE)
}

fn ceil_log2(p: u32) -> u32 {
    32 - (p - 1).leading_zeros()
}

/// What one rank does in one step: receives from and sends to group positions.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Step {
    pub recv_from: Vec<u32>,
    pub send_to: Vec<(u32, u64)>,
}

impl Step {
    fn exchange(to: u32, from: u32, bytes: u64) -> Step {
        Step { recv_from: vec![from], send_to: vec![(to, bytes)] }
    }
}

/// Step `step` of a collective for the rank at position `me` of a group of `p`; None once the
/// collective has no more steps. A step may be empty for this rank (it idles in that round).
pub fn step(kind: CollectiveKind, algorithms: Algorithms, p: u32, me: u32, bytes: u64, step: u32) -> Option<Step> {
    if p <= 1 {
        return None;
    }
    let next = (me + 1) % p;
    let prev = (me + p - 1) % p;
    match kind {
        CollectiveKind::Barrier => {
            // Dissemination: in round k, signal me + 2^k and hear from me - 2^k.
            (step < ceil_log2(p)).then(|| {
                let d = 1 << step;
                Step::exchange((me + d) % p, (me + p - d) % p, 0)
            })
        }
        CollectiveKind::Bcast => binomial_bcast(p, me, bytes, step),
        CollectiveKind::Reduce => binomial_reduce(p, me, bytes, step),
        CollectiveKind::Allreduce => match algorithms.allreduce {
            AllreduceAlgorithm::RecursiveDoubling => recursive_doubling(p, me, bytes, step),
            AllreduceAlgorithm::Ring => {
                // Reduce-scatter then allgather around the ring, one chunk of bytes/p per step.
                let chunk = bytes.div_ceil(p as u64);
                (step < 2 * (p - 1)).then(|| Step::exchange(next, prev, chunk))
            }
        },
        CollectiveKind::Alltoall => match algorithms.alltoall {
            AlltoallAlgorithm::Pairwise => {
                // Round k: send my block for me + k, receive the block of me - k.
                let k = step + 1;
                (k < p).then(|| Step::exchange((me + k) % p, (me + p - k) % p, bytes))
            }
            AlltoallAlgorithm::Bruck => (step < ceil_log2(p)).then(|| {
                // Round k forwards every block whose index has bit k set.
                let d = 1u32 << step;
                let blocks = (0..p).filter(|j| j & d != 0).count() as u64;
                Step::exchange((me + d) % p, (me + p - d) % p, blocks * bytes)
            }),
        },
        CollectiveKind::Allgather => (step < p - 1).then(|| Step::exchange(next, prev, bytes)),
    }
}

/// Binomial tree from root 0: step 0 receives from the parent, step 1 sends to the children.
fn binomial_bcast(p: u32, me: u32, bytes: u64, step: u32) -> Option<Step> {
    match step {
        0 => Some(Step {
            recv_from: if me == 0 { vec![] } else { vec![me - (1 << me.trailing_zeros())] },
            send_to: vec![],
        }),
        1 => Some(Step { recv_from: vec![], send_to: binomial_children(p, me).map(|c| (c, bytes)).collect() }),
        _ => None,
    }
}

/// The mirror image of the broadcast: children first, then the parent.
fn binomial_reduce(p: u32, me: u32, bytes: u64, step: u32) -> Option<Step> {
    match step {
        0 => Some(Step { recv_from: binomial_children(p, me).collect(), send_to: vec![] }),
        1 => Some(Step {
            recv_from: vec![],
            send_to: if me == 0 { vec![] } else { vec![(me - (1 << me.trailing_zeros()), bytes)] },
        }),
        _ => None,
    }
}

/// Children of `me` in the binomial tree rooted at 0: me + 2^k for every 2^k below me's lowest set bit.
fn binomial_children(p: u32, me: u32) -> impl Iterator<Item = u32> {
    let limit = if me == 0 { ceil_log2(p) } else { me.trailing_zeros() };
    (0..limit).rev().map(move |k| me + (1 << k)).filter(move |&c| c < p)
}

/// Recursive doubling with MPICH's fold for a non-power-of-two group: the first 2r ranks pair
/// up, the even one hands its data to the odd one (step 0) and gets the result back at the end.
fn recursive_doubling(p: u32, me: u32, bytes: u64, step: u32) -> Option<Step> {
    let p2 = 1u32 << (31 - p.leading_zeros());
    let rem = p - p2;
    let rounds = p2.trailing_zeros();
    let folded = me < 2 * rem;
    let new_rank = if folded { (me % 2 == 1).then_some(me / 2) } else { Some(me - rem) };
    let old_rank = |n: u32| if n < rem { 2 * n + 1 } else { n + rem };
    let empty = Step::default();
    if step == 0 {
        return Some(match (folded, me % 2) {
            (true, 0) => Step { recv_from: vec![], send_to: vec![(me + 1, bytes)] },
            (true, _) => Step { recv_from: vec![me - 1], send_to: vec![] },
            _ => empty,
        });
    }
    if step <= rounds {
        return Some(match new_rank {
            Some(n) => {
                let partner = old_rank(n ^ (1 << (step - 1)));
                Step::exchange(partner, partner, bytes)
            }
            None => empty,
        });
    }
    (step == rounds + 1).then(|| match (folded, me % 2) {
        (true, 0) => Step { recv_from: vec![me + 1], send_to: vec![] },
        (true, _) => Step { recv_from: vec![], send_to: vec![(me - 1, bytes)] },
        _ => empty,
    })
}

/// Appends a step's ops, with peers translated from group positions by `member`.
pub fn push_step_ops(out: &mut Vec<Op>, s: &Step, tag: u32, member: impl Fn(u32) -> u32) {
    for &from in &s.recv_from {
        out.push(Op::Irecv { peer: member(from), tag, context: COLLECTIVE_CONTEXT });
    }
    for &(to, bytes) in &s.send_to {
        out.push(Op::Isend { peer: member(to), bytes, tag, context: COLLECTIVE_CONTEXT, mode: SendMode::Standard });
    }
    if !s.recv_from.is_empty() || !s.send_to.is_empty() {
        out.push(Op::WaitAll);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    const ALGOS: [Algorithms; 2] = [
        Algorithms { allreduce: AllreduceAlgorithm::RecursiveDoubling, alltoall: AlltoallAlgorithm::Pairwise },
        Algorithms { allreduce: AllreduceAlgorithm::Ring, alltoall: AlltoallAlgorithm::Bruck },
    ];
    const KINDS: [CollectiveKind; 6] = [
        CollectiveKind::Barrier,
        CollectiveKind::Bcast,
        CollectiveKind::Reduce,
        CollectiveKind::Allreduce,
        CollectiveKind::Alltoall,
        CollectiveKind::Allgather,
    ];

    /// Every send has exactly one matching receive; exchange algorithms match inside each step,
    /// trees (broadcast, reduce) across their two steps.
    #[test]
    fn every_send_is_received() {
        for p in 1..=37 {
            for kind in KINDS {
                for algos in ALGOS {
                    let mut s = 0;
                    let mut pending: HashMap<(u32, u32), i32> = HashMap::new();
                    let tree = matches!(kind, CollectiveKind::Bcast | CollectiveKind::Reduce);
                    loop {
                        let steps: Vec<Option<Step>> = (0..p).map(|me| step(kind, algos, p, me, 8, s)).collect();
                        if steps.iter().all(|x| x.is_none()) {
                            break;
                        }
                        for (me, st) in steps.iter().enumerate() {
                            let st = st.as_ref().expect("all ranks have the same number of steps");
                            for &(to, _) in &st.send_to {
                                *pending.entry((me as u32, to)).or_default() += 1;
                            }
                            for &from in &st.recv_from {
                                *pending.entry((from, me as u32)).or_default() -= 1;
                            }
                        }
                        if !tree {
                            assert!(pending.values().all(|&v| v == 0), "{kind:?} {algos:?} p={p} step {s}");
                        }
                        s += 1;
                    }
                    assert!(pending.values().all(|&v| v == 0), "{kind:?} {algos:?} p={p}");
                }
            }
        }
    }

    fn bytes_sent(kind: CollectiveKind, algos: Algorithms, p: u32, me: u32, bytes: u64) -> u64 {
        (0..).map_while(|s| step(kind, algos, p, me, bytes, s)).flat_map(|st| st.send_to).map(|(_, b)| b).sum()
    }

    #[test]
    fn data_volumes_match_the_algorithms() {
        let (rd, ring) = (ALGOS[0], ALGOS[1]);
        // Ring allreduce: 2 (p-1)/p of the vector per rank.
        assert_eq!(bytes_sent(CollectiveKind::Allreduce, ring, 8, 3, 8000), 2 * 7 * 1000);
        // Recursive doubling on 8: log2(8) full vectors.
        assert_eq!(bytes_sent(CollectiveKind::Allreduce, rd, 8, 3, 100), 300);
        // Pairwise alltoall: one block to every other rank.
        assert_eq!(bytes_sent(CollectiveKind::Alltoall, rd, 16, 5, 64), 15 * 64);
        // Bruck on 8: 3 rounds of 4 blocks each.
        assert_eq!(bytes_sent(CollectiveKind::Alltoall, ring, 8, 5, 64), 3 * 4 * 64);
        // Broadcast: the tree carries p-1 messages in total.
        let total: u64 = (0..13).map(|me| bytes_sent(CollectiveKind::Bcast, rd, 13, me, 1)).sum();
        assert_eq!(total, 12);
    }
}
