//! Collectives as algorithms over point-to-point messages, expanded one step at a time.
//!
//! Every step is "post the receives, post the sends, wait for all", like MPICH's implementations
//! of the same algorithms; the binomial trees make one blocking send or receive per step, as
//! MPICH's do. Peers here are positions in the collective's group (0..p).

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

/// MPICH's binomial broadcast (`MPIR_Bcast_intra_binomial`) from root 0: step 0 receives from the
/// parent; step k (1..=⌈log₂ p⌉) sends to the child 2^(⌈log₂ p⌉ - k) away, farthest subtree
/// first, one blocking send at a time (MPICH's `MPIC_Send`), so that a message taking T reaches
/// every rank after ⌈log₂ p⌉ T. Ranks without that child idle in the step.
fn binomial_bcast(p: u32, me: u32, bytes: u64, step: u32) -> Option<Step> {
    let rounds = ceil_log2(p);
    match step {
        0 => Some(Step { recv_from: binomial_parent(me).into_iter().collect(), send_to: vec![] }),
        k if k <= rounds => Some(Step {
            recv_from: vec![],
            send_to: binomial_child(p, me, rounds - k).map(|c| (c, bytes)).into_iter().collect(),
        }),
        _ => None,
    }
}

/// MPICH's binomial reduce (`MPIR_Reduce_intra_binomial`) to root 0, the broadcast's mirror image:
/// step k (0..⌈log₂ p⌉) receives from the child 2^k away, nearest first, one blocking receive at a
/// time (`MPIC_Recv`, then the local reduction); the last step sends to the parent.
fn binomial_reduce(p: u32, me: u32, bytes: u64, step: u32) -> Option<Step> {
    let rounds = ceil_log2(p);
    match step {
        k if k < rounds => Some(Step { recv_from: binomial_child(p, me, k).into_iter().collect(), send_to: vec![] }),
        k if k == rounds => {
            Some(Step { recv_from: vec![], send_to: binomial_parent(me).map(|q| (q, bytes)).into_iter().collect() })
        }
        _ => None,
    }
}

/// `me`'s parent in the binomial tree rooted at 0: me with its lowest set bit cleared.
fn binomial_parent(me: u32) -> Option<u32> {
    (me != 0).then(|| me - (1 << me.trailing_zeros()))
}

/// `me`'s child me + 2^k in the binomial tree rooted at 0, if there is one: 2^k must lie below
/// me's lowest set bit (any k for the root) and the child inside the group.
fn binomial_child(p: u32, me: u32, k: u32) -> Option<u32> {
    let below_lowest_bit = me == 0 || k < me.trailing_zeros();
    (below_lowest_bit && me + (1 << k) < p).then(|| me + (1 << k))
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

    /// MPICH's binomial trees: one send (bcast) or receive (reduce) per step, the bcast's farthest
    /// child first, the reduce's nearest first.
    #[test]
    fn binomial_trees_take_one_child_per_step_in_mpich_order() {
        let algos = ALGOS[0];
        let peers = |kind, me, sends: bool| -> Vec<Vec<u32>> {
            (0..)
                .map_while(|s| step(kind, algos, 13, me, 8, s))
                .map(|st| if sends { st.send_to.iter().map(|&(c, _)| c).collect() } else { st.recv_from })
                .collect()
        };
        // On 13 ranks the root's children are 8, 4, 2, 1; rank 4's are 6, 5; rank 12 has none.
        assert_eq!(peers(CollectiveKind::Bcast, 0, true), vec![vec![], vec![8], vec![4], vec![2], vec![1]]);
        assert_eq!(peers(CollectiveKind::Bcast, 4, true), vec![vec![], vec![], vec![], vec![6], vec![5]]);
        assert_eq!(peers(CollectiveKind::Bcast, 4, false)[0], vec![0]);
        assert_eq!(peers(CollectiveKind::Reduce, 0, false), vec![vec![1], vec![2], vec![4], vec![8], vec![]]);
        assert_eq!(peers(CollectiveKind::Reduce, 4, false), vec![vec![5], vec![6], vec![], vec![], vec![]]);
        assert_eq!(peers(CollectiveKind::Reduce, 12, true), vec![vec![], vec![], vec![], vec![], vec![8]]);
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
