"""Hostile job names against every file `qoslab export opensm` writes for a cluster: each name is
carried exactly (the generated TaskProlog and env files run, with and without the matching job
name, and do nothing but print or set the exports) or refused with an error naming the job."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import qoslab
from ib_harness import requires_ib_tools, tool
from qoslab.deploy import ExportError, export_opensm
from qoslab.deploy.mpi_env import SL_VARIABLES
from qoslab.deploy.names import MAX_NAME_CHARS, markdown_code
from qoslab.io.lines import OPENSM_LINE_BYTES
from qoslab.io.opensm import OpenSmConfError, parse_opensm_conf

MARKER = "/tmp/qoslab-export-safety-marker"
# Carried exactly: command substitution, backticks, quotes, globs, leading dashes, shell
# metacharacters, OpenSM keywords and separators, a name at the length limit.
HOSTILE = [
    f"a$(touch {MARKER})",
    f"b`touch {MARKER}`",
    f"c'; touch {MARKER}; echo '",
    "*",
    "[a-z]?",
    "-rf --no-preserve-root",
    "$HOME ${IFS} ;|&><",
    "port-groups end-port-group # qos-level, sl: 1",
    "x" * MAX_NAME_CHARS,
    # Shell reserved words: shlex.quote leaves them bare, and a bare `esac` ends the `case`.
    "esac", "done", "then", "fi",
]


def scenario(names: list[str], **keys) -> qoslab.Scenario:
    return qoslab.Scenario(
        topology={"kind": "xgft", "m": [4, 8], "w": [1, 2]},
        jobs=[{"name": name, "nodes": 2, "sl": 1 + i % 3, "placement": "contiguous",
               "workload": {"kind": "all-to-all", "bytes": 4096, "iterations": 1}} for i, name in enumerate(names)],
        **keys,
    )


def run_prolog(folder: Path, job_name: str | None) -> str:
    env = {"PATH": os.environ["PATH"]}
    if job_name is not None:
        env["SLURM_JOB_NAME"] = job_name
    proc = subprocess.run(["/bin/sh", str(folder / "slurm-taskprolog.sh")], env=env, cwd=folder,
                          capture_output=True, text=True, timeout=10)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    return proc.stdout


@pytest.fixture()
def exported(tmp_path):
    Path(MARKER).unlink(missing_ok=True)
    names = HOSTILE + ["plain"]
    written = export_opensm(scenario(names), tmp_path / "deploy").written
    yield tmp_path / "deploy", names, written
    Path(MARKER).unlink(missing_ok=True)


def test_taskprolog_matches_hostile_names_literally_and_runs_nothing_else(exported):
    folder, names, _ = exported
    for i, name in enumerate(names):
        sl = 1 + i % 3
        out = run_prolog(folder, name)
        assert out.splitlines() == [f"export {variable}={sl}" for variable in SL_VARIABLES], name
    # Names that only a glob or an expansion would match: nothing is printed.
    for other in ("other", "a", "ab", "[a-z]x", "q", "-rf", "", f"a$(touch {MARKER})x", "x" * (MAX_NAME_CHARS - 1)):
        assert run_prolog(folder, other) == "", other
    assert run_prolog(folder, None) == ""
    assert not Path(MARKER).exists()


def test_env_files_source_cleanly_and_set_only_the_exports(exported):
    folder, names, written = exported
    envs = sorted(p for p in written if p.suffix == ".env")
    assert len(envs) == len(names)
    assert all(p.parent == folder / "env" and not p.name.startswith((".", "-")) for p in envs)
    for path in envs:
        proc = subprocess.run(["/bin/sh", "-c", '. "$1" && echo "$UCX_IB_SL"', "sh", str(path)],
                              env={"PATH": os.environ["PATH"]}, capture_output=True, text=True, timeout=10)
        assert proc.returncode == 0 and proc.stderr == "" and proc.stdout.strip() in {"1", "2", "3"}, path
    assert not Path(MARKER).exists()


def test_policy_file_quotes_every_name_and_has_no_stray_lines(exported):
    folder, names, _ = exported
    policy = (folder / "qos-policy.conf").read_text()
    for name in names:
        assert f'        name: "{name}"' in policy
        assert f'        source: "{name}"' in policy
    # Outside quoted strings and comments, only the structure qoslab writes.
    keywords = {"port-groups", "port-group", "name:", "use:", "port-guid:", "end-port-group", "end-port-groups",
                "qos-levels", "qos-level", "sl:", "end-qos-level", "end-qos-levels", "qos-match-rules",
                "qos-match-rule", "source:", "destination:", "qos-level-name:", "end-qos-match-rule",
                "end-qos-match-rules"}
    for line in policy.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            continue
        assert stripped.split(" ", 1)[0] in keywords, line
        if '"' in stripped:
            assert stripped.count('"') == 2 and stripped.endswith('"'), line
    readme = (folder / "README.md").read_text()
    table = [line for line in readme.splitlines() if line.startswith("| ")]
    assert len(table) == 1 + len(names) and all(line.count(" | ") == 3 for line in table)


@pytest.mark.parametrize("name, words", [
    ("a\nb", "U+000A"),
    ("a\rb", "U+000D"),
    ("tab\there", "U+0009"),
    ("nul\x00", "U+0000"),
    ("line\u2028sep", "U+2028"),
    ("bidi\u202eevil", "U+202E"),
    ("x" * (MAX_NAME_CHARS + 1), f"limited to {MAX_NAME_CHARS}"),
    ('say "hi"', "cannot hold"),
    (" lead", "white space"),
    ("trail ", "white space"),
])
def test_names_no_file_can_carry_exactly_are_refused_before_anything_is_written(tmp_path, name, words):
    with pytest.raises(ExportError, match=r"jobs\[0\]\.name|job name") as error:
        export_opensm(scenario([name, "plain"]), tmp_path / "deploy")
    assert words in str(error.value)
    assert not (tmp_path / "deploy").exists()


def test_two_names_that_would_share_an_env_file_are_refused(tmp_path):
    with pytest.raises(ExportError, match=r"'a b' and 'a_b' would both be written to env/a_b.env"):
        export_opensm(scenario(["a b", "a_b"]), tmp_path / "deploy")


def test_policy_file_path_with_spaces_or_newlines_is_refused(tmp_path):
    for path in ("/etc/opensm/qos policy.conf", "/etc/x\nqos FALSE", "/etc/#x"):
        with pytest.raises(ExportError, match="--policy-file"):
            export_opensm(scenario(["plain"]), tmp_path / "deploy", policy_file=path)


def test_a_relative_policy_file_is_refused_naming_what_opensm_would_do(tmp_path):
    for path in ("qos-policy.conf", "deploy/qos-policy.conf", "./x.conf", "../etc/x.conf"):
        with pytest.raises(ExportError, match=r"--policy-file .*: a relative path, .*ERR AC01") as error:
            export_opensm(scenario(["plain"]), tmp_path / "deploy", policy_file=path)
        assert "/etc/opensm/qos-policy.conf" in str(error.value)
    assert not (tmp_path / "deploy").exists()
    export_opensm(scenario(["plain"]), tmp_path / "deploy", policy_file=str(tmp_path / "qos-policy.conf"))
    assert f"qos_policy_file {tmp_path / 'qos-policy.conf'}\n" in (tmp_path / "deploy" / "opensm.conf").read_text()


def test_the_readme_shows_labels_and_names_as_written_without_escaping_backslashes(tmp_path):
    export_opensm(scenario(["a_b", "c*d|e"]), tmp_path / "deploy", policy="per-job[a_b=1 c*d|e=2]")
    readme = (tmp_path / "deploy" / "README.md").read_text()
    # Code spans: exact when rendered, and no backslashes when read as plain text.
    assert "Source: `policy 'per-job[a_b=1 c*d|e=2]' of a scenario`." in readme
    assert "| `a_b` | 1 |" in readme and "| `c*d\\|e` | 2 |" in readme  # GFM splits cells before code spans
    assert markdown_code("b`touch x`") == "`` b`touch x` ``" and markdown_code("x``y") == "```x``y```"


def test_a_hostile_policy_label_or_source_stays_inside_its_comment(tmp_path):
    s = scenario(["plain"])
    s._source = "study\nqos FALSE.toml"
    export_opensm(s, tmp_path / "deploy", policy="per-job/high=x\nqos FALSE")
    conf = (tmp_path / "deploy" / "opensm.conf").read_text()
    assert "qos FALSE" in conf and not any(line.startswith("qos FALSE") for line in conf.splitlines())
    # Only the options qoslab writes (QoS; congestion control only when simulated): nothing injected.
    assert all(line.startswith("#") or line.split()[0].startswith(("qos", "max_op_vls")) for line in conf.splitlines())


def test_cli_export_of_a_hostile_name_is_an_error_naming_the_job(tmp_path):
    toml = tmp_path / "s.toml"
    toml.write_text('[topology]\nkind = "xgft"\nm = [4, 2]\nw = [1, 2]\n[[jobs]]\nname = "a\\nb"\nnodes = 2\n'
                    'workload = { kind = "all-to-all", bytes = 4096, iterations = 1 }\n')
    qoslab_cli = shutil.which("qoslab")
    assert qoslab_cli
    proc = subprocess.run([qoslab_cli, "export", "opensm", str(toml), "--out", str(tmp_path / "d")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "jobs[0].name" in proc.stderr and "U+000A" in proc.stderr


def test_two_names_differing_only_in_case_are_refused(tmp_path):
    # OpenSM compares port-group names with strcasecmp: the second group would never be used.
    with pytest.raises(ExportError, match=r"'milc' and 'MILC' differ only in case"):
        export_opensm(scenario(["milc", "MILC"]), tmp_path / "deploy")
    assert not (tmp_path / "deploy").exists()


def _hiding_label(*options: str) -> str:
    """A label whose comment line, cut where OpenSM cuts lines, would make `options` lines of their own."""
    label = "p" * (OPENSM_LINE_BYTES - len("# QoS written by qoslab from policy '"))
    for option in options:
        label += option + " " * (OPENSM_LINE_BYTES - len(option))
    return label + "#"


def test_a_long_policy_label_becomes_comment_lines_opensm_reads_whole(tmp_path):
    export_opensm(scenario(["plain"]), tmp_path / "deploy", policy=_hiding_label("sm_priority 15", "qos FALSE"))
    conf = (tmp_path / "deploy" / "opensm.conf").read_text()
    assert all(len(line.encode()) <= OPENSM_LINE_BYTES for line in conf.splitlines())
    assert all(line.startswith("#") or line.split()[0].startswith(("qos", "max_op_vls")) for line in conf.splitlines())
    read = parse_opensm_conf(conf)
    assert read.enabled and read.warnings == []
    # Several-byte characters are counted as bytes.
    export_opensm(scenario(["plain"]), tmp_path / "wide", policy="\u00e9" * 1500)
    conf = (tmp_path / "wide" / "opensm.conf").read_text()
    assert all(len(line.encode()) <= OPENSM_LINE_BYTES for line in conf.splitlines())
    assert conf.count("\u00e9") == 1500


@requires_ib_tools
def test_opensm_itself_reads_no_option_from_a_long_label(tmp_path):
    folder = tmp_path / "deploy"
    export_opensm(scenario(["plain"]), folder, policy=_hiding_label("sm_priority 15"))
    effective = tmp_path / "effective.conf"
    subprocess.run([tool("opensm"), "-F", str(folder / "opensm.conf"), "-c", str(effective)], capture_output=True,
                   timeout=60, check=False)
    options = dict(line.split(None, 1) for line in effective.read_text().splitlines()
                   if line.strip() and not line.startswith("#") and len(line.split(None, 1)) == 2)
    assert options["sm_priority"] == "0" and options["qos"] == "TRUE"


def test_a_base_with_a_line_opensm_would_cut_is_refused_naming_it(tmp_path):
    base = "qos TRUE\n# " + "x" * OPENSM_LINE_BYTES + " qos FALSE #\nrouting_engine ftree\n"
    with pytest.raises(OpenSmConfError, match=r"site.conf:2: 1036 bytes: OpenSM reads lines of at most 1022"):
        export_opensm(scenario(["plain"]), tmp_path / "deploy", base=base, base_source="site.conf")
    assert not (tmp_path / "deploy").exists()


def test_reading_an_opensm_conf_cuts_long_lines_where_opensm_does():
    hidden = "#" + "x" * (OPENSM_LINE_BYTES - 1) + "max_op_vls 2"
    read = parse_opensm_conf(f"qos TRUE\nmax_op_vls 3\n{hidden}\n", "site.conf")
    assert read.data_vls == 2  # the tail of line 3 is an option to OpenSM, and the last one wins
    assert any(w.startswith("site.conf:3: 1034 bytes") and "'max_op_vls 2'" in w for w in read.warnings)
