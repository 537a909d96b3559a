"""The Dask executor's guards (issue 18, part 3): a cluster with no worker is said, not waited on;
plain tcp:// off this machine is warned about; tls:// without TLS settings is refused, naming them."""

import pytest
from qoslab.sweep.execute import RunSpec
from qoslab.sweep.executors import DaskExecutor, NoLiveWorker, scheduler_security


def test_a_cluster_without_workers_stops_the_study_saying_so():
    from distributed import LocalCluster

    with LocalCluster(n_workers=0, processes=False, dashboard_address=None) as cluster:
        executor = DaskExecutor(cluster, no_worker_timeout_s=1.0, describe_workers=lambda: "no job")
        try:
            spec = RunSpec(run_id="r0", repetition=0, seed=1, policy="default", mode="shared", alone_job=None, scenario={})
            with pytest.raises(NoLiveWorker, match=r"no live Dask worker for 1 s \(no job\); 1 run\(s\) not done"):
                list(executor.run([spec]))
        finally:
            executor.close()


def test_plain_tcp_to_another_machine_is_warned_about():
    _, warnings = scheduler_security("tcp://192.0.2.7:8786")
    assert len(warnings) == 1 and "anyone who can reach this port can run code" in warnings[0]
    assert scheduler_security("tcp://127.0.0.1:8786")[1] == []
    assert scheduler_security("localhost:8786")[1] == []


def test_tls_without_tls_settings_is_refused_naming_them(monkeypatch):
    import dask

    with dask.config.set({"distributed.comm.tls.ca-file": None}), \
            pytest.raises(ValueError, match="distributed.comm.tls.ca-file"):
        scheduler_security("tls://192.0.2.7:8786")
