//! Rank programs: the compact op stream every rank executes, one iteration at a time.
//!
//! Peers are ranks *within the job* (0..size). Collectives stay one op until a rank reaches them;
//! `collectives.rs` then expands them step by step, so no program ever holds more than one
//! iteration's worth of point-to-point ops.

use crate::units::Time;

/// Wildcard for `Irecv::peer` (MPI_ANY_SOURCE) and `Irecv::tag` (MPI_ANY_TAG).
pub const ANY: u32 = u32::MAX;

/// Tags at or above this value are reserved for the messages of collectives.
pub const COLLECTIVE_TAG_BASE: u32 = 1 << 31;

/// The matching context of MPI_COMM_WORLD's point-to-point messages: every built-in workload's.
/// A trace's communicators each have their own (`packed::ISEND`), as MPI's context ids do.
pub const WORLD_CONTEXT: u32 = 0;

/// The context of every collective's internal messages: like MPICH's collective context id, it
/// keeps them from matching any user receive (an MPI_ANY_TAG one included).
pub const COLLECTIVE_CONTEXT: u32 = u32::MAX;

/// MPI's send modes, as the engine times them (MPI_Rsend is a standard send: its receive is
/// posted already, which changes nothing in the protocol).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendMode {
    /// MPI_Send: eager completes once the data is on the wire, rendezvous once it has arrived.
    Standard,
    /// MPI_Ssend: completes only once the matching receive is posted (eager: the receiver's
    /// acknowledgement of the match is back; rendezvous: as standard, the data follows the match).
    Synchronous,
    /// MPI_Bsend: completes at once, the data copied into the attached buffer; the library sends
    /// it on its own.
    Buffered,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CollectiveKind {
    Barrier,
    Bcast,
    Reduce,
    Allreduce,
    Alltoall,
    Allgather,
}

/// A sub-communicator of the job: `size` ranks `stride` apart, the calling rank among them.
/// `{stride: 1, size: job size}` is the whole job (MPI_COMM_WORLD); the rows and columns of a
/// row-major process grid are `{1, columns}` and `{columns, rows}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Group {
    pub stride: u32,
    pub size: u32,
}

impl Group {
    pub fn world(size: u32) -> Group {
        Group { stride: 1, size }
    }

    /// The calling rank's position in its group.
    #[inline]
    pub fn position(&self, rank: u32) -> u32 {
        (rank / self.stride) % self.size
    }

    /// The job rank at `position` of the group `rank` belongs to.
    #[inline]
    pub fn member(&self, rank: u32, position: u32) -> u32 {
        rank - self.position(rank) * self.stride + position * self.stride
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Local computation: the rank is busy, the network keeps going.
    Compute {
        ps: Time,
    },
    /// Non-blocking two-sided send; completes locally (eager) or once delivered (rendezvous).
    /// `context` is its communicator's matching context (`WORLD_CONTEXT`, `COLLECTIVE_CONTEXT`);
    /// `mode` its send mode.
    Isend {
        peer: u32,
        bytes: u64,
        tag: u32,
        context: u32,
        mode: SendMode,
    },
    /// Non-blocking receive matched on (context, source, tag) in posting order; `ANY` matches
    /// any source or tag, never another context.
    Irecv {
        peer: u32,
        tag: u32,
        context: u32,
    },
    /// One-sided write into the peer's memory; completes when delivered.
    Put {
        peer: u32,
        bytes: u64,
    },
    /// One-sided read: a request goes to the peer, whose HCA sends `bytes` back.
    Get {
        peer: u32,
        bytes: u64,
    },
    /// Waits for every request this rank has outstanding.
    WaitAll,
    /// Waits for one request, numbered from 0 in issue order within the current job run.
    Wait {
        request: u32,
    },
    Collective {
        kind: CollectiveKind,
        bytes: u64,
        group: Group,
    },
    /// A collective on a communicator of a replayed trace: `comm` indexes the job's
    /// `Communicators` (0 = the whole job); `seq` numbers it among the trace's collectives, the
    /// same on every member, and tags its messages (members of different communicators call
    /// different numbers of collectives, so a per-rank count would not agree).
    CommCollective {
        kind: CollectiveKind,
        bytes: u64,
        comm: u32,
        seq: u32,
        /// The root's rank in the communicator (its position among the members) for a
        /// broadcast or a reduce; 0 for the others.
        root: u32,
    },
    /// Ends an iteration: its time and time spent waiting are recorded for the rank.
    IterationEnd,
    /// The iteration's time (and wait, and sends) counts from here: what came before it in the
    /// iteration, a synchronising barrier say, is not part of what is measured.
    StartTimer,
}

impl Op {
    /// A send on MPI_COMM_WORLD (built-in workloads).
    pub fn isend(peer: u32, bytes: u64, tag: u32) -> Op {
        Op::Isend { peer, bytes, tag, context: WORLD_CONTEXT, mode: SendMode::Standard }
    }

    /// A receive on MPI_COMM_WORLD (built-in workloads).
    pub fn irecv(peer: u32, tag: u32) -> Op {
        Op::Irecv { peer, tag, context: WORLD_CONTEXT }
    }
}

/// Sends and receives at the same time with one peer each side, then waits: the building block
/// of most patterns (MPI_Sendrecv).
pub fn sendrecv(out: &mut Vec<Op>, to: u32, from: u32, bytes: u64, tag: u32) {
    out.push(Op::irecv(from, tag));
    out.push(Op::isend(to, bytes, tag));
    out.push(Op::WaitAll);
}

/// Numeric op codes of the packed form Python hands over for traces: 4 u64 words per op,
/// `[code, a, b, c]`.
pub mod packed {
    pub const COMPUTE: u64 = 0; // a = picoseconds
    pub const ISEND: u64 = 1; // a = peer | mode << 32 (0 standard, 1 synchronous, 2 buffered), b = bytes, c = tag | context << 32
    pub const IRECV: u64 = 2; // a = peer (ANY = u32::MAX), c = tag (ANY = u32::MAX) | context << 32
    pub const PUT: u64 = 3; // a = peer, b = bytes
    pub const GET: u64 = 4; // a = peer, b = bytes
    pub const WAITALL: u64 = 5;
    pub const WAIT: u64 = 6; // a = request number
    pub const COLLECTIVE: u64 = 7; // a = kind (0 barrier .. 5 allgather) | root << 32, b = bytes, c = comm | seq << 32 (Op::CommCollective)
    pub const ITERATION_END: u64 = 8;
}

impl Op {
    /// Decodes one packed op; `size` is the job size, `comms` how many communicators the trace
    /// lists besides the whole job.
    pub fn unpack(w: [u64; 4], size: u32, comms: u32) -> Result<Op, String> {
        let peer = |v: u64| -> Result<u32, String> {
            if v == ANY as u64 || v < size as u64 {
                Ok(v as u32)
            } else {
                Err(format!("peer {v} is not a rank of the job (0..{})", size - 1))
            }
        };
        let tag = |v: u64| -> Result<u32, String> {
            let v = v & 0xFFFF_FFFF;
            if v == ANY as u64 || v < COLLECTIVE_TAG_BASE as u64 {
                Ok(v as u32)
            } else {
                Err(format!("tag {v} is out of range (below 2^31)"))
            }
        };
        let context = |v: u64| -> Result<u32, String> {
            let c = (v >> 32) as u32;
            if c == COLLECTIVE_CONTEXT {
                Err(format!("context {c} is reserved for collectives' messages"))
            } else {
                Ok(c)
            }
        };
        Ok(match w[0] {
            packed::COMPUTE => Op::Compute { ps: w[1] },
            packed::ISEND => {
                let p = peer(w[1] & 0xFFFF_FFFF)?;
                if p == ANY {
                    return Err("a send needs a destination rank".into());
                }
                let mode = match w[1] >> 32 {
                    0 => SendMode::Standard,
                    1 => SendMode::Synchronous,
                    2 => SendMode::Buffered,
                    m => return Err(format!("unknown send mode {m} (0 standard, 1 synchronous, 2 buffered)")),
                };
                Op::Isend { peer: p, bytes: w[2], tag: tag(w[3])?, context: context(w[3])?, mode }
            }
            packed::IRECV => Op::Irecv { peer: peer(w[1])?, tag: tag(w[3])?, context: context(w[3])? },
            packed::PUT => Op::Put { peer: peer(w[1])?, bytes: w[2] },
            packed::GET => Op::Get { peer: peer(w[1])?, bytes: w[2] },
            packed::WAITALL => Op::WaitAll,
            packed::WAIT => Op::Wait { request: w[1] as u32 },
            packed::COLLECTIVE => {
                let kind = match w[1] & 0xFFFF_FFFF {
                    0 => CollectiveKind::Barrier,
                    1 => CollectiveKind::Bcast,
                    2 => CollectiveKind::Reduce,
                    3 => CollectiveKind::Allreduce,
                    4 => CollectiveKind::Alltoall,
                    5 => CollectiveKind::Allgather,
                    k => return Err(format!("unknown collective kind {k}")),
                };
                let (comm, seq) = (w[3] as u32, (w[3] >> 32) as u32);
                if comm > comms {
                    return Err(format!("communicator {comm} is not listed (the trace lists {comms})"));
                }
                let root = (w[1] >> 32) as u32;
                if root != 0 && !matches!(kind, CollectiveKind::Bcast | CollectiveKind::Reduce) {
                    return Err(format!("a root ({root}) for a collective without one"));
                }
                Op::CommCollective { kind, bytes: w[2], comm, seq, root }
            }
            packed::ITERATION_END => Op::IterationEnd,
            code => return Err(format!("unknown op code {code}")),
        })
    }
}

/// The communicators a replayed trace's collectives run on. Communicator 0 is the whole job;
/// communicator k >= 1 is the job ranks `members[offsets[k - 1] .. offsets[k]]`, in communicator
/// rank order (position 0 is the root of rooted collectives).
#[derive(Debug, Clone)]
pub struct Communicators {
    size: u32,
    offsets: Vec<usize>,
    members: Vec<u32>,
    /// Per communicator, its (member, position) pairs sorted by member, to find a rank's position.
    by_member: Vec<(u32, u32)>,
}

impl Communicators {
    /// Only the whole job (every non-trace workload).
    pub fn world(size: u32) -> Communicators {
        Communicators { size, offsets: vec![0], members: Vec::new(), by_member: Vec::new() }
    }

    /// Checks a packed table: offsets start at 0 and never go back, members are distinct ranks of
    /// the job.
    pub fn new(size: u32, offsets: &[u64], members: &[u64]) -> Result<Communicators, String> {
        if offsets.is_empty() && members.is_empty() {
            return Ok(Communicators::world(size));
        }
        if offsets.first() != Some(&0) || offsets.last().copied() != Some(members.len() as u64) {
            return Err("malformed communicator table (offsets do not cover the members)".into());
        }
        let mut table = Communicators::world(size);
        for (k, w) in offsets.windows(2).enumerate() {
            let comm = k + 1;
            if w[0] > w[1] {
                return Err(format!("communicator {comm}: offsets go backwards"));
            }
            let start = table.members.len();
            for &m in &members[w[0] as usize..w[1] as usize] {
                if m >= size as u64 {
                    return Err(format!("communicator {comm}: member {m} is not a rank of the job (0..{})", size - 1));
                }
                table.members.push(m as u32);
            }
            let mut sorted: Vec<(u32, u32)> =
                table.members[start..].iter().enumerate().map(|(p, &m)| (m, p as u32)).collect();
            sorted.sort_unstable();
            if let Some(d) = sorted.windows(2).find(|d| d[0].0 == d[1].0) {
                return Err(format!("communicator {comm}: rank {} is listed twice", d[0].0));
            }
            if sorted.is_empty() {
                return Err(format!("communicator {comm} has no members"));
            }
            table.by_member.extend(sorted);
            table.offsets.push(table.members.len());
        }
        Ok(table)
    }

    /// How many communicators are listed besides the whole job.
    pub fn listed(&self) -> u32 {
        self.offsets.len() as u32 - 1
    }

    pub fn size(&self, comm: u32) -> u32 {
        match comm {
            0 => self.size,
            c => (self.offsets[c as usize] - self.offsets[c as usize - 1]) as u32,
        }
    }

    /// `rank`'s position in `comm`, None if it is not a member.
    pub fn position(&self, comm: u32, rank: u32) -> Option<u32> {
        if comm == 0 {
            return (rank < self.size).then_some(rank);
        }
        let (a, b) = (self.offsets[comm as usize - 1], self.offsets[comm as usize]);
        let pairs = &self.by_member[a..b];
        pairs.binary_search_by_key(&rank, |&(m, _)| m).ok().map(|i| pairs[i].1)
    }

    /// The job rank at `position` of `comm`.
    #[inline]
    pub fn member(&self, comm: u32, position: u32) -> u32 {
        match comm {
            0 => position,
            c => self.members[self.offsets[c as usize - 1] + position as usize],
        }
    }
}

/// A trace's rank programs in packed form: rank r's ops are words
/// `4 * offsets[r] .. 4 * offsets[r + 1]` of `words`; the communicators its collectives name are
/// `comm_members[comm_offsets[k - 1] .. comm_offsets[k]]` (both empty: only the whole job).
#[derive(Debug, Clone, Default)]
pub struct PackedTrace {
    pub offsets: Vec<u64>,
    pub words: Vec<u64>,
    pub comm_offsets: Vec<u64>,
    pub comm_members: Vec<u64>,
}

impl PackedTrace {
    /// Decodes every rank's ops and the communicators; errors name the rank and the op.
    pub fn unpack(&self, size: u32) -> Result<(Vec<Vec<Op>>, Communicators), String> {
        if self.offsets.len() != size as usize + 1 {
            return Err(format!("the trace has {} ranks but the job has {size}", self.offsets.len().saturating_sub(1)));
        }
        if !self.words.len().is_multiple_of(4) || self.offsets.last().copied() != Some(self.words.len() as u64 / 4) {
            return Err("malformed packed trace (offsets do not cover the ops)".into());
        }
        let comms = Communicators::new(size, &self.comm_offsets, &self.comm_members)?;
        let ops = (0..size as usize)
            .map(|r| {
                let (a, b) = (self.offsets[r] as usize, self.offsets[r + 1] as usize);
                if a > b {
                    return Err(format!("rank {r}: offsets go backwards"));
                }
                (a..b)
                    .map(|i| {
                        let w =
                            [self.words[4 * i], self.words[4 * i + 1], self.words[4 * i + 2], self.words[4 * i + 3]];
                        let op = Op::unpack(w, size, comms.listed());
                        match op {
                            Ok(Op::CommCollective { comm, .. }) if comms.position(comm, r as u32).is_none() => {
                                Err(format!("rank {r} is not a member of communicator {comm}"))
                            }
                            Ok(Op::CommCollective { comm, root, .. }) if root >= comms.size(comm) => {
                                Err(format!("root {root} is not a rank of communicator {comm}"))
                            }
                            _ => op,
                        }
                        .map_err(|e| format!("rank {r}, op {}: {e}", i - a))
                    })
                    .collect()
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok((ops, comms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_of_a_row_major_grid() {
        // 3 rows x 4 columns; rank 6 is row 1, column 2.
        let row = Group { stride: 1, size: 4 };
        let column = Group { stride: 4, size: 3 };
        assert_eq!(row.position(6), 2);
        assert_eq!((0..4).map(|p| row.member(6, p)).collect::<Vec<_>>(), vec![4, 5, 6, 7]);
        assert_eq!(column.position(6), 1);
        assert_eq!((0..3).map(|p| column.member(6, p)).collect::<Vec<_>>(), vec![2, 6, 10]);
    }

    fn packed(ops: &[[u64; 4]], ranks: &[usize], comm_offsets: Vec<u64>, comm_members: Vec<u64>) -> PackedTrace {
        let mut offsets = vec![0u64];
        let mut words = Vec::new();
        let mut i = 0;
        for &n in ranks {
            for op in &ops[i..i + n] {
                words.extend_from_slice(op);
            }
            i += n;
            offsets.push(i as u64);
        }
        PackedTrace { offsets, words, comm_offsets, comm_members }
    }

    #[test]
    fn sends_and_receives_carry_their_context_above_the_tag() {
        let (send, recv) = (packed::ISEND, packed::IRECV);
        let ops = [[send, 1, 8, 7 | 3 << 32], [recv, ANY as u64, 0, ANY as u64 | 3 << 32]];
        let t = packed(&ops, &[1, 1], vec![], vec![]);
        let (ops, _) = t.unpack(2).unwrap();
        assert_eq!(ops[0][0], Op::Isend { peer: 1, bytes: 8, tag: 7, context: 3, mode: SendMode::Standard });
        assert_eq!(ops[1][0], Op::Irecv { peer: ANY, tag: ANY, context: 3 });
        // The collectives' context is the engine's own.
        let bad = packed(&[[send, 1, 8, (COLLECTIVE_CONTEXT as u64) << 32]], &[1, 0], vec![], vec![]);
        assert!(bad.unpack(2).unwrap_err().contains("reserved for collectives"));
    }

    #[test]
    fn communicators_list_members_in_rank_order() {
        // 4 ranks; communicator 1 = {3, 1} (rank 3 first), communicator 2 = {0, 2}.
        let c = Communicators::new(4, &[0, 2, 4], &[3, 1, 0, 2]).unwrap();
        assert_eq!(c.listed(), 2);
        assert_eq!((c.size(0), c.size(1), c.size(2)), (4, 2, 2));
        assert_eq!((c.position(1, 3), c.position(1, 1), c.position(1, 0)), (Some(0), Some(1), None));
        assert_eq!((c.member(1, 0), c.member(1, 1), c.member(2, 1), c.member(0, 3)), (3, 1, 2, 3));
        assert_eq!(c.position(0, 2), Some(2));
    }

    #[test]
    fn bad_communicator_tables_are_refused() {
        assert!(Communicators::new(4, &[0, 2], &[1, 4]).unwrap_err().contains("member 4 is not a rank"));
        assert!(Communicators::new(4, &[0, 2], &[1, 1]).unwrap_err().contains("rank 1 is listed twice"));
        assert!(Communicators::new(4, &[0, 0], &[]).unwrap_err().contains("no members"));
        assert!(Communicators::new(4, &[0, 3], &[1, 2]).unwrap_err().contains("malformed"));
    }

    #[test]
    fn packed_collectives_name_their_communicator_and_sequence() {
        let c = packed::COLLECTIVE;
        // Ranks 0 and 2 allreduce on communicator 1 = {0, 2}; every rank then barriers on the job.
        let ops = [[c, 3, 64, 1], [c, 0, 0, 1 << 32], [c, 0, 0, 1 << 32], [c, 3, 64, 1], [c, 0, 0, 1 << 32]];
        let t = packed(&ops, &[2, 1, 2], vec![0, 2], vec![0, 2]);
        let (ops, comms) = t.unpack(3).unwrap();
        assert_eq!(
            ops[0][0],
            Op::CommCollective { kind: CollectiveKind::Allreduce, bytes: 64, comm: 1, seq: 0, root: 0 }
        );
        assert_eq!(ops[1][0], Op::CommCollective { kind: CollectiveKind::Barrier, bytes: 0, comm: 0, seq: 1, root: 0 });
        assert_eq!(comms.position(1, 2), Some(1));
        // Rank 1 is not a member of communicator 1; communicator 2 is not listed.
        let bad = packed(&[[c, 3, 64, 1]], &[0, 1, 0], vec![0, 2], vec![0, 2]);
        assert_eq!(bad.unpack(3).unwrap_err(), "rank 1, op 0: rank 1 is not a member of communicator 1");
        let bad = packed(&[[c, 3, 64, 2]], &[1, 0, 0], vec![0, 2], vec![0, 2]);
        assert!(bad.unpack(3).unwrap_err().contains("communicator 2 is not listed"));
        // A broadcast's root rides above the kind; it must be a rank of the communicator, and
        // only broadcasts and reduces have one.
        let rooted = packed(&[[c, 1 | 1 << 32, 8, 1]], &[1, 0, 0], vec![0, 2], vec![0, 2]);
        assert_eq!(
            rooted.unpack(3).unwrap().0[0][0],
            Op::CommCollective { kind: CollectiveKind::Bcast, bytes: 8, comm: 1, seq: 0, root: 1 }
        );
        let bad = packed(&[[c, 1 | 2 << 32, 8, 1]], &[1, 0, 0], vec![0, 2], vec![0, 2]);
        assert_eq!(bad.unpack(3).unwrap_err(), "rank 0, op 0: root 2 is not a rank of communicator 1");
        let bad = packed(&[[c, 3 | 1 << 32, 8, 1]], &[1, 0, 0], vec![0, 2], vec![0, 2]);
        assert!(bad.unpack(3).unwrap_err().contains("a root (1) for a collective without one"));
    }
}
