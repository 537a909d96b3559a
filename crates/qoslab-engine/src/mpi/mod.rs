//! The MPI layer: ranks run their programs on the hosts of their jobs, exchanging messages over
//! the fabric (or shared memory inside a node) with MPI's matching and protocols.
//!
//! - Two-sided messages match on (context, source, tag) in posting order, `ANY` matching any
//!   source or tag; the context is the communicator's (collectives' internal messages have one of
//!   their own), as MPI's context ids keep communicators apart.
//! - Eager below `eager_threshold_bytes`: the data goes at once and the send completes when the
//!   HCA has put it on the wire. Rendezvous above: an RTS crosses the network, the receiver
//!   answers with a CTS once a matching receive is posted, then the data goes; both sides
//!   complete when it has arrived.
//! - Send modes: a synchronous eager send completes when the receiver's acknowledgement of the
//!   match arrives (MPICH's eager sync protocol); a buffered send completes at once and its
//!   message goes on without it.
//! - One-sided put completes when delivered; a get sends a request whose target HCA answers with
//!   the data, without the target's CPU.
//! - Ranks on one host share its HCA; messages between them take the shared-memory path
//!   (latency + size / bandwidth, no fabric).
//!
//! The layer knows nothing of packets: it talks to the fabric through `Transport`.

pub mod collectives;
pub mod gpcnet;
pub mod program;
pub mod skeletons;
pub mod sl_policy;
pub mod workloads;

use crate::config::{JobConfig, MpiConfig};
use crate::units::{ns_to_ps, ps_to_ns, Rate, Time};
use collectives::{collective_tag, push_step_ops, Algorithms, AllreduceAlgorithm, AlltoallAlgorithm};
use program::{CollectiveKind, Communicators, Group, Op, PackedTrace, SendMode, ANY};
use serde_json::{json, Value};
use sl_policy::SlPolicy;
use std::collections::HashMap;
use workloads::{JobShape, Program};

/// What the MPI layer asks of the fabric and the event list.
pub trait Transport {
    /// Sends `bytes` of payload from one host to another; `message` comes back through
    /// `Mpi::on_arrival` when its last byte has arrived, and through `Mpi::on_injected` when the
    /// sending HCA has started sending its last packet (only if `notify_injected`). `ranks` are
    /// the sending and receiving global ranks: the connection whose queue pair it takes.
    #[allow(clippy::too_many_arguments)]
    fn send(
        &mut self,
        src_host: u32,
        dst_host: u32,
        ranks: (u32, u32),
        sl: u8,
        bytes: u64,
        job: u32,
        message: u32,
        notify_injected: bool,
    );
    /// Calls `Mpi::on_arrival(message)` at `at` (shared-memory deliveries).
    fn schedule_arrival(&mut self, at: Time, message: u32);
    /// Calls `Mpi::on_resume(rank)` at `at` (end of a compute phase).
    fn schedule_resume(&mut self, at: Time, rank: u32);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Eager,
    Rts,
    Cts,
    RendezvousData,
    Put,
    GetRequest,
    GetData,
    /// A synchronous eager send's acknowledgement: its receive has matched.
    SyncAck,
}

/// A message of the MPI layer in flight (data or protocol control). Ranks are global indices.
/// Every protocol part of one send (RTS, CTS, data; get request and data) carries the SL chosen
/// when the send was issued, and that time.
#[derive(Debug, Clone, Copy)]
struct Message {
    kind: Kind,
    sl: u8,
    src: u32,
    dst: u32,
    tag: u32,
    /// Matching context (`program::WORLD_CONTEXT`, a trace communicator's, `COLLECTIVE_CONTEXT`).
    context: u32,
    /// The send's mode (standard for puts and gets).
    mode: SendMode,
    bytes: u64,
    send_request: u32,
    recv_request: u32,
    issued: Time,
    /// Rendezvous (RTS, CTS, data): how long the RTS waited at the receiver for a matching
    /// receive, the receiver's lateness rather than the network's; 0 for the other kinds.
    held: Time,
    /// Eager data and RTS: the message's number among those of its (src, dst) pair in flight
    /// (`PairOrder`); 0 for the other kinds.
    seq: u32,
}

/// MPI's non-overtaking rule where paths can reorder: SLs chosen per message, adaptive routes,
/// and shared-memory copies that take longer for larger messages. Each ordered pair of ranks
/// numbers its eager messages and RTSs, and the receiver matches them in that order; one that
/// arrives before an earlier one waits for it, as MPI libraries' sequence numbers make it. A
/// pair is kept only while it has messages in flight, so memory follows the traffic in flight,
/// not the number of pairs (an all-to-all on thousands of ranks).
#[derive(Debug, Default)]
struct PairOrder {
    /// (src, dst) -> (messages numbered, messages matched in order).
    counts: HashMap<u64, (u32, u32)>,
    /// (src, dst) -> (number, message) of those that arrived early.
    early: HashMap<u64, Vec<(u32, u32)>>,
}

impl PairOrder {
    fn key(src: u32, dst: u32) -> u64 {
        (src as u64) << 32 | dst as u64
    }

    /// The number of the next message from `src` to `dst`.
    fn number(&mut self, src: u32, dst: u32) -> u32 {
        let counts = self.counts.entry(Self::key(src, dst)).or_insert((0, 0));
        counts.0 += 1;
        counts.0 - 1
    }

    /// Whether message number `seq` from `src` to `dst` is the next to match; if not, it is kept
    /// until those before it have matched.
    fn in_turn(&mut self, src: u32, dst: u32, seq: u32, message: u32) -> bool {
        let key = Self::key(src, dst);
        let turn = self.counts.get(&key).expect("a numbered message's pair is kept while it is in flight").1;
        if seq != turn {
            self.early.entry(key).or_default().push((seq, message));
        }
        seq == turn
    }

    /// The pair's message in turn has matched: the message now in turn if it already arrived.
    fn matched(&mut self, src: u32, dst: u32) -> Option<u32> {
        let key = Self::key(src, dst);
        let counts = self.counts.get_mut(&key).expect("a numbered message's pair is kept while it is in flight");
        counts.1 += 1;
        let turn = counts.1;
        if counts.0 == turn {
            self.counts.remove(&key);
            return None;
        }
        let early = self.early.get_mut(&key)?;
        let i = early.iter().position(|&(seq, _)| seq == turn)?;
        let (_, message) = early.swap_remove(i);
        if early.is_empty() {
            self.early.remove(&key);
        }
        Some(message)
    }
}

/// A receive posted and not yet matched.
#[derive(Debug, Clone, Copy)]
struct Posted {
    peer: u32,
    tag: u32,
    context: u32,
    request: u32,
}

/// A message (eager data or RTS) that arrived before its receive was posted.
#[derive(Debug, Clone, Copy)]
struct Unexpected {
    peer: u32,
    tag: u32,
    context: u32,
    message: u32,
    /// When it arrived (in its pair's order): a rendezvous's wait for its receive counts from here.
    arrived: Time,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Running,
    Computing,
    WaitingAll,
    WaitingOne(u32),
    Finished,
}

/// Who takes part in a collective: a strided group of the job, or a trace's communicator.
#[derive(Debug, Clone, Copy)]
enum Members {
    Strided(Group),
    Comm(u32),
}

/// The collective a rank is inside, expanded one step at a time into `Rank::collective_ops`.
#[derive(Debug, Clone, Copy)]
struct ActiveCollective {
    kind: CollectiveKind,
    bytes: u64,
    members: Members,
    /// The rank's position among the members, and their number.
    position: u32,
    size: u32,
    /// The root's position (broadcast, reduce; 0 otherwise): the algorithms run from root 0 on
    /// positions rotated by it.
    root: u32,
    step: u32,
    tag_seq: u32,
}

struct Rank {
    job: u32,
    /// Rank within its job.
    local: u32,
    host: u32,
    state: State,
    ops: Vec<Op>,
    pc: usize,
    collective: Option<ActiveCollective>,
    collective_ops: Vec<Op>,
    collective_pc: usize,
    collectives_called: u32,
    iteration: u32,
    /// The current iteration's ops have been generated and not yet recorded as done.
    in_iteration: bool,
    iteration_start: Time,
    iteration_wait: Time,
    /// Fabric sends of this rank delivered during the current iteration, and their summed
    /// latency (issue to last byte delivered): how late its messages reach the others.
    iteration_sends: u32,
    iteration_send_latency: Time,
    wait_since: Time,
    next_request: u32,
    /// Requests issued and not yet complete (few at a time, so a list beats a set).
    outstanding: Vec<u32>,
    posted: Vec<Posted>,
    unexpected: Vec<Unexpected>,
}

struct Job {
    name: String,
    first_rank: u32,
    size: u32,
    nodes: u32,
    program: Box<dyn Program>,
    /// The communicators of a replayed trace (only the whole job for other workloads).
    comms: Communicators,
    algorithms: Algorithms,
    sl_policy: SlPolicy,
    /// Payload bytes issued per SL in the first run.
    bytes_by_sl: [u64; 16],
    restart: bool,
    /// `JobConfig::record_iterations`.
    record_iterations: bool,
    run: u32,
    run_start: Time,
    ranks_finished: u32,
    runs_completed: u32,
    runtime: Option<Time>,
    iterations_completed: u64,
    payload_bytes_sent: u64,
    messages_sent: u64,
    /// Rank iterations of later runs left out of the ranks table (`MAX_RESTART_RECORDS`).
    iterations_not_recorded: u64,
}

/// Iteration records (about 48 bytes each) kept at most before a restarted job's later runs
/// stop being recorded; a job's first run, which its figures come from, is always recorded.
pub const MAX_RESTART_RECORDS: usize = 1 << 22;

/// One row of the per-rank, per-iteration table.
#[derive(Debug, Clone, Copy)]
pub struct IterationRecord {
    pub job: u32,
    pub rank: u32,
    pub run: u32,
    pub iteration: u32,
    pub start: Time,
    pub end: Time,
    pub wait: Time,
    /// Sends of the rank delivered during the iteration, and the sum of their latencies.
    pub sends: u32,
    pub send_latency: Time,
}

pub struct Mpi {
    eager_threshold: u64,
    control_bytes: u64,
    shm_latency: Time,
    shm_rate: Rate,
    jobs: Vec<Job>,
    ranks: Vec<Rank>,
    messages: crate::sim::state::Slab<Message>,
    order: PairOrder,
    /// MPI messages handed to shared memory or the fabric and not yet arrived.
    in_flight: u32,
    /// Ranks in a compute phase (they will act again without any message).
    computing: u32,
    /// Ranks of unfinished job runs that are blocked in a wait.
    waiting: u32,
    /// Ranks not Finished.
    active: u32,
    jobs_completed_once: u32,
    pub records: Vec<IterationRecord>,
    deadlock: Option<String>,
}

/// Purpose index of the jobs' random streams (see `traffic::stream_rng`).
pub const RNG_JOBS: u64 = 10;
/// Purpose index of the jobs' name-keyed streams (`JobShape::named_rng`).
pub const RNG_JOB_NAMES: u64 = 11;

/// FNV-1a: a stable hash of a job's name (std's hasher may change between Rust releases).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

impl Mpi {
    pub fn new(
        cfg: &MpiConfig,
        jobs: &[JobConfig],
        traces: &HashMap<usize, PackedTrace>,
        seed: u64,
        host_count: u32,
    ) -> Result<Mpi, crate::ConfigError> {
        use crate::ConfigError;
        let mut built = Vec::new();
        let mut ranks = Vec::new();
        for (j, jc) in jobs.iter().enumerate() {
            let key = |k: &str| format!("jobs[{j}].{k}");
            if jc.hosts.is_empty() {
                return Err(ConfigError::new(key("hosts"), "a job needs at least one host"));
            }
            if let Some(h) = jc.hosts.iter().find(|&&h| h >= host_count) {
                return Err(ConfigError::new(key("hosts"), format!("host {h} does not exist (0..{})", host_count - 1)));
            }
            if jc.ranks_per_node == 0 {
                return Err(ConfigError::new(key("ranks_per_node"), "expected at least 1"));
            }
            if jc.sl > 15 {
                return Err(ConfigError::new(key("sl"), "expected a service level 0..15"));
            }
            // Rank ids travel in events' id bits: every job's ranks together must fit there.
            let total = ranks.len() as u64 + jc.hosts.len() as u64 * jc.ranks_per_node as u64;
            if total > crate::queue::MAX_EVENT_ID as u64 {
                return Err(ConfigError::new(
                    key("ranks_per_node"),
                    format!("the jobs have {total} ranks together, beyond the engine's {}", crate::queue::MAX_EVENT_ID),
                ));
            }
            let size = jc.hosts.len() as u32 * jc.ranks_per_node;
            let named_rng = crate::traffic::stream_rng(seed, RNG_JOB_NAMES, fnv1a(jc.name.as_bytes()));
            let shape = JobShape {
                size,
                ranks_per_node: jc.ranks_per_node,
                rng: crate::traffic::stream_rng(seed, RNG_JOBS, j as u64),
                named_rng,
            };
            let kind = jc.workload.get("kind").and_then(|k| k.as_str()).unwrap_or("");
            let mut params = jc.workload.clone();
            if let Some(m) = params.as_object_mut() {
                m.remove("kind");
            }
            let mut comms = Communicators::world(size);
            let program: Result<Box<dyn Program>, String> = if kind == "trace" {
                match traces.get(&j) {
                    Some(packed) => packed.unpack(size).and_then(|(ops, c)| {
                        comms = c;
                        workloads::Trace::new(ops).map(|t| Box::new(t) as Box<dyn Program>)
                    }),
                    None => Err("no trace program was supplied for this job".into()),
                }
            } else {
                let copy = JobShape {
                    size,
                    ranks_per_node: jc.ranks_per_node,
                    rng: shape.rng.clone(),
                    named_rng: shape.named_rng.clone(),
                };
                match workloads::build(kind, &params, copy).or_else(|| skeletons::build(kind, &params, shape)) {
                    Some(p) => p,
                    None => Err(format!("unknown workload {kind:?}")),
                }
            };
            let program = program.map_err(|m| ConfigError::new(key("workload"), m))?;
            let sl_policy = SlPolicy::new(&jc.sl_policy, jc.sl, size, program.iterations(), &key("sl_policy"))?;
            let algorithms = Algorithms {
                allreduce: match jc.collectives.allreduce.as_str() {
                    "recursive-doubling" => AllreduceAlgorithm::RecursiveDoubling,
                    "ring" => AllreduceAlgorithm::Ring,
                    other => {
                        return Err(ConfigError::new(
                            key("collectives.allreduce"),
                            format!("expected \"recursive-doubling\" or \"ring\", got {other:?}"),
                        ))
                    }
                },
                alltoall: match jc.collectives.alltoall.as_str() {
                    "pairwise" => AlltoallAlgorithm::Pairwise,
                    "bruck" => AlltoallAlgorithm::Bruck,
                    other => {
                        return Err(ConfigError::new(
                            key("collectives.alltoall"),
                            format!("expected \"pairwise\" or \"bruck\", got {other:?}"),
                        ))
                    }
                },
            };
            let first_rank = ranks.len() as u32;
            for local in 0..size {
                ranks.push(Rank {
                    job: j as u32,
                    local,
                    host: jc.hosts[(local / jc.ranks_per_node) as usize],
                    state: State::Running,
                    ops: Vec::new(),
                    pc: 0,
                    collective: None,
                    collective_ops: Vec::new(),
                    collective_pc: 0,
                    collectives_called: 0,
                    iteration: 0,
                    in_iteration: false,
                    iteration_start: 0,
                    iteration_wait: 0,
                    iteration_sends: 0,
                    iteration_send_latency: 0,
                    wait_since: 0,
                    next_request: 0,
                    outstanding: Vec::new(),
                    posted: Vec::new(),
                    unexpected: Vec::new(),
                });
            }
            built.push(Job {
                name: jc.name.clone(),
                first_rank,
                size,
                nodes: jc.hosts.len() as u32,
                program,
                comms,
                algorithms,
                sl_policy,
                bytes_by_sl: [0; 16],
                restart: jc.restart,
                record_iterations: jc.record_iterations,
                run: 0,
                run_start: 0,
                ranks_finished: 0,
                runs_completed: 0,
                runtime: None,
                iterations_completed: 0,
                payload_bytes_sent: 0,
                messages_sent: 0,
                iterations_not_recorded: 0,
            });
        }
        // Rates and latencies: checked with the rest of the config (`EngineConfig::validate`).
        let active = ranks.len() as u32;
        Ok(Mpi {
            eager_threshold: cfg.eager_threshold_bytes,
            control_bytes: cfg.control_bytes,
            shm_latency: ns_to_ps(cfg.shm_latency_ns),
            shm_rate: Rate::from_gbps(cfg.shm_gbps),
            jobs: built,
            ranks,
            messages: crate::sim::state::Slab::new(),
            order: PairOrder::default(),
            in_flight: 0,
            computing: 0,
            waiting: 0,
            active,
            jobs_completed_once: 0,
            records: Vec::new(),
            deadlock: None,
        })
    }

    /// Every job has completed at least once: the run is over.
    pub fn all_completed_once(&self) -> bool {
        self.jobs_completed_once == self.jobs.len() as u32
    }

    /// Set when no rank can ever make progress again.
    pub fn deadlock(&self) -> Option<&str> {
        self.deadlock.as_deref()
    }

    /// Starts every rank's program at time `now`.
    pub fn start(&mut self, now: Time, t: &mut dyn Transport) {
        for r in 0..self.ranks.len() as u32 {
            self.ranks[r as usize].iteration_start = now;
            self.advance(r, now, t);
        }
        self.check_deadlock();
    }

    pub fn on_resume(&mut self, rank: u32, now: Time, t: &mut dyn Transport) {
        let r = &mut self.ranks[rank as usize];
        debug_assert_eq!(r.state, State::Computing);
        r.state = State::Running;
        self.computing -= 1;
        self.advance(rank, now, t);
        self.check_deadlock();
    }

    /// The sending HCA has started sending the message's last packet: an eager send is complete
    /// (its data has left the user's buffer; docs/jobs.md).
    pub fn on_injected(&mut self, message: u32, now: Time, t: &mut dyn Transport) {
        let m = self.messages.items[message as usize];
        if m.kind == Kind::Eager {
            self.complete(m.src, m.send_request, now, t);
            self.check_deadlock();
        }
    }

    /// The last byte of `message` has arrived at its destination.
    pub fn on_arrival(&mut self, message: u32, now: Time, t: &mut dyn Transport) {
        self.in_flight -= 1;
        let m = self.messages.items[message as usize];
        match m.kind {
            Kind::Eager | Kind::RendezvousData | Kind::Put => {
                self.observe(m.src, m.dst, m.bytes, now - m.issued, now - m.issued - m.held)
            }
            Kind::GetData => self.observe(m.dst, m.src, m.bytes, now - m.issued, now - m.issued),
            Kind::Rts | Kind::Cts | Kind::GetRequest | Kind::SyncAck => {}
        }
        match m.kind {
            Kind::Eager | Kind::Rts => {
                // Data or RTS arrive at the receiving rank: in the pair's order (PairOrder),
                // matched or queued as unexpected.
                if self.order.in_turn(m.src, m.dst, m.seq, message) {
                    let mut next = Some(message);
                    while let Some(message) = next {
                        next = self.order.matched(m.src, m.dst);
                        self.match_or_queue(message, now, t);
                    }
                }
                return self.check_deadlock();
            }
            Kind::Cts => {
                // Back at the sender: the data follows.
                self.release(message);
                let data = self.new_message(Message { kind: Kind::RendezvousData, src: m.dst, dst: m.src, ..m });
                self.transmit(data, m.dst, m.src, m.bytes, false, now, t);
            }
            Kind::RendezvousData => {
                self.release(message);
                // m.src is the data's sender (the original sender of the rendezvous).
                self.complete(m.dst, m.recv_request, now, t);
                if m.mode != SendMode::Buffered {
                    self.complete(m.src, m.send_request, now, t);
                }
            }
            Kind::SyncAck => {
                // Back at the synchronous send's rank (m.dst): its receive has started.
                self.release(message);
                self.complete(m.dst, m.send_request, now, t);
            }
            Kind::Put => {
                self.release(message);
                self.complete(m.src, m.send_request, now, t);
            }
            Kind::GetRequest => {
                self.release(message);
                // The target's HCA answers on its own; the data travels back at the get's SL.
                let data = self.new_message(Message { kind: Kind::GetData, src: m.dst, dst: m.src, ..m });
                self.transmit(data, m.dst, m.src, m.bytes, false, now, t);
            }
            Kind::GetData => {
                self.release(message);
                self.complete(m.dst, m.send_request, now, t);
            }
        }
        self.check_deadlock();
    }

    /// An eager message or an RTS, in its pair's order, meets a posted receive or waits for one.
    fn match_or_queue(&mut self, message: u32, now: Time, t: &mut dyn Transport) {
        let m = self.messages.items[message as usize];
        let src_local = self.ranks[m.src as usize].local;
        let r = &mut self.ranks[m.dst as usize];
        match r.posted.iter().position(|p| matches(p, src_local, m.tag, m.context)) {
            Some(i) => {
                let posted = r.posted.remove(i);
                self.matched(message, posted.request, 0, now, t);
            }
            None => {
                r.unexpected.push(Unexpected { peer: src_local, tag: m.tag, context: m.context, message, arrived: now })
            }
        }
    }

    /// An eager message or an RTS met its receive (`request` at the receiver), after waiting
    /// `held` for it.
    fn matched(&mut self, message: u32, request: u32, held: Time, now: Time, t: &mut dyn Transport) {
        let m = self.messages.items[message as usize];
        match m.kind {
            Kind::Eager => {
                self.release(message);
                if m.mode == SendMode::Synchronous {
                    let ack = self.new_message(Message { kind: Kind::SyncAck, src: m.dst, dst: m.src, ..m });
                    self.transmit(ack, m.dst, m.src, self.control_bytes, false, now, t);
                }
                self.complete(m.dst, request, now, t);
            }
            Kind::Rts => {
                self.release(message);
                let cts = self.new_message(Message {
                    kind: Kind::Cts,
                    src: m.dst,
                    dst: m.src,
                    recv_request: request,
                    held,
                    ..m
                });
                self.transmit(cts, m.dst, m.src, self.control_bytes, false, now, t);
            }
            _ => unreachable!("only eager data and RTS are matched"),
        }
    }

    fn new_message(&mut self, m: Message) -> u32 {
        let id = self.messages.insert(m);
        assert!(id <= crate::queue::MAX_EVENT_ID, "too many MPI messages in flight for the event encoding");
        id
    }

    fn release(&mut self, message: u32) {
        self.messages.remove(message);
    }

    /// A delivered send's latency (issue to delivery), counted for its sender's iteration record,
    /// and its network part (`network`: without a rendezvous's wait for the receive, application
    /// imbalance that no SL can help), told to its job's SL policy. Fabric messages only: the
    /// shared-memory path has no SL and no network.
    fn observe(&mut self, origin: u32, peer: u32, bytes: u64, latency: Time, network: Time) {
        let peer_host = self.ranks[peer as usize].host;
        let o = &mut self.ranks[origin as usize];
        if o.host != peer_host {
            o.iteration_sends += 1;
            o.iteration_send_latency += latency;
            let (job, local, peer_local) = (o.job, o.local, self.ranks[peer as usize].local);
            let p = &mut self.jobs[job as usize].sl_policy;
            p.observe(local, peer_local, bytes, network);
        }
    }

    /// Hands a message to shared memory (same host) or the fabric, at the message's SL.
    #[allow(clippy::too_many_arguments)]
    fn transmit(
        &mut self,
        message: u32,
        from: u32,
        to: u32,
        bytes: u64,
        notify: bool,
        now: Time,
        t: &mut dyn Transport,
    ) {
        let sl = self.messages.items[message as usize].sl;
        let (src_host, dst_host) = (self.ranks[from as usize].host, self.ranks[to as usize].host);
        let job = self.ranks[from as usize].job;
        self.in_flight += 1;
        if src_host == dst_host {
            let copy = self.shm_rate.serialization(bytes.min(u32::MAX as u64) as u32);
            t.schedule_arrival(now + self.shm_latency + copy, message);
            if notify {
                // A copy into shared memory: the sender's buffer is free at once.
                let m = self.messages.items[message as usize];
                self.complete(m.src, m.send_request, now, t);
            }
        } else {
            t.send(src_host, dst_host, (from, to), sl, bytes, job, message, notify);
        }
    }

    /// Request `request` of global rank `rank` is complete; a rank waiting for it resumes.
    fn complete(&mut self, rank: u32, request: u32, now: Time, t: &mut dyn Transport) {
        let r = &mut self.ranks[rank as usize];
        if let Some(i) = r.outstanding.iter().position(|&q| q == request) {
            r.outstanding.swap_remove(i);
        }
        let resume = match r.state {
            State::WaitingAll => r.outstanding.is_empty(),
            State::WaitingOne(q) => q == request,
            _ => false,
        };
        if resume {
            r.iteration_wait += now - r.wait_since;
            r.state = State::Running;
            self.waiting -= 1;
            self.advance(rank, now, t);
        }
    }

    /// Runs rank `rank`'s program until it blocks, computes or finishes.
    fn advance(&mut self, rank: u32, now: Time, t: &mut dyn Transport) {
        while let Some(op) = self.next_op(rank, now, t) {
            match op {
                Op::Compute { ps } => {
                    if ps > 0 {
                        self.ranks[rank as usize].state = State::Computing;
                        self.computing += 1;
                        t.schedule_resume(now + ps, rank);
                        return;
                    }
                }
                Op::Isend { peer, bytes, tag, context, mode } => {
                    let (request, to, sl) = self.issue(rank, peer, bytes);
                    let eager = bytes <= self.eager_threshold;
                    let kind = if eager { Kind::Eager } else { Kind::Rts };
                    let seq = self.order.number(rank, to);
                    let m = self.new_message(Message {
                        kind,
                        sl,
                        src: rank,
                        dst: to,
                        tag,
                        context,
                        mode,
                        bytes,
                        send_request: request,
                        recv_request: 0,
                        issued: now,
                        held: 0,
                        seq,
                    });
                    if mode == SendMode::Buffered {
                        // Copied into the attached buffer (the copy's CPU time is not modelled,
                        // as no call's is): the message goes on without the send.
                        self.complete(rank, request, now, t);
                    }
                    let wire = if eager { bytes } else { self.control_bytes };
                    // Only a standard eager send completes when its data is on the wire.
                    self.transmit(m, rank, to, wire, eager && mode == SendMode::Standard, now, t);
                }
                Op::Irecv { peer, tag, context } => {
                    let r = &mut self.ranks[rank as usize];
                    let request = r.next_request;
                    r.next_request += 1;
                    r.outstanding.push(request);
                    let want = Posted { peer, tag, context, request };
                    match r.unexpected.iter().position(|u| matches(&want, u.peer, u.tag, u.context)) {
                        Some(i) => {
                            let u = r.unexpected.remove(i);
                            self.matched(u.message, request, now - u.arrived, now, t);
                        }
                        None => r.posted.push(want),
                    }
                }
                Op::Put { peer, bytes } | Op::Get { peer, bytes } => {
                    let (request, to, sl) = self.issue(rank, peer, bytes);
                    let (kind, wire) = match op {
                        Op::Put { .. } => (Kind::Put, bytes),
                        _ => (Kind::GetRequest, self.control_bytes),
                    };
                    let m = self.new_message(Message {
                        kind,
                        sl,
                        src: rank,
                        dst: to,
                        tag: 0,
                        context: program::WORLD_CONTEXT,
                        mode: SendMode::Standard,
                        bytes,
                        send_request: request,
                        recv_request: 0,
                        issued: now,
                        held: 0,
                        seq: 0,
                    });
                    self.transmit(m, rank, to, wire, false, now, t);
                }
                Op::WaitAll | Op::Wait { .. } => {
                    let r = &mut self.ranks[rank as usize];
                    let blocked = match op {
                        Op::Wait { request } => r.outstanding.contains(&request).then_some(State::WaitingOne(request)),
                        _ => (!r.outstanding.is_empty()).then_some(State::WaitingAll),
                    };
                    if let Some(state) = blocked {
                        r.state = state;
                        r.wait_since = now;
                        self.waiting += 1;
                        return;
                    }
                }
                Op::Collective { kind, bytes, group } => {
                    let r = &mut self.ranks[rank as usize];
                    let tag_seq = r.collectives_called;
                    r.collectives_called += 1;
                    let (position, size) = (group.position(r.local), group.size);
                    let members = Members::Strided(group);
                    r.collective =
                        Some(ActiveCollective { kind, bytes, members, position, size, root: 0, step: 0, tag_seq });
                    r.collective_ops.clear();
                    r.collective_pc = 0;
                }
                Op::CommCollective { kind, bytes, comm, seq, root } => {
                    let r = &mut self.ranks[rank as usize];
                    let comms = &self.jobs[r.job as usize].comms;
                    // Membership was checked when the trace was unpacked.
                    let position =
                        comms.position(comm, r.local).expect("a trace rank calls collectives on its own communicators");
                    let size = comms.size(comm);
                    let members = Members::Comm(comm);
                    r.collective =
                        Some(ActiveCollective { kind, bytes, members, position, size, root, step: 0, tag_seq: seq });
                    r.collective_ops.clear();
                    r.collective_pc = 0;
                }
                // Generators never emit it and traces are split at it (see next_op).
                Op::IterationEnd => {}
                Op::StartTimer => {
                    let r = &mut self.ranks[rank as usize];
                    r.iteration_start = now;
                    r.iteration_wait = 0;
                    r.iteration_sends = 0;
                    r.iteration_send_latency = 0;
                }
            }
        }
    }

    /// A send-side request: numbers it, picks its SL, counts the job's traffic; returns
    /// (request, peer's global rank, SL).
    fn issue(&mut self, rank: u32, peer: u32, bytes: u64) -> (u32, u32, u8) {
        let r = &mut self.ranks[rank as usize];
        let request = r.next_request;
        r.next_request += 1;
        r.outstanding.push(request);
        let (job_index, local, host) = (r.job as usize, r.local, r.host);
        let on_node = self.ranks[(self.jobs[job_index].first_rank + peer) as usize].host == host;
        let job = &mut self.jobs[job_index];
        let sl = job.sl_policy.choose(local, peer, bytes, on_node);
        // Figures of the first run, the one whose runtime is reported.
        if job.run == 0 {
            job.payload_bytes_sent += bytes;
            job.messages_sent += 1;
            job.bytes_by_sl[sl as usize] += bytes;
        }
        (request, job.first_rank + peer, sl)
    }

    /// The rank's next op: from the collective it is in, else its iteration's ops, else (after
    /// recording the iteration) the next iteration's. None when the rank has finished.
    fn next_op(&mut self, rank: u32, now: Time, t: &mut dyn Transport) -> Option<Op> {
        loop {
            let r = &mut self.ranks[rank as usize];
            if let Some(c) = r.collective.as_mut() {
                if r.collective_pc < r.collective_ops.len() {
                    r.collective_pc += 1;
                    return Some(r.collective_ops[r.collective_pc - 1]);
                }
                let job = &self.jobs[r.job as usize];
                r.collective_ops.clear();
                r.collective_pc = 0;
                // Positions relative to the root: the algorithms are written for root 0.
                let relative = (c.position + c.size - c.root) % c.size;
                match collectives::step(c.kind, job.algorithms, c.size, relative, c.bytes, c.step) {
                    Some(s) => {
                        let (members, local, comms, root, size) = (c.members, r.local, &job.comms, c.root, c.size);
                        push_step_ops(&mut r.collective_ops, &s, collective_tag(c.tag_seq), |pos| {
                            let pos = (pos + root) % size;
                            match members {
                                Members::Strided(group) => group.member(local, pos),
                                Members::Comm(comm) => comms.member(comm, pos),
                            }
                        });
                        c.step += 1;
                    }
                    None => r.collective = None,
                }
                continue;
            }
            if r.pc < r.ops.len() {
                r.pc += 1;
                return Some(r.ops[r.pc - 1]);
            }
            if r.state == State::Finished {
                return None;
            }
            let job_index = r.job as usize;
            if r.in_iteration {
                r.in_iteration = false;
                let job = &self.jobs[job_index];
                // A restarted job's later runs are recorded up to a bound: a short job restarting
                // beside a long one would otherwise grow the table for as long as the run lasts.
                let room = job.run == 0 || self.records.len() < MAX_RESTART_RECORDS;
                if job.record_iterations && job.program.recorded(r.iteration) && !room {
                    self.jobs[job_index].iterations_not_recorded += 1;
                } else if job.record_iterations && job.program.recorded(r.iteration) {
                    self.records.push(IterationRecord {
                        job: r.job,
                        rank: r.local,
                        run: self.jobs[job_index].run,
                        iteration: r.iteration,
                        start: r.iteration_start,
                        end: now,
                        wait: r.iteration_wait,
                        sends: r.iteration_sends,
                        send_latency: r.iteration_send_latency,
                    });
                }
                let job = &mut self.jobs[job_index];
                job.sl_policy.iteration_done(
                    r.local,
                    job.run,
                    r.iteration,
                    r.iteration_wait,
                    r.iteration_sends,
                    r.iteration_send_latency,
                );
                r.iteration += 1;
                r.iteration_start = now;
                r.iteration_wait = 0;
                r.iteration_sends = 0;
                r.iteration_send_latency = 0;
                job.iterations_completed += 1;
            }
            let job = &mut self.jobs[job_index];
            r.ops.clear();
            r.pc = 0;
            if r.iteration >= job.program.iterations() {
                r.state = State::Finished;
                self.active -= 1;
                self.rank_finished(job_index, now, t);
                return None;
            }
            job.program.iteration(r.local, r.iteration, &mut r.ops);
            r.in_iteration = true;
        }
    }

    fn rank_finished(&mut self, job_index: usize, now: Time, t: &mut dyn Transport) {
        let job = &mut self.jobs[job_index];
        job.ranks_finished += 1;
        if job.ranks_finished < job.size {
            return;
        }
        job.runs_completed += 1;
        if job.runtime.is_none() {
            job.runtime = Some(now - job.run_start);
            self.jobs_completed_once += 1;
        }
        let everyone_done = self.all_completed_once();
        let job = &mut self.jobs[job_index];
        // Keep the contention constant until every job has completed once. A run that took no
        // simulated time (no compute, nothing on the wire) adds no contention, and restarting it
        // would finish it again at once, forever: it stays done.
        if job.restart && !everyone_done && now > job.run_start {
            job.run += 1;
            job.run_start = now;
            job.ranks_finished = 0;
            let (first, size) = (job.first_rank, job.size);
            for rank in first..first + size {
                let r = &mut self.ranks[rank as usize];
                r.state = State::Running;
                r.iteration = 0;
                r.in_iteration = false;
                r.iteration_start = now;
                r.iteration_wait = 0;
                r.iteration_sends = 0;
                r.iteration_send_latency = 0;
                r.next_request = 0;
                r.collectives_called = 0;
                r.pc = 0;
                r.ops.clear();
                r.outstanding.clear();
                // Messages no receive ever matched (a program bug) must not leak into the next run.
                r.unexpected.clear();
                r.posted.clear();
                self.active += 1;
            }
            for rank in first..first + size {
                self.advance(rank, now, t);
            }
        }
    }

    /// No compute phase pending, no message in flight, every active rank waiting: nothing can
    /// ever happen again. Records which ranks wait for what.
    fn check_deadlock(&mut self) {
        if self.deadlock.is_some() || self.active == 0 || self.computing > 0 || self.in_flight > 0 {
            return;
        }
        if self.waiting < self.active {
            return;
        }
        let mut lines = Vec::new();
        for r in self.ranks.iter().filter(|r| matches!(r.state, State::WaitingAll | State::WaitingOne(_))) {
            let job = &self.jobs[r.job as usize].name;
            let what: Vec<String> = r
                .posted
                .iter()
                .map(|p| {
                    let from = if p.peer == ANY { "any rank".to_string() } else { format!("rank {}", p.peer) };
                    let tag = if p.tag == ANY { "any tag".to_string() } else { format!("tag {}", p.tag) };
                    format!("a receive from {from} ({tag})")
                })
                .collect();
            let sends = r.outstanding.len().saturating_sub(r.posted.len());
            let mut text = what.join(", ");
            if sends > 0 {
                text += &format!("{}{sends} send(s) no receive matches", if text.is_empty() { "" } else { " and " });
            }
            lines.push(format!("job {job:?} rank {} (host {}) waits for {text}", r.local, r.host));
        }
        let total = lines.len();
        lines.truncate(10);
        let more = if total > 10 { format!("\n... and {} more ranks", total - 10) } else { String::new() };
        self.deadlock = Some(format!(
            "deadlock: no rank can make progress ({total} blocked, no message in flight)\n{}{more}",
            lines.join("\n")
        ));
    }

    /// Per-job figures for summary.json, keyed by job name.
    pub fn summary(&self, now: Time) -> Value {
        let mut jobs = serde_json::Map::new();
        for (j, job) in self.jobs.iter().enumerate() {
            let mut per_iteration: Vec<Time> = Vec::new();
            let mut wait_total: Time = 0;
            let mut time_total: Time = 0;
            for rec in self.records.iter().filter(|r| r.job == j as u32 && r.run == 0) {
                per_iteration.push(rec.end - rec.start);
                wait_total += rec.wait;
                time_total += rec.end - rec.start;
            }
            let iterations = job.program.iterations();
            let bytes_by_sl: serde_json::Map<String, Value> = (0..16)
                .filter(|&sl| job.bytes_by_sl[sl] > 0)
                .map(|sl| (sl.to_string(), json!(job.bytes_by_sl[sl])))
                .collect();
            jobs.insert(
                job.name.clone(),
                json!({
                    "ranks": job.size,
                    "nodes": job.nodes,
                    "completed": job.runtime.is_some(),
                    "runtime_us": job.runtime.map(|t| ps_to_ns(t) / 1000.0),
                    "iterations": iterations,
                    "runs_completed": job.runs_completed,
                    "bytes_sent": job.payload_bytes_sent,
                    "messages_sent": job.messages_sent,
                    "iterations_completed_all_runs": job.iterations_completed,
                    "rank_iteration_ns": crate::stats::latency_summary(&mut per_iteration),
                    "mpi_wait_fraction": if time_total > 0 { wait_total as f64 / time_total as f64 } else { 0.0 },
                    "elapsed_us": ps_to_ns(now - job.run_start) / 1000.0,
                    "bytes_by_sl": bytes_by_sl,
                }),
            );
            if let Some(chosen) = job.sl_policy.prioritized() {
                jobs[&job.name]["prioritized_ranks"] = json!(chosen);
            }
            if job.iterations_not_recorded > 0 {
                jobs[&job.name]["iterations_not_recorded"] = json!(job.iterations_not_recorded);
            }
        }
        Value::Object(jobs)
    }

    pub fn job_name(&self, job: u32) -> &str {
        &self.jobs[job as usize].name
    }

    /// The host rank `rank` of job `job` runs on.
    pub fn host_of(&self, job: u32, rank: u32) -> u32 {
        self.ranks[(self.jobs[job as usize].first_rank + rank) as usize].host
    }

    /// The global ranks that send and receive `message` (its connection).
    pub fn message_ranks(&self, message: u32) -> (u32, u32) {
        let m = &self.messages.items[message as usize];
        (m.src, m.dst)
    }

    /// What the per-message table says of MPI message `message` (in flight): its sending and
    /// receiving ranks within their job, its protocol part (`MESSAGE_KINDS`) and its tag.
    pub fn message_view(&self, message: u32) -> MessageView {
        let m = &self.messages.items[message as usize];
        MessageView {
            src_rank: self.ranks[m.src as usize].local,
            dst_rank: self.ranks[m.dst as usize].local,
            kind: m.kind as u8,
            tag: m.tag,
        }
    }
}

/// Names of `Kind`'s values, in order, as the per-message table writes them.
pub const MESSAGE_KINDS: [&str; 8] =
    ["eager", "rts", "cts", "rendezvous_data", "put", "get_request", "get_data", "sync_ack"];

/// An MPI message as the per-message table shows it (`Mpi::message_view`).
#[derive(Debug, Clone, Copy)]
pub struct MessageView {
    pub src_rank: u32,
    pub dst_rank: u32,
    pub kind: u8,
    pub tag: u32,
}

/// Whether receive `want` accepts a message from `peer` with `tag` in `context`: the context
/// must be the same (no wildcard reaches another communicator or a collective's messages).
#[inline]
fn matches(want: &Posted, peer: u32, tag: u32, context: u32) -> bool {
    want.context == context && (want.peer == ANY || want.peer == peer) && (want.tag == ANY || want.tag == tag)
}
