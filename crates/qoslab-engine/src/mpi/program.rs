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
    Compute { ps: Time },
    /// Non-blocking two-sided send; completes locally (eager) or once delivered (rendezvous).
    Isend { peer: u32, bytes: u64, tag: u32 },
    /// Non-blocking receive matched on (source, tag) in posting order; `ANY` matches all.
    Irecv { peer: u32, tag: u32 },
    /// One-sided write into the peer's memory; completes when delivered.
    Put { peer: u32, bytes: u64 },
    /// One-sided read: a request goes to the peer, whose HCA sends `bytes` back.
    Get { peer: u32, bytes: u64 },
    /// Waits for every request this rank has outstanding.
    WaitAll,
    /// Waits for one request, numbered from 0 in issue order within the current job run.
    Wait { request: u32 },
    Collective { kind: CollectiveKind, bytes: u64, group: Group },
    /// Ends an iteration: its time and time spent waiting are recorded for the rank.
    IterationEnd,
}

/// Sends and receives at the same time with one peer each side, then waits: the building block
/// of most patterns (MPI_Sendrecv).
pub fn sendrecv(out: &mut Vec<Op>, to: u32, from: u32, bytes: u64, tag: u32) {
    out.push(Op::Irecv { peer: from, tag });
    out.push(Op::Isend { peer: to, bytes, tag });
    out.push(Op::WaitAll);
}

/// Numeric op codes of the packed form Python hands over for traces: 4 u64 words per op,
/// `[code, a, b, c]`.
pub mod packed {
    pub const COMPUTE: u64 = 0; // a = picoseconds
    pub const ISEND: u64 = 1; // a = peer, b = bytes, c = tag
    pub const IRECV: u64 = 2; // a = peer (ANY = u32::MAX), c = tag
    pub const PUT: u64 = 3; // a = peer, b = bytes
    pub const GET: u64 = 4; // a = peer, b = bytes
    pub const WAITALL: u64 = 5;
    pub const WAIT: u64 = 6; // a = request number
    pub const COLLECTIVE: u64 = 7; // a = kind (0 barrier .. 5 allgather), b = bytes, c = group size (0 = world)
    pub const ITERATION_END: u64 = 8;
}

impl Op {
    /// Decodes one packed op; `size` is the job size (for the world group).
    pub fn unpack(w: [u64; 4], size: u32) -> Result<Op, String> {
        let peer = |v: u64| -> Result<u32, String> {
            if v == ANY as u64 || v < size as u64 {
                Ok(v as u32)
            } else {
                Err(format!("peer {v} is not a rank of the job (0..{})", size - 1))
            }
        };
        let tag = |v: u64| -> Result<u32, String> {
            if v == ANY as u64 || v < COLLECTIVE_TAG_BASE as u64 {
                Ok(v as u32)
            } else {
                Err(format!("tag {v} is out of range (below 2^31)"))
            }
        };
        Ok(match w[0] {
            packed::COMPUTE => Op::Compute { ps: w[1] },
            packed::ISEND => {
                let p = peer(w[1])?;
                if p == ANY {
                    return Err("a send needs a destination rank".into());
                }
                Op::Isend { peer: p, bytes: w[2], tag: tag(w[3])? }
            }
            packed::IRECV => Op::Irecv { peer: peer(w[1])?, tag: tag(w[3])? },
            packed::PUT => Op::Put { peer: peer(w[1])?, bytes: w[2] },
            packed::GET => Op::Get { peer: peer(w[1])?, bytes: w[2] },
            packed::WAITALL => Op::WaitAll,
            packed::WAIT => Op::Wait { request: w[1] as u32 },
            packed::COLLECTIVE => {
                let kind = match w[1] {
                    0 => CollectiveKind::Barrier,
                    1 => CollectiveKind::Bcast,
                    2 => CollectiveKind::Reduce,
                    3 => CollectiveKind::Allreduce,
                    4 => CollectiveKind::Alltoall,
                    5 => CollectiveKind::Allgather,
                    k => return Err(format!("unknown collective kind {k}")),
                };
                Op::Collective { kind, bytes: w[2], group: Group::world(size) }
            }
            packed::ITERATION_END => Op::IterationEnd,
            code => return Err(format!("unknown op code {code}")),
        })
    }
}

/// A trace's rank programs in packed form: rank r's ops are words
/// `4 * offsets[r] .. 4 * offsets[r + 1]` of `words`.
#[derive(Debug, Clone, Default)]
pub struct PackedTrace {
    pub offsets: Vec<u64>,
    pub words: Vec<u64>,
}

impl PackedTrace {
    /// Decodes every rank's ops; errors name the rank and the op.
    pub fn unpack(&self, size: u32) -> Result<Vec<Vec<Op>>, String> {
        if self.offsets.len() != size as usize + 1 {
            return Err(format!("the trace has {} ranks but the job has {size}", self.offsets.len().saturating_sub(1)));
        }
        if self.words.len() % 4 != 0 || self.offsets.last().copied() != Some(self.words.len() as u64 / 4) {
            return Err("malformed packed trace (offsets do not cover the ops)".into());
        }
        (0..size as usize)
            .map(|r| {
                let (a, b) = (self.offsets[r] as usize, self.offsets[r + 1] as usize);
                if a > b {
                    return Err(format!("rank {r}: offsets go backwards"));
                }
                (a..b)
                    .map(|i| {
                        let w = [self.words[4 * i], self.words[4 * i + 1], self.words[4 * i + 2], self.words[4 * i + 3]];
                        Op::unpack(w, size).map_err(|e| format!("rank {r}, op {}: {e}", i - a))
                    })
                    .collect()
            })
            .collect()
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
}
