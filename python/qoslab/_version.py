"""The installed package's version (one place, so modules can import it without cycles).

The wheel's version is the engine crate's (pyproject.toml takes it from Cargo.toml), so it is
read from the compiled engine, which a run loads anyway, rather than through importlib.metadata
(about 35 ms of every command's start-up)."""

try:
    from qoslab._engine import version as _engine_version

    __version__: str = str(_engine_version())
except ImportError:  # a source tree whose engine was never built
    __version__ = "0.0.0"

# The last change to what a run computes (a model change, said in its commit and the docs): its
# date, and after a dot its number that day. A study's stored runs carry it, and a study that
# reuses runs from before it says so: run ids hash the scenario only, so such runs would
# otherwise mix with new ones unseen. 2026-11-27: MPI order (1), trace roots and OTF2 in place (2),
# spread by connection as MVAPICH2 and per-message's default high tier (3), credit returns in
# arrival order (4), a replayed trace's compute from MPI_Init's return to MPI_Finalize (5), MPI
# matching on the communicator's context (6), synchronous and buffered send modes (7), MPICH's
# one-child-at-a-time binomial bcast and reduce (8), latency-history's network latency without a
# rendezvous's wait for its receive (9), a packet's tail carried across links of different
# rates (10), online slowest-ranks choosing ranks that sent something first (11), an HCA send
# queue lane per MPI connection (rank pair) instead of per destination host (12), 256 HCA send
# queues per SL by default in scenarios with jobs instead of 8 (13).
MODEL_VERSION = "2026-11-27.13"


def model_before(stored: str, current: str = MODEL_VERSION) -> bool:
    """Whether a run stored with model version `stored` ("" when it has none: stored before
    versions were kept) predates `current`."""

    def key(version: str) -> tuple[str, int]:
        date, _, number = version.partition(".")
        return date, int(number) if number.isdigit() else 1

    return not stored or key(stored) < key(current)
