"""Every example scenario is valid and describes its fabric (running them is the user's call)."""

from pathlib import Path

import pytest
from qoslab.cli import app
from typer.testing import CliRunner

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


# The seeds at their own scale (issue 14): each example folder's seed-scale files, sized by
# `--plan` (nothing simulated), with the figures the seeds give.
SEED_SCALE = sorted((Path(__file__).parent.parent / "examples").glob("*/seed-scale*.toml"))
EXPECTED_JOBS = {
    # Savoie et al.: 4 jobs x 70 nodes x 22 ranks per node, on a ~300-node tree.
    "savoie-per-job/seed-scale": ({"qbox", "crystal", "milc", "pf3d"}, 70, 22, 324),
    "savoie-per-job/seed-scale-micro": ({"flood", "nearest", "alltoall", "pairs"}, 70, 22, 324),
    # Jokanovic et al., Table 5.2: 256 ranks per application, one per node.
    "jokanovic-mapping/seed-scale": ({"ft", "cg", "mg", "bt"}, 256, 1, 1024),
    "jokanovic-mapping/seed-scale-2apps": ({"ft", "cg"}, 256, 1, 512),
    "jokanovic-mapping/seed-scale-3apps": ({"ft", "cg", "bt"}, 256, 1, 1024),
    # Salimi Beni & Cosenza: Broadcast, Reduce, Alltoall at three sizes on the Marconi100 preset.
    "dragonfly-tail/seed-scale": ({f"{c}-{s}" for c in ("bcast", "reduce", "alltoall") for s in ("8B", "4KiB", "64KiB")},
                                  8, 1, 972),
    # Their HACC/miniAMR comparison: the marconi100-256 presets, 8 nodes x 32 ranks.
    "dragonfly-tail/seed-scale-hacc-miniamr": ({"hacc", "miniamr"}, 8, 32, 972),
}


def test_every_seed_has_its_seed_scale_study():
    folders = {p.parent.name for p in SEED_SCALE}
    assert {"savoie-per-job", "jokanovic-mapping", "subramoni-multi-vl", "dragonfly-tail"} <= folders


@pytest.mark.parametrize("study", SEED_SCALE, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_seed_scale_study_plans_at_the_seed_s_scale(study, tmp_path):
    from qoslab.scenario import read_toml

    log = read_toml(study).get("background", {}).get("log")
    if log and not (study.parent / log).is_file():  # real logs are read where they lie, never copied here
        pytest.skip(f"{study.name} reads {log}, which is not there (../shared/real-data next to the repo)")
    result = CliRunner().invoke(app, ["study", str(study), "--plan", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    import json

    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["runs"] > 0 and not (tmp_path / "runs").exists()
    key = f"{study.parent.name}/{study.stem}"
    if key in EXPECTED_JOBS:
        names, nodes, per_node, hosts = EXPECTED_JOBS[key]
        assert set(plan["jobs"]) == names and plan["hosts"] == hosts
        for job in plan["jobs"].values():
            assert (job["nodes"], job["ranks_per_node"]) == (nodes, per_node)


# Khalilov et al. under GPCNeT (network_load_test) at 64 and 512 nodes: the whole machine,
# floor(0.8 N) congestor nodes dealt to the four congestors as GPCNeT deals them (node i of the
# shuffled list to congestor i mod 4), the rest running the canaries; 18 ranks per node.
KHALILOV = {"khalilov-gpcnet/seed-scale-64": (64, 3), "khalilov-gpcnet/seed-scale": (512, 2)}


@pytest.mark.parametrize("key", sorted(KHALILOV))
def test_khalilov_seed_scale_runs_gpcnet_s_split(key, tmp_path):
    import json

    hosts, repetitions = KHALILOV[key]
    study = Path(__file__).parent.parent / "examples" / f"{key}.toml"
    result = CliRunner().invoke(app, ["study", str(study), "--plan", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    plan = json.loads((tmp_path / "plan.json").read_text())
    congestors = int(0.8 * hosts)
    dealt = [len(range(i, congestors, 4)) for i in range(4)]  # GPCNeT's colors: i mod 4
    expected = {"canaries": hosts - congestors, "alltoall": dealt[0], "incast": dealt[1], "put-incast": dealt[2],
                "get-bcast": dealt[3]}
    assert plan["hosts"] == hosts == sum(expected.values())  # GPCNeT runs on the whole machine
    assert {job: figures["nodes"] for job, figures in plan["jobs"].items()} == expected
    assert plan["jobs"]["canaries"]["nodes"] / hosts == pytest.approx(0.2, abs=0.01)
    for figures in plan["jobs"].values():
        assert figures["ranks_per_node"] == 18 and figures["ranks"] == 18 * figures["nodes"]
    # Each repetition: every job alone, then the default, the static priority and 5 per-message policies.
    assert plan["repetitions"] == repetitions and plan["alone_runs"] == 5 * repetitions
    assert "per-job[canaries high]" in plan["policies"] and sum(p.startswith("per-message") for p in plan["policies"]) == 5
    assert plan["runs"] == repetitions * (5 + 7)


def test_the_notebook_runs_top_to_bottom(tmp_path):
    """examples/notebook executes as a user would run it (a kernel, every cell in order), in a copy."""
    import shutil

    import nbformat
    from nbclient import NotebookClient

    folder = tmp_path / "notebook"
    shutil.copytree(Path(__file__).parent.parent / "examples" / "notebook", folder)
    notebook = nbformat.read(folder / "qoslab-in-a-notebook.ipynb", as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(folder)}}).execute()
    shown = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in shown if o.output_type == "error"]
    html = [o["data"]["text/html"] for o in shown if "text/html" in o.get("data", {})]
    assert any("StudyOutcome" in h and "data:image/png;base64," in h for h in html)  # the study's own view
    assert (folder / "notebook-out" / "report.html").is_file()
