"""Reading inputs from outside qoslab: MPI traces (OTF2, DUMPI ASCII) turned into the packed rank
programs the engine replays (see :mod:`qoslab.io.traces`)."""

from qoslab.io.traces import PackedProgram, read_trace

__all__ = ["PackedProgram", "read_trace"]
