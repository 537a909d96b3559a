"""The core install needs none of the extras (issue 18, part 2): the core commands run with every
optional package made unimportable, and a feature whose extra is missing says which extra to
install. The full test suite runs with every extra installed (`qoslab[test]` includes `[all]`)."""

import subprocess
import sys
import textwrap

import pytest
from qoslab.analysis.confidence import mean_interval, student_t_quantile
from qoslab.extras import EXTRA_OF, MissingExtra, require
from two_jobs import TOML as SCENARIO

# Run a command with the optional packages made unimportable, as in a core install.
BLOCKED_RUN = textwrap.dedent("""\
    import sys
    BLOCKED = {blocked!r}

    class Blocker:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None

    sys.meta_path.insert(0, Blocker())
    from qoslab.cli import main
    sys.argv = ["qoslab", *sys.argv[1:]]
    try:
        main()
    finally:
        sys.stdout.flush()
        leaked = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
        assert not leaked, leaked
""")
OPTIONAL = sorted({*EXTRA_OF, "dask"})



def core(tmp_path, *args, blocked=OPTIONAL):
    script = tmp_path / "blocked_run.py"
    script.write_text(BLOCKED_RUN.format(blocked=blocked))
    return subprocess.run([sys.executable, str(script), *map(str, args)], capture_output=True, text=True, timeout=600)


def test_the_core_commands_need_no_extra(tmp_path):
    (tmp_path / "base.toml").write_text(SCENARIO)
    (tmp_path / "study.toml").write_text('repetitions = 2\nscenario = "base.toml"\n[[policies]]\nkind = "default"\n'
                                         '[[policies]]\nkind = "per-job"\nassignment = { a2a = 1, flood = 0 }\n')
    for args in (["check", tmp_path / "base.toml"],
                 ["run", tmp_path / "base.toml", "--out", tmp_path / "run"],
                 ["study", tmp_path / "study.toml", "--out", tmp_path / "study", "--workers", "1"],
                 ["export", "opensm", tmp_path / "study", "--out", tmp_path / "opensm", "--policy", "per-job[a2a=1 flood=0]"]):
        done = core(tmp_path, *args)
        assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-3000:])
    assert (tmp_path / "study" / "report.html").is_file()  # the report, with confidence intervals
    assert (tmp_path / "opensm" / "qos-policy.conf").is_file()


def test_a_missing_extra_is_named_with_exit_2(tmp_path):
    (tmp_path / "base.toml").write_text(SCENARIO)
    (tmp_path / "study.toml").write_text('scenario = "base.toml"\n[[policies]]\nkind = "default"\n')
    done = core(tmp_path, "study", tmp_path / "study.toml", "--out", tmp_path / "out", "--scheduler", "tcp://127.0.0.1:1")
    assert done.returncode == 2, done.stderr
    assert "needs the optional package 'distributed'" in done.stderr and "pip install 'qoslab[dask]'" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("module", "extra"), sorted(EXTRA_OF.items()))
def test_require_names_the_extra(monkeypatch, module, extra):
    monkeypatch.setitem(sys.modules, module, None)  # None in sys.modules makes an import fail
    with pytest.raises(MissingExtra, match=rf"pip install 'qoslab\[{extra}\]'"):
        require(module, "this feature")


def test_a_broken_import_inside_an_installed_package_is_not_called_a_missing_extra(monkeypatch, tmp_path):
    # An "optuna" that is installed but whose own dependency is missing: that error stays as it is.
    (tmp_path / "optuna").mkdir()
    (tmp_path / "optuna" / "__init__.py").write_text("import qoslab_no_such_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "optuna", raising=False)
    with pytest.raises(ImportError) as caught:
        require("optuna", "this feature")
    assert not isinstance(caught.value, MissingExtra) and caught.value.name == "qoslab_no_such_dependency"


# Two-sided 95% and 99% critical values of Student's t (NIST/SEMATECH e-Handbook, table 1.3.6.7.2).
T_TABLE = {(0.95, 1): 12.706, (0.95, 2): 4.303, (0.95, 3): 3.182, (0.95, 4): 2.776, (0.95, 5): 2.571,
           (0.95, 10): 2.228, (0.95, 30): 2.042, (0.95, 100): 1.984, (0.99, 1): 63.657, (0.99, 5): 4.032,
           (0.99, 20): 2.845, (0.99, 100): 2.626}


@pytest.mark.parametrize(("confidence", "dof"), sorted(T_TABLE))
def test_student_t_quantile_matches_the_published_table(confidence, dof):
    assert student_t_quantile(confidence, dof) == pytest.approx(T_TABLE[confidence, dof], abs=6e-4)


def test_student_t_quantile_matches_scipy_to_double_precision():
    from scipy import stats  # installed with qoslab[test]

    for confidence in (0.5, 0.8, 0.9, 0.95, 0.99, 0.999):
        for dof in [*range(1, 41), 64, 99, 100, 257, 1000, 4001]:
            assert student_t_quantile(confidence, dof) == pytest.approx(stats.t.ppf(0.5 + confidence / 2, dof), rel=1e-11)


def test_the_interval_of_a_mean_is_the_textbook_one():
    interval = mean_interval([1.0, 2.0, 3.0, 4.0])  # mean 2.5, s = 1.291, t(0.975, 3) = 3.182
    assert interval.half_width == pytest.approx(3.182446 * 1.2909944 / 2, rel=1e-6)


def test_student_t_quantile_refuses_what_has_no_quantile():
    with pytest.raises(ValueError, match="dof >= 1"):
        student_t_quantile(0.95, 0)
