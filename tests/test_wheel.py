"""Installable without Rust (issue 18, part 1): the manylinux2014 abi3 wheel and the sdist that
scripts/build-wheel builds from the package registries alone (maturin with zig as the linker,
both from `qoslab[test]`), and
the wheel installs into a fresh virtual environment with no Rust on PATH, as the core install
(no extra), and runs a scenario and a small study."""

import os
import re
import shutil
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest
from two_jobs import TOML as SCENARIO

ROOT = Path(__file__).resolve().parent.parent
STUDY = 'scenario = "base.toml"\n[[policies]]\nkind = "default"\n[[policies]]\nkind = "per-job"\nassignment = { a2a = 1, flood = 0 }\n'


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    done = subprocess.run(["bash", str(ROOT / "scripts" / "build-wheel"), str(out)], env=env,
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_the_wheel_is_manylinux2014_abi3_and_needs_glibc_2_17_at_most(dist):
    (wheel,) = dist.glob("*.whl")
    assert "-cp311-abi3-" in wheel.name and "manylinux2014_x86_64" in wheel.name, wheel.name
    with zipfile.ZipFile(wheel) as archive:
        (library,) = [n for n in archive.namelist() if n.endswith(".so")]
        assert "qoslab/py.typed" in archive.namelist()
        needed = {tuple(map(int, v)) for v in re.findall(rb"GLIBC_2\.(\d+)(?:\.(\d+))?", archive.read(library))
                  for v in [[x or b"0" for x in v]]}
    assert needed and max(needed) <= (17, 0), sorted(needed)  # RHEL/CentOS 7 and every later login node


def test_the_sdist_holds_the_engine_and_the_package(dist):
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = archive.getnames()
    for part in ("pyproject.toml", "crates/qoslab-engine/src/lib.rs", "python/qoslab/cli.py"):
        assert any(n.endswith(part) for n in names), part


def test_the_wheel_runs_a_scenario_and_a_study_without_rust(dist, tmp_path):
    (wheel,) = dist.glob("*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / "bin"
    path = os.pathsep.join([str(bin_dir), "/usr/bin", "/bin"])
    assert shutil.which("cargo", path=path) is None and shutil.which("rustc", path=path) is None
    env = {"PATH": path, "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    for key in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST", "PIP_CERT", "SSL_CERT_FILE",
                "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"):
        if key in os.environ:
            env[key] = os.environ[key]

    def run(*args, cwd=tmp_path):
        done = subprocess.run([*map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-3000:])
        return done

    run(bin_dir / "python", "-m", "pip", "install", "--quiet", wheel)
    installed = run(bin_dir / "python", "-m", "pip", "list", "--format=freeze").stdout.lower()
    for extra_package in ("scipy", "optuna", "distributed", "dask-jobqueue", "otf2", "maturin"):
        assert f"\n{extra_package}==" not in f"\n{installed}", f"{extra_package} is in the core install"
    (tmp_path / "base.toml").write_text(SCENARIO)
    (tmp_path / "study.toml").write_text(STUDY)
    run(bin_dir / "qoslab", "run", "base.toml", "--out", "run")
    assert (tmp_path / "run" / "summary.json").is_file()
    run(bin_dir / "qoslab", "study", "study.toml", "--out", "study", "--workers", "1")
    assert (tmp_path / "study" / "report.html").is_file()
