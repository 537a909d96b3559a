"""A run reports where it stands while it lasts (issue 15, part 4): `simulate(..., progress=)`
gets simulated time, the run's end and the event count about five times a second, and an
exception in the callback stops the run and reaches the caller."""

import pytest
from qoslab import Scenario
from qoslab.simulate import simulate

# About two seconds of engine time: long enough for several reports 0.2 s apart.
LONG = {"name": "long", "topology": {"kind": "xgft", "m": [16, 16], "w": [1, 16]},
        "traffic": [{"pattern": "uniform", "load": 0.8}], "run": {"duration_us": 2000, "warmup_us": 0}}


def test_progress_reports_simulated_time_end_and_events_in_order():
    calls = []
    result = simulate(Scenario.model_validate(LONG), progress=lambda now, end, events: calls.append((now, end, events)))
    assert calls, "a run of about a second reports at least once"
    assert all(end == pytest.approx(2000.0) for _, end, _ in calls)
    nows, events = [c[0] for c in calls], [c[2] for c in calls]
    assert nows == sorted(nows) and all(0 < n <= 2000.0 for n in nows)
    assert events == sorted(events) and events[-1] <= result.summary["events"]


def test_an_exception_in_the_progress_callback_stops_the_run():
    class Stop(Exception):
        pass

    def stop(now, end, events):
        raise Stop(now)

    with pytest.raises(Stop):
        simulate(Scenario.model_validate(LONG), progress=stop)
