//! Parquet files of a run's tables, written here so that `qoslab run` needs neither numpy nor
//! pyarrow (issue 15, part 4: start-up). The columns are described on the Python side
//! (`qoslab.tables`), which also builds the same tables in memory with pyarrow when they are
//! asked for; both read one description, so a file and its in-memory table cannot disagree
//! (tests/test_tables.py reads every kind back through pyarrow).
//!
//! The files read back in pyarrow with the types its own writer would give them: every column
//! optional (pyarrow's fields are nullable), integers annotated with their width and sign,
//! strings as UTF-8 (dictionary-encoded, as pyarrow writes them), snappy compression.

use parquet::basic::{Compression, LogicalType, Repetition, Type as PhysicalType};
use parquet::column::writer::ColumnWriter;
use parquet::data_type::ByteArray;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;
use std::fs::File;
use std::sync::Arc;

/// A column's values: little-endian bytes of one numpy dtype (`<u1`, `<u2`, `<u4`, `<u8`, `<i4`,
/// `<i8`, `<f8`), and how they become the column.
pub enum Values {
    /// The numbers as they are.
    Numbers,
    /// Each value is an index into these names: a string column.
    Names(Vec<String>),
    /// Non-zero is true.
    Bool,
    /// The numbers, null where a value equals this one (in the dtype's range).
    Masked(i128),
}

pub struct ColumnSpec {
    pub name: String,
    pub dtype: String,
    pub data: Vec<u8>,
    pub values: Values,
}

/// Rows per row group: pyarrow's default (1 Mi rows).
const ROW_GROUP_ROWS: usize = 1 << 20;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Dtype {
    Unsigned(u8),
    I32,
    I64,
    F64,
}

impl Dtype {
    fn parse(name: &str, dtype: &str) -> Result<Dtype, String> {
        Ok(match dtype {
            "<u1" => Dtype::Unsigned(1),
            "<u2" => Dtype::Unsigned(2),
            "<u4" => Dtype::Unsigned(4),
            "<u8" => Dtype::Unsigned(8),
            "<i4" => Dtype::I32,
            "<i8" => Dtype::I64,
            "<f8" => Dtype::F64,
            _ => {
                return Err(format!(
                    "column {name}: dtype {dtype:?} cannot be written (expected <u1, <u2, <u4, <u8, <i4, <i8 or <f8)"
                ))
            }
        })
    }

    fn width(self) -> usize {
        match self {
            Dtype::Unsigned(w) => w as usize,
            Dtype::I32 => 4,
            Dtype::I64 | Dtype::F64 => 8,
        }
    }

    /// Value `i` of `data` as a number (integers only): what numpy reads.
    fn value(self, data: &[u8], i: usize) -> i128 {
        let bits = self.bits(data, i);
        match self {
            Dtype::Unsigned(_) => bits as i128,
            _ => bits as i64 as i128,
        }
    }

    /// The values the dtype holds (integers only).
    fn range(self) -> std::ops::RangeInclusive<i128> {
        match self {
            Dtype::Unsigned(w) => 0..=(u64::MAX >> (64 - 8 * w as u32)) as i128,
            Dtype::I32 => i32::MIN as i128..=i32::MAX as i128,
            _ => i64::MIN as i128..=i64::MAX as i128,
        }
    }

    /// Value `i` of `data` as u64 bits (sign-extended for <i4), integers only.
    fn bits(self, data: &[u8], i: usize) -> u64 {
        let w = self.width();
        let mut b = [0u8; 8];
        b[..w].copy_from_slice(&data[i * w..(i + 1) * w]);
        let v = u64::from_le_bytes(b);
        match self {
            Dtype::I32 => v as u32 as i32 as i64 as u64,
            _ => v,
        }
    }
}

struct Prepared {
    dtype: Dtype,
    rows: usize,
}

fn prepare(c: &ColumnSpec) -> Result<Prepared, String> {
    let dtype = Dtype::parse(&c.name, &c.dtype)?;
    if !c.data.len().is_multiple_of(dtype.width()) {
        return Err(format!("column {}: {} bytes is not a whole number of {} values", c.name, c.data.len(), c.dtype));
    }
    if matches!(c.values, Values::Names(_) | Values::Bool | Values::Masked(_)) && dtype == Dtype::F64 {
        return Err(format!("column {}: names, booleans and masks need integer values, not {}", c.name, c.dtype));
    }
    Ok(Prepared { dtype, rows: c.data.len() / dtype.width() })
}

fn field(c: &ColumnSpec, p: &Prepared) -> Result<Type, String> {
    let (physical, logical) = match (&c.values, p.dtype) {
        (Values::Names(_), _) => (PhysicalType::BYTE_ARRAY, Some(LogicalType::String)),
        (Values::Bool, _) => (PhysicalType::BOOLEAN, None),
        (_, Dtype::Unsigned(w)) => (
            if w == 8 { PhysicalType::INT64 } else { PhysicalType::INT32 },
            Some(LogicalType::integer(8 * w as i8, false)),
        ),
        (_, Dtype::I32) => (PhysicalType::INT32, Some(LogicalType::integer(32, true))),
        (_, Dtype::I64) => (PhysicalType::INT64, Some(LogicalType::integer(64, true))),
        (_, Dtype::F64) => (PhysicalType::DOUBLE, None),
    };
    Type::primitive_type_builder(&c.name, physical)
        .with_repetition(Repetition::OPTIONAL)
        .with_logical_type(logical)
        .build()
        .map_err(|e| format!("column {}: {e}", c.name))
}

/// Why a table was not written.
pub enum WriteError {
    /// The columns do not describe a table (a bug on the calling side).
    Columns(String),
    /// The file could not be written: the system's error number when there is one, and what
    /// went wrong. A file this call created is removed again.
    File(Option<i32>, String),
}

/// Writes `columns` (all of one length) to `path` as one Parquet file. On failure the partial
/// file is removed.
pub fn write(path: &str, columns: &[ColumnSpec]) -> Result<(), WriteError> {
    let prepared = check(columns).map_err(WriteError::Columns)?;
    let rows = prepared.first().map_or(0, |p| p.rows);
    let fields = columns.iter().zip(&prepared).map(|(c, p)| field(c, p).map(Arc::new)).collect::<Result<Vec<_>, _>>();
    let fields = fields.map_err(WriteError::Columns)?;
    let schema = Type::group_type_builder("schema")
        .with_fields(fields)
        .build()
        .map_err(|e| WriteError::Columns(e.to_string()))?;
    // Only a file this call created is removed on failure: not one it could not open.
    let file = File::create(path).map_err(|e| {
        // The system's own words, without Rust's " (os error N)" (the number travels beside them).
        let text = e.to_string();
        WriteError::File(e.raw_os_error(), text.split(" (os error").next().unwrap_or(&text).to_owned())
    })?;
    let result = write_file(file, Arc::new(schema), columns, &prepared, rows);
    if result.is_err() {
        let _ = std::fs::remove_file(path);
    }
    result.map_err(|e| WriteError::File(None, e))
}

/// Every column has a known dtype, whole values, the table's length, and names for each index:
/// each column's dtype and length.
fn check(columns: &[ColumnSpec]) -> Result<Vec<Prepared>, String> {
    let prepared: Vec<Prepared> = columns.iter().map(prepare).collect::<Result<_, _>>()?;
    let rows = prepared.first().map_or(0, |p| p.rows);
    if let Some((c, p)) = columns.iter().zip(&prepared).find(|(_, p)| p.rows != rows) {
        return Err(format!("column {} has {} rows, the table's first column {rows}", c.name, p.rows));
    }
    for (i, c) in columns.iter().enumerate() {
        if columns[..i].iter().any(|other| other.name == c.name) {
            return Err(format!("column {} is given twice", c.name));
        }
    }
    for (c, p) in columns.iter().zip(&prepared) {
        match &c.values {
            Values::Names(names) => {
                let named = 0..names.len() as i128;
                if let Some(i) = (0..p.rows).find(|&i| !named.contains(&p.dtype.value(&c.data, i))) {
                    let value = p.dtype.value(&c.data, i);
                    return Err(format!("column {}: row {i} names entry {value} of {}", c.name, names.len()));
                }
            }
            Values::Masked(null) if !p.dtype.range().contains(null) => {
                return Err(format!("column {}: null value {null} is not a {} value", c.name, c.dtype));
            }
            _ => {}
        }
    }
    Ok(prepared)
}

fn write_file(
    file: File,
    schema: Arc<Type>,
    columns: &[ColumnSpec],
    prepared: &[Prepared],
    rows: usize,
) -> Result<(), String> {
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_created_by(format!("qoslab {}", env!("CARGO_PKG_VERSION")))
        .build();
    let mut writer = SerializedFileWriter::new(file, schema, Arc::new(props)).map_err(|e| e.to_string())?;
    for group_start in (0..rows).step_by(ROW_GROUP_ROWS) {
        let (start, end) = (group_start, (group_start + ROW_GROUP_ROWS).min(rows));
        let mut group = writer.next_row_group().map_err(|e| e.to_string())?;
        for (c, p) in columns.iter().zip(prepared) {
            let mut column = group.next_column().map_err(|e| e.to_string())?.expect("one writer per field");
            write_column(column.untyped(), c, p, start, end).map_err(|e| format!("column {}: {e}", c.name))?;
            column.close().map_err(|e| e.to_string())?;
        }
        group.close().map_err(|e| e.to_string())?;
    }
    writer.close().map_err(|e| e.to_string())?;
    Ok(())
}

fn write_column(
    writer: &mut ColumnWriter<'_>,
    c: &ColumnSpec,
    p: &Prepared,
    start: usize,
    end: usize,
) -> parquet::errors::Result<()> {
    let d = p.dtype;
    let rows = start..end;
    let present: Vec<i16> = match c.values {
        Values::Masked(null) => rows.clone().map(|i| (d.value(&c.data, i) != null) as i16).collect(),
        _ => vec![1; end - start],
    };
    // Values of the present rows only (Parquet stores nulls in the definition levels alone).
    let kept = || rows.clone().filter(|&i| !matches!(c.values, Values::Masked(null) if d.value(&c.data, i) == null));
    match (writer, &c.values) {
        (ColumnWriter::ByteArrayColumnWriter(w), Values::Names(names)) => {
            let names: Vec<ByteArray> = names.iter().map(|n| ByteArray::from(n.as_str())).collect();
            let values: Vec<ByteArray> = kept().map(|i| names[d.bits(&c.data, i) as usize].clone()).collect();
            w.write_batch(&values, Some(&present), None)?;
        }
        (ColumnWriter::BoolColumnWriter(w), Values::Bool) => {
            let values: Vec<bool> = kept().map(|i| d.bits(&c.data, i) != 0).collect();
            w.write_batch(&values, Some(&present), None)?;
        }
        (ColumnWriter::Int32ColumnWriter(w), _) => {
            let values: Vec<i32> = kept().map(|i| d.bits(&c.data, i) as i32).collect();
            w.write_batch(&values, Some(&present), None)?;
        }
        (ColumnWriter::Int64ColumnWriter(w), _) => {
            let values: Vec<i64> = kept().map(|i| d.bits(&c.data, i) as i64).collect();
            w.write_batch(&values, Some(&present), None)?;
        }
        (ColumnWriter::DoubleColumnWriter(w), _) => {
            let values: Vec<f64> =
                kept().map(|i| f64::from_le_bytes(c.data[i * 8..i * 8 + 8].try_into().expect("8 bytes"))).collect();
            w.write_batch(&values, Some(&present), None)?;
        }
        _ => unreachable!("the field's physical type follows the column's dtype and kind"),
    }
    Ok(())
}
