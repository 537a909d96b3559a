"""Command-line behaviour on bad input: exit 2, a message naming file and key, never a traceback.
These cases fail before the engine is reached, so they need no compiled engine."""

import pytest
from qoslab.cli import app
from typer.testing import CliRunner

runner = CliRunner()


def invoke(*args):
    result = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("command", ["run", "check"])
@pytest.mark.parametrize(
    "text, expected",
    [
        ("colour = 1\n", "colour: unknown key"),
        ("[fabric]\nmtu_bytes = 3000\n", "fabric.mtu_bytes: expected 256, 512, 1024, 2048 or 4096, got 3000"),
        ("[fabric]\nlink_gbps = \"fast\"\n", "fabric.link_gbps: expected a number"),
        ("[[traffic]]\nload = 1.5\n", "traffic[0].load: expected a fraction in (0, 1]"),
        ("[topology]\nkind = \"xgft\"\nm = [8, 4]\nw = [1]\n", "topology.w: expected as many entries as m"),
        ("[topology]\nkind = \"dragonfly-plus\"\n", 'topology.groups: expected a number (or preset = "marconi100")'),
        ("[qos]\nvlarb_low = \"0:64,16:1\"\n", "qos.vlarb_low: bad entry \"16:1\""),
        ("[run]\nwarmup_us = 600\n", "run.warmup_us: expected less than run.duration_us"),
        ("[fabric]\nport_buffer_bytes = 65536\nvl_buffer_bytes = 16384\n",
         ("fabric.port_buffer_bytes: give fabric.port_buffer_bytes (one buffer per port, divided among the data "
          "VLs) or fabric.vl_buffer_bytes")),
        ("[fabric]\ndata_vls = 8\nport_buffer_bytes = 32768\n",
         "fabric.port_buffer_bytes: expected at least 33280 bytes for 8 data VLs (fabric.data_vls = 8)"),
    ],
)
def test_bad_scenario_exits_2_naming_file_and_key(tmp_path, command, text, expected):
    path = write(tmp_path, "bad.toml", text)
    result = invoke(command, path)
    assert result.exit_code == 2
    assert f"{path}: {expected}" in result.stderr


def test_every_problem_is_reported(tmp_path):
    path = write(tmp_path, "bad.toml", "[fabric]\nmtu_bytes = 3000\n[[traffic]]\nload = \"fast\"\n")
    result = invoke("check", path)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2
    assert "fabric.mtu_bytes" in lines[0] and "traffic[0].load" in lines[1]


@pytest.mark.parametrize("command", ["run", "check"])
def test_toml_syntax_error(tmp_path, command):
    path = write(tmp_path, "broken.toml", "seed = 1\n\n[fabric\nmtu_bytes = 4096\n")
    result = invoke(command, path)
    assert result.exit_code == 2
    assert f"{path}: line 3, column" in result.stderr
    assert "TOML syntax error" in result.stderr


@pytest.mark.parametrize("command", ["run", "check"])
def test_missing_file(tmp_path, command):
    path = tmp_path / "missing.toml"
    result = invoke(command, path)
    assert result.exit_code == 2
    assert f"{path}: file not found" in result.stderr


def test_directory_instead_of_file(tmp_path):
    result = invoke("check", tmp_path)
    assert result.exit_code == 2
    assert "is a directory" in result.stderr


def test_bad_set_value_is_marked(tmp_path):
    path = write(tmp_path, "ok.toml", "[[traffic]]\nload = 0.5\n")
    result = invoke("run", path, "--set", "fabric.data_vls=3")
    assert result.exit_code == 2
    assert f"{path}: fabric.data_vls: expected 1, 2, 4, 8 or 15, got 3 (from --set)" in result.stderr


def test_buffer_too_small_for_the_vls_set_on_the_command_line(tmp_path):
    # 32 KiB holds one 4160-byte packet per VL for 4 VLs (8192 each), not for 8 (4096 each).
    path = write(tmp_path, "ok.toml", "[fabric]\nport_buffer_bytes = 32768\n")
    result = invoke("check", path, "--set", "fabric.data_vls=8")
    assert result.exit_code == 2
    assert (f"{path}: fabric.port_buffer_bytes: expected at least 33280 bytes for 8 data VLs (fabric.data_vls "
            f"= 8): each VL's share must hold one MTU packet: 4096 + 26 header bytes, rounded up to 64-byte "
            f"credits (4160 bytes); got 32768, which leaves 4096 bytes per VL") in result.stderr
    both = invoke("check", path, "--set", "fabric.vl_buffer_bytes=8192")
    assert both.exit_code == 2
    assert f"{path}: fabric.port_buffer_bytes: " in both.stderr and "not both; got 32768 and 8192" in both.stderr


@pytest.mark.parametrize(
    "item, expected",
    [
        ("data_vls", "--set: expected KEY=VALUE"),
        ("traffic[3].load=0.1", "--set traffic[3].load: traffic has 1 entries"),
    ],
)
def test_malformed_set(tmp_path, item, expected):
    path = write(tmp_path, "ok.toml", "[[traffic]]\nload = 0.5\n")
    result = invoke("check", path, "--set", item)
    assert result.exit_code == 2
    assert expected in result.stderr


def test_empty_study_file_names_what_is_missing(tmp_path):
    path = write(tmp_path, "study.toml", "")
    result = invoke("study", path)
    assert result.exit_code == 2
    assert "study.toml: scenario: required key is missing" in result.stderr
    assert "study.toml: policies: required key is missing" in result.stderr


def test_version():
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.stdout.startswith("qoslab ")


def test_help_lists_commands():
    result = invoke("--help")
    assert result.exit_code == 0
    for command in ("run", "check", "study"):
        assert command in result.stdout


def test_missing_argument_is_a_usage_error():
    result = invoke("run")
    assert result.exit_code == 2
