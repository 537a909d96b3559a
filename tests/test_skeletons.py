"""The application skeletons' workload models: defaults resolve, unknown keys and bad values are
rejected with the key named, NAS iterations default to the class's NITER, calibrated presets fill
what the table leaves unset."""

from __future__ import annotations

from typing import Any, cast, get_args

import pytest
import qoslab.workloads
from pydantic import TypeAdapter, ValidationError
from qoslab import Scenario, ScenarioError
from qoslab.skeleton_presets import PRESETS, presets_for
from qoslab.skeletons import SKELETON_MODELS
from qoslab.workload_base import Workload

ADAPTER: TypeAdapter[Any] = TypeAdapter(qoslab.workloads.AnyWorkload)

# Every skeleton's resolved defaults (the engine's form). The Rust side has no defaults: this
# table and skeletons.py are what a scenario without parameters runs.
DEFAULTS: dict[str, dict[str, Any]] = {
    "milc": {"local_lattice": 8, "naik": True, "cg_iterations": 10, "iterations": 5, "compute_us": 20.0},
    "pf3d": {"nx": 64, "ny": 64, "nz": 16, "iterations": 5, "compute_us": 100.0},
    "qbox": {"states": 256, "plane_waves": 16384, "fft_grid": 64, "iterations": 2, "compute_us": 500.0},
    "crystal-router": {"bytes": 65536, "iterations": 10, "compute_us": 10.0},
    "nas-ft": {"class": "A", "iterations": 6, "compute_us": 500.0},
    "nas-cg": {"class": "A", "iterations": 15, "compute_us": 20.0},
    "nas-mg": {"class": "A", "iterations": 4, "compute_us": 500.0},
    "nas-bt": {"class": "A", "iterations": 200, "compute_us": 200.0},
    "hacc": {"particles_per_rank": 262144, "overload": 4, "iterations": 5, "compute_us": 1000.0},
    "miniamr": {
        "block_cells": 10,
        "blocks_per_dim": 2,
        "variables": 40,
        "stages_per_step": 20,
        "checksum_every": 5,
        "refine_every": 5,
        "iterations": 10,
        "compute_us": 10.0,
    },
    "cpmd": {"states": 128, "fft_grid": 64, "atoms": 64, "iterations": 2, "compute_us": 500.0},
}

# One invalid value per skeleton and the key the error must name.
BAD_VALUES: dict[str, tuple[str, Any]] = {
    "milc": ("local_lattice", 0),
    "pf3d": ("nz", -1),
    "qbox": ("states", 0),
    "crystal-router": ("bytes", -8),
    "nas-ft": ("class", "E"),
    "nas-cg": ("iterations", 0),
    "nas-mg": ("compute_us", -1.0),
    "nas-bt": ("class", "a"),
    "hacc": ("overload", "4"),
    "miniamr": ("checksum_every", 0),
    "cpmd": ("fft_grid", 100000),
}

KINDS = sorted(DEFAULTS)


def validate(data: dict[str, Any]) -> Any:
    return ADAPTER.validate_python(data)


def test_every_skeleton_is_a_workload_kind() -> None:
    kinds = {get_args(m.model_fields["kind"].annotation)[0] for m in SKELETON_MODELS}
    assert kinds == set(DEFAULTS)
    assert kinds <= set(qoslab.workloads.WORKLOAD_KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_defaults_resolve(kind: str) -> None:
    engine = validate({"kind": kind}).engine()
    assert engine == {"kind": kind, **DEFAULTS[kind]}
    # Every parameter is resolved: nothing is left for the engine to default.
    assert all(v is not None for v in engine.values())


@pytest.mark.parametrize("kind", KINDS)
def test_explicit_parameters_round_trip(kind: str) -> None:
    data = {"kind": kind, **DEFAULTS[kind]}
    assert validate(data).engine() == data


@pytest.mark.parametrize("kind", KINDS)
def test_unknown_key_is_rejected(kind: str) -> None:
    with pytest.raises(ValidationError) as info:
        validate({"kind": kind, "bogus": 1})
    (error,) = info.value.errors()
    assert error["type"] == "extra_forbidden"
    assert error["loc"][-1] == "bogus"


@pytest.mark.parametrize("kind", KINDS)
def test_bad_value_is_rejected_naming_the_key(kind: str) -> None:
    key, value = BAD_VALUES[kind]
    with pytest.raises(ValidationError) as info:
        validate({"kind": kind, key: value})
    locs = [e["loc"] for e in info.value.errors()]
    assert any(loc[-1] == key for loc in locs), locs
    assert key in str(info.value)


@pytest.mark.parametrize(
    ("kind", "cls", "niter"),
    [("nas-ft", "B", 20), ("nas-ft", "D", 25), ("nas-cg", "C", 75), ("nas-cg", "S", 15), ("nas-mg", "D", 50), ("nas-bt", "S", 60)],
)
def test_nas_iterations_default_to_the_class_niter(kind: str, cls: str, niter: int) -> None:
    engine = validate({"kind": kind, "class": cls}).engine()
    assert engine["class"] == cls
    assert engine["iterations"] == niter
    # An explicit count wins.
    assert validate({"kind": kind, "class": cls, "iterations": 3}).engine()["iterations"] == 3


def test_nas_class_key_is_class_not_the_python_name() -> None:
    with pytest.raises(ValidationError) as info:
        validate({"kind": "nas-ft", "class_": "A"})
    assert info.value.errors()[0]["loc"][-1] == "class_"
    model = next(m for m in SKELETON_MODELS if get_args(m.model_fields["kind"].annotation)[0] == "nas-ft")
    assert "class" in model.model_fields


def test_strict_types() -> None:
    # The workload models are strict: no string-to-number or number-to-bool coercion.
    with pytest.raises(ValidationError):
        validate({"kind": "milc", "naik": 1})
    with pytest.raises(ValidationError):
        validate({"kind": "pf3d", "nx": "64"})
    # Integral microseconds are fine.
    assert validate({"kind": "cpmd", "compute_us": 5}).engine()["compute_us"] == 5


# -- calibrated presets (skeleton_presets.py) ---------------------------------------------------

PRESET_PAIRS = [(preset, kind) for preset, kinds in PRESETS.items() for kind in kinds]


@pytest.mark.parametrize(("preset", "kind"), PRESET_PAIRS, ids=[f"{p}:{k}" for p, k in PRESET_PAIRS])
def test_preset_fills_its_parameters_and_stays_out_of_the_engine_form(preset: str, kind: str) -> None:
    engine = validate({"kind": kind, "preset": preset}).engine()
    assert "preset" not in engine
    for key, value in PRESETS[preset][kind].items():
        assert engine[key] == value
    # Written out in full, the same parameters validate on their own (the preset holds valid values).
    assert validate(engine).engine() == engine


def test_explicit_keys_win_over_the_preset() -> None:
    engine = validate({"kind": "nas-ft", "preset": "jokanovic-class-d-256", "iterations": 2, "class": "C"}).engine()
    assert engine["iterations"] == 2 and engine["class"] == "C"
    assert engine["compute_us"] == PRESETS["jokanovic-class-d-256"]["nas-ft"]["compute_us"]
    # A preset without `iterations` leaves the model default in charge.
    assert "iterations" not in PRESETS["savoie-1540"]["milc"]
    assert validate({"kind": "milc", "preset": "savoie-1540"}).engine()["iterations"] == DEFAULTS["milc"]["iterations"]


@pytest.mark.parametrize("kind", KINDS)
def test_unknown_preset_is_rejected_naming_the_key_and_the_choices(kind: str) -> None:
    with pytest.raises(ValidationError) as info:
        validate({"kind": kind, "preset": "no-such-preset"})
    (error,) = info.value.errors()
    assert error["loc"][-1] == "preset"
    for name in presets_for(kind):
        assert name in str(info.value)


def test_preset_error_names_the_job_key_in_a_scenario() -> None:
    with pytest.raises(ScenarioError) as info:
        Scenario(topology={"kind": "single-switch", "hosts": 4},
                 jobs=[{"nodes": 2, "workload": {"kind": "milc", "preset": "savoie"}}])
    assert "jobs[0].workload.preset" in str(info.value) and "savoie-1540" in str(info.value)


def test_a_preset_survives_a_scenario_round_trip() -> None:
    # Studies rebuild scenarios from model_dump(exclude_unset=True): the preset must come back
    # with its parameters, not with the defaults.
    s = Scenario(topology={"kind": "single-switch", "hosts": 4},
                 jobs=[{"nodes": 2, "workload": {"kind": "cpmd", "preset": "subramoni-64"}}])
    again = Scenario.model_validate(s.model_dump(exclude_unset=True))
    before, after = (cast(Workload, x.jobs[0].workload).engine() for x in (s, again))
    assert after == before
    assert after["compute_us"] == PRESETS["subramoni-64"]["cpmd"]["compute_us"]
