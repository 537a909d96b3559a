"""Reading inputs from outside qoslab: MPI traces (OTF2, DUMPI ASCII) turned into the packed rank
programs the engine replays (see :mod:`qoslab.io.traces`), and the real fabric's dumps. The trace
reader loads on first use: reading an ibnetdiscover dump (a run's path) needs no numpy."""

from typing import Any

__all__ = ["PackedProgram", "read_trace"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from qoslab.io import traces

        return getattr(traces, name)
    raise AttributeError(f"module 'qoslab.io' has no attribute {name!r}")
