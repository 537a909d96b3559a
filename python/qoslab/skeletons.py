"""Application skeletons (``[jobs.workload] kind = "milc"`` ...): communication structures that
follow real codes, not the codes. One pydantic model per skeleton with its parameters; the engine
generates the rank programs (crates/qoslab-engine/src/mpi/skeletons/). This module is the only
place the skeletons' defaults live; calibrated parameter sets (``preset = "..."``) are in
skeleton_presets.py. docs/skeletons.md describes the patterns, message sizes and calibration.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, create_model, model_validator

from qoslab.skeleton_presets import PRESETS
from qoslab.workload_base import Count, Iterations, Micros, Workload

# Bounds keep every derived message size well inside 64 bits.
Extent = Annotated[int, Field(ge=1, le=65536)]
FftGrid = Annotated[int, Field(ge=1, le=16384)]
States = Annotated[int, Field(ge=1, le=2**20)]
NasClass = Literal["S", "W", "A", "B", "C", "D"]


class _Skeleton(Workload):
    """A skeleton's parameters, optionally from a calibrated `preset` (skeleton_presets.py): the
    preset fills every parameter the table does not set, so explicit keys win (as the topology
    preset does). Each model lists the presets it accepts, so a wrong name is an error naming
    `preset` and the valid names."""

    kind: str  # each skeleton narrows it to its own Literal

    @model_validator(mode="after")
    def _apply_preset(self) -> _Skeleton:
        name = getattr(self, "preset", None)
        if name is not None:
            for key, value in PRESETS[name][self.kind].items():
                if key not in self.model_fields_set:
                    self.__dict__[key] = value
        return self

    def engine(self) -> dict[str, Any]:
        # The engine takes resolved parameters only; the preset's name stays in the scenario.
        data = super().engine()
        data.pop("preset", None)
        return data


class Milc(_Skeleton):
    """MILC (lattice QCD, staggered CG): per CG iteration two half-lattice Dslash halo exchanges
    with the 8 neighbours of a 4-D periodic process grid (one-link and, with the Naik term,
    three-link gathers of su3_vectors), then two 8 B allreduces."""

    kind: Literal["milc"]
    preset: Literal["savoie-1540"] | None = None
    local_lattice: Annotated[int, Field(ge=1, le=4096)] = 8  # sites per dimension per rank (L^4 local lattice)
    naik: bool = True  # asqtad/HISQ three-link (Naik) gathers
    cg_iterations: Count = 10  # CG iterations per skeleton iteration
    iterations: Iterations = 5
    compute_us: Micros = 20.0  # per CG iteration


class Pf3d(_Skeleton):
    """pF3D (laser-plasma): 2-D FFTs of xy-planes as alltoalls in the x-rows and y-columns of a
    3-D process grid (4 per FFT, forward and inverse per step) plus a z-plane exchange."""

    kind: Literal["pf3d"]
    preset: Literal["savoie-1540"] | None = None
    nx: Extent = 64  # local cells per rank in x
    ny: Extent = 64
    nz: Extent = 16
    iterations: Iterations = 5
    compute_us: Micros = 100.0  # per step


class Qbox(_Skeleton):
    """Qbox (first-principles MD): FFT transposes (alltoall) in the columns of a 2-D process grid,
    density allreduce and SUMMA broadcasts over the rows, overlap-matrix allreduce in columns."""

    kind: Literal["qbox"]
    preset: Literal["savoie-1540"] | None = None
    states: States = 256  # electronic states (bands)
    plane_waves: Annotated[int, Field(ge=1, le=2**32)] = 16384  # coefficients per state (total)
    fft_grid: FftGrid = 64  # wavefunction FFT grid points per dimension
    iterations: Iterations = 2
    compute_us: Micros = 500.0  # per iteration


class CrystalRouter(_Skeleton):
    """gslib's crystal router: ceil(log2 P) stages of a recursive halving exchange (partner =
    rank XOR P/2^k), each rank routing `bytes` per iteration."""

    kind: Literal["crystal-router"]
    preset: Literal["savoie-1540"] | None = None
    bytes: Annotated[int, Field(ge=0, lt=2**40)] = 65536  # data each rank routes per iteration
    iterations: Iterations = 10
    compute_us: Micros = 10.0  # before each exchange


# NPB 3.4 NITER per class: the default number of iterations.
_NITER = {
    "nas-ft": {"S": 6, "W": 6, "A": 6, "B": 20, "C": 20, "D": 25},
    "nas-cg": {"S": 15, "W": 15, "A": 15, "B": 75, "C": 75, "D": 100},
    "nas-mg": {"S": 4, "W": 4, "A": 4, "B": 20, "C": 20, "D": 50},
    "nas-bt": {"S": 60, "W": 200, "A": 200, "B": 200, "C": 200, "D": 250},
}


# `class` is a Python keyword: the field is declared through create_model so that its key is
# "class" everywhere (validation, errors, model_fields, the engine's form); read it with getattr.
_NasClassKey = create_model(  # type: ignore[call-overload]
    "_NasClassKey", __base__=_Skeleton, **{"class": (NasClass, "A")})


class _Nas(_NasClassKey):  # type: ignore[misc,valid-type]
    preset: Literal["jokanovic-class-d-256"] | None = None
    iterations: Iterations | None = None  # None: the class's NITER (NPB 3.4)
    compute_us: Micros

    @model_validator(mode="after")
    def _niter(self) -> _Nas:
        if self.iterations is None:
            object.__setattr__(self, "iterations", _NITER[self.kind][getattr(self, "class")])  # type: ignore[attr-defined]
        return self


class NasFt(_Nas):
    """NAS FT: 3-D FFT with one global alltoall transpose per iteration (two in row/column groups
    when P > nz), then a 16 B checksum reduce."""

    kind: Literal["nas-ft"]
    compute_us: Micros = 500.0  # per iteration


class NasCg(_Nas):
    """NAS CG: 26 sparse mat-vecs per outer iteration, each a recursive-halving reduction across
    the process row and a transpose exchange; 53 dot-product allreduces over the row."""

    kind: Literal["nas-cg"]
    compute_us: Micros = 20.0  # per matrix-vector product


class NasMg(_Nas):
    """NAS MG: V-cycle with 3-D periodic halo exchanges (axis by axis) at every level, faces
    shrinking 4x per level down and growing back up; two 8 B allreduces."""

    kind: Literal["nas-mg"]
    compute_us: Micros = 500.0  # per iteration, spread over the levels by their points


class NasBt(_Nas):
    """NAS BT: multi-partition ADI on a sqrt(P) x sqrt(P) grid: face exchange with 6 neighbours,
    then pipelined forward/backward sweeps along x, y and z."""

    kind: Literal["nas-bt"]
    compute_us: Micros = 200.0  # per time step


class Hacc(_Skeleton):
    """HACC (cosmology): 26-neighbour overload-zone particle exchange, a Poisson solve of one
    forward and three inverse 3-D FFTs (pencil alltoalls in two sub-communicators), two 8 B
    allreduces."""

    kind: Literal["hacc"]
    preset: Literal["marconi100-256"] | None = None
    particles_per_rank: Annotated[int, Field(ge=1, le=2**45)] = 262144  # also the PM grid points per rank
    overload: Annotated[int, Field(ge=0, le=65536)] = 4  # overload-zone depth, in particle spacings
    iterations: Iterations = 5  # long-range steps
    compute_us: Micros = 1000.0  # short-range force per step


class MiniAmr(_Skeleton):
    """miniAMR: per stage a 6-face ghost exchange (x, y, z in turn) with sizes from the blocks on
    each face (4x between refined ranks), checksum allreduces, periodic refinement rounds."""

    kind: Literal["miniamr"]
    preset: Literal["marconi100-256"] | None = None
    block_cells: Annotated[int, Field(ge=1, le=1024)] = 10  # cells per block edge
    blocks_per_dim: Annotated[int, Field(ge=1, le=1024)] = 2  # blocks per rank per dimension
    variables: Annotated[int, Field(ge=1, le=65536)] = 40
    stages_per_step: Count = 20
    checksum_every: Count = 5  # stages between checksum allreduces
    refine_every: Count = 5  # time steps between refinement rounds
    iterations: Iterations = 10  # time steps
    compute_us: Micros = 10.0  # per stage


class Cpmd(_Skeleton):
    """CPMD (Car-Parrinello MD): 3-D FFT transposes as alltoalls over the whole job (three per
    pair of states plus two for the density), overlap-matrix and force allreduces, a broadcast."""

    kind: Literal["cpmd"]
    preset: Literal["subramoni-64"] | None = None
    states: States = 128
    fft_grid: FftGrid = 64
    atoms: Annotated[int, Field(ge=0, le=2**32)] = 64
    iterations: Iterations = 2
    compute_us: Micros = 500.0  # per iteration


SKELETON_MODELS: list[type[Workload]] = [Milc, Pf3d, Qbox, CrystalRouter, NasFt, NasCg, NasMg, NasBt, Hacc, MiniAmr, Cpmd]
