//! `qoslab._engine`: converts between Python and the engine, releases the GIL while it runs,
//! and maps engine errors to Python exceptions. No simulation logic lives here.

mod parquet;

use pyo3::create_exception;
use pyo3::exceptions::{PyKeyboardInterrupt, PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use qoslab_engine::sim::output::Column;
use qoslab_engine::sim::Progress;
use qoslab_engine::units::ps_to_ns;
use qoslab_engine::PackedTrace;
use serde_json::Value;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How often a run reports its progress to Python (it is polled every 65,536 events).
const PROGRESS_EVERY: Duration = Duration::from_millis(200);

// Named by their importable module, so that pickle finds them again (a worker's error reaches its caller).
create_exception!(qoslab._engine, ConfigError, PyValueError, "A scenario the engine cannot build; names the key.");
create_exception!(qoslab._engine, EngineError, PyRuntimeError, "A broken invariant inside the engine (a bug).");

fn to_py_err(e: qoslab_engine::Error) -> PyErr {
    match e {
        qoslab_engine::Error::Config(c) => Python::with_gil(|py| {
            let err = ConfigError::new_err(c.to_string());
            // Structured fields so callers need not parse the message.
            let value = err.value(py);
            let _ = value.setattr("key", c.key.as_str());
            let _ = value.setattr("message", c.message.as_str());
            err
        }),
        qoslab_engine::Error::Engine(m) => EngineError::new_err(m),
    }
}

fn json_to_py(py: Python<'_>, v: &Value) -> PyResult<PyObject> {
    Ok(match v {
        Value::Null => py.None(),
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any().unbind(),
        Value::Number(n) => {
            if let Some(i) = n.as_u64() {
                i.into_pyobject(py)?.into_any().unbind()
            } else if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any().unbind()
            } else {
                n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any().unbind()
            }
        }
        Value::String(s) => s.into_pyobject(py)?.into_any().unbind(),
        Value::Array(a) => {
            let items: Vec<PyObject> = a.iter().map(|x| json_to_py(py, x)).collect::<PyResult<_>>()?;
            PyList::new(py, items)?.into_any().unbind()
        }
        Value::Object(m) => {
            let d = PyDict::new(py);
            for (k, x) in m {
                d.set_item(k, json_to_py(py, x)?)?;
            }
            d.into_any().unbind()
        }
    })
}

fn columns_to_py(py: Python<'_>, cols: &[Column]) -> PyResult<PyObject> {
    let d = PyDict::new(py);
    for c in cols {
        d.set_item(c.name, (c.dtype, PyBytes::new(py, &c.data)))?;
    }
    Ok(d.into_any().unbind())
}

/// Trace programs from Python: {job index: (offsets, words)} or (offsets, words, comm_offsets,
/// comm_members) when the trace's collectives run on communicators, all little-endian u64 bytes.
fn packed_traces(traces: Option<&Bound<'_, PyDict>>) -> PyResult<HashMap<usize, PackedTrace>> {
    let mut out = HashMap::new();
    let Some(traces) = traces else { return Ok(out) };
    let words = |b: &[u8]| -> PyResult<Vec<u64>> {
        if !b.len().is_multiple_of(8) {
            return Err(PyValueError::new_err("trace arrays must hold whole u64 values"));
        }
        Ok(b.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect())
    };
    for (job, value) in traces.iter() {
        let job: usize = job.extract()?;
        let parts: Vec<Vec<u8>> = value.extract()?;
        let (offsets, ops, comm_offsets, comm_members) = match parts.as_slice() {
            [o, w] => (o, w, &Vec::new(), &Vec::new()),
            [o, w, co, cm] => (o, w, co, cm),
            _ => {
                return Err(PyValueError::new_err(
                    "a trace is (offsets, words) or (offsets, words, comm_offsets, comm_members)",
                ))
            }
        };
        out.insert(
            job,
            PackedTrace {
                offsets: words(offsets)?,
                words: words(ops)?,
                comm_offsets: words(comm_offsets)?,
                comm_members: words(comm_members)?,
            },
        );
    }
    Ok(out)
}

/// Runs one engine config (JSON). Releases the GIL; Ctrl-C stops the run and returns what was
/// measured so far with `summary["interrupted"] = True`. `progress(now_us, end_us, events)`, if
/// given, is called about every `PROGRESS_EVERY` of wall time while the run lasts; an exception
/// it raises stops the run and is raised here.
#[pyfunction]
#[pyo3(signature = (config_json, traces=None, progress=None))]
fn run(
    py: Python<'_>,
    config_json: &str,
    traces: Option<&Bound<'_, PyDict>>,
    progress: Option<PyObject>,
) -> PyResult<PyObject> {
    let config = config_json.to_owned();
    let traces = packed_traces(traces)?;
    let mut failure: Option<PyErr> = None;
    let result = py.allow_threads(|| {
        let mut last = Instant::now();
        let mut should_stop = |p: &Progress| {
            Python::with_gil(|py| {
                if let Err(e) = py.check_signals() {
                    // Ctrl-C is an interruption (partial results); anything else a signal handler
                    // raised (a timeout, sys.exit) is the caller's own error, raised as it is.
                    if !e.is_instance_of::<PyKeyboardInterrupt>(py) {
                        failure = Some(e);
                    }
                    return true;
                }
                let Some(report) = &progress else { return false };
                if last.elapsed() < PROGRESS_EVERY {
                    return false;
                }
                last = Instant::now();
                let (now_us, end_us) = (ps_to_ns(p.now) / 1e3, ps_to_ns(p.end) / 1e3);
                match report.call1(py, (now_us, end_us, p.events)) {
                    Ok(_) => false,
                    Err(e) => {
                        // A Ctrl-C that lands while the callback runs is an interruption too.
                        if !e.is_instance_of::<PyKeyboardInterrupt>(py) {
                            failure = Some(e);
                        }
                        true
                    }
                }
            })
        };
        qoslab_engine::run_reporting(&config, &traces, &mut should_stop)
    });
    if let Some(e) = failure {
        return Err(e);
    }
    let out = result.map_err(to_py_err)?;
    let d = PyDict::new(py);
    d.set_item("summary", json_to_py(py, &out.summary)?)?;
    d.set_item("nodes", PyList::new(py, &out.node_names)?)?;
    // The names of the messages table's mpi_kind codes (its one owner, the MPI layer).
    d.set_item("mpi_kinds", PyList::new(py, qoslab_engine::mpi::MESSAGE_KINDS)?)?;
    d.set_item("links", columns_to_py(py, &out.links)?)?;
    for (name, table) in [
        ("messages", &out.messages),
        ("ranks", &out.ranks),
        ("interference", &out.interference),
        ("port_waits", &out.port_waits),
        ("ccti", &out.ccti),
        ("cc_marks", &out.cc_marks),
    ] {
        match table {
            Some(t) => d.set_item(name, columns_to_py(py, t)?)?,
            None => d.set_item(name, py.None())?,
        }
    }
    Ok(d.into_any().unbind())
}

/// Checks an engine config without building its fabric; raises ConfigError naming the key.
#[pyfunction]
fn validate(config_json: &str) -> PyResult<()> {
    qoslab_engine::validate(config_json).map_err(to_py_err)
}

/// Describes the fabric of an engine config without simulating.
#[pyfunction]
#[pyo3(signature = (config_json, traces=None))]
fn describe(py: Python<'_>, config_json: &str, traces: Option<&Bound<'_, PyDict>>) -> PyResult<PyObject> {
    let v = qoslab_engine::describe(config_json, &packed_traces(traces)?).map_err(to_py_err)?;
    json_to_py(py, &v)
}

/// The cabling of a topology config (JSON), and with a routing config its forwarding tables.
#[pyfunction]
#[pyo3(signature = (topology_json, routing_json=None))]
fn fabric(py: Python<'_>, topology_json: &str, routing_json: Option<&str>) -> PyResult<PyObject> {
    let v = qoslab_engine::fabric(topology_json, routing_json).map_err(to_py_err)?;
    json_to_py(py, &v)
}

/// Hold-model speed of the bare event list at `pending` events.
#[pyfunction]
#[pyo3(signature = (pending, operations, seed=1))]
fn bench_event_queue(py: Python<'_>, pending: usize, operations: u64, seed: u64) -> PyResult<PyObject> {
    let v = py.allow_threads(move || qoslab_engine::bench_event_queue(pending.max(1), operations, seed));
    json_to_py(py, &v)
}

/// Writes a table to a Parquet file (src/parquet.rs). `columns`: (name, kind, numpy dtype,
/// little-endian bytes, extra) with kind "numbers", "names" (extra: the names the values index),
/// "bool" or "masked" (extra: the value that stands for null), as `qoslab.tables` describes them.
#[pyfunction]
fn write_parquet(py: Python<'_>, path: &str, columns: &Bound<'_, PyList>) -> PyResult<()> {
    let mut specs = Vec::with_capacity(columns.len());
    for item in columns.iter() {
        let (name, kind, dtype, data, extra): (String, String, String, Bound<'_, PyBytes>, Bound<'_, PyAny>) =
            item.extract()?;
        let values = match kind.as_str() {
            "numbers" => parquet::Values::Numbers,
            "names" => parquet::Values::Names(extra.extract()?),
            "bool" => parquet::Values::Bool,
            // The null value as the column's bits (a negative one sign-extended, as `bits` reads it).
            "masked" => parquet::Values::Masked(extra.extract()?),
            _ => return Err(PyValueError::new_err(format!("column {name}: unknown kind {kind:?}"))),
        };
        specs.push(parquet::ColumnSpec { name, dtype, data: data.as_bytes().to_vec(), values });
    }
    let owned = path.to_owned();
    py.allow_threads(move || parquet::write(&owned, &specs)).map_err(|e| match e {
        parquet::WriteError::Columns(m) => PyValueError::new_err(m),
        // OSError(errno, strerror, filename): Python picks the subclass (FileNotFoundError, ...).
        parquet::WriteError::File(errno, m) => PyOSError::new_err((errno.unwrap_or(0), m, path.to_owned())),
    })
}

#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

#[pymodule]
fn _engine(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(validate, m)?)?;
    m.add_function(wrap_pyfunction!(describe, m)?)?;
    m.add_function(wrap_pyfunction!(fabric, m)?)?;
    m.add_function(wrap_pyfunction!(bench_event_queue, m)?)?;
    m.add_function(wrap_pyfunction!(write_parquet, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add("ConfigError", m.py().get_type::<ConfigError>())?;
    m.add("EngineError", m.py().get_type::<EngineError>())?;
    Ok(())
}
