"""Every example scenario is valid and describes its fabric (running them is the user's call)."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from qoslab.cli import app

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*/scenario.toml"))


def test_there_are_examples():
    assert EXAMPLES


@pytest.mark.parametrize("scenario", EXAMPLES, ids=lambda p: p.parent.name)
def test_example_checks(scenario):
    result = CliRunner().invoke(app, ["check", str(scenario)])
    assert result.exit_code == 0, result.output
    assert (scenario.parent / "README.md").exists()


STUDIES = sorted((Path(__file__).parent.parent / "examples").glob("*/study.toml"))


@pytest.mark.parametrize("study", STUDIES, ids=lambda p: p.parent.name)
def test_example_study_is_valid(study):
    from qoslab.study import load_study
    from qoslab.study.tail_model import TailStudy

    loaded = load_study(study)  # every policy checked against the scenario, nothing run
    if isinstance(loaded, TailStudy):
        assert loaded.snapshots >= 10 and len(loaded.localities) >= 2
    else:
        assert len(loaded.concrete_policies()) >= 2
    assert (study.parent / "README.md").exists()
