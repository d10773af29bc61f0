//! A reproduction's tables: one definition that gives both the CSV file (numbers rounded
//! as the file has always had them) and the full-precision columns Python turns into
//! DataFrames, so the two cannot drift apart.

use std::fmt::Write as _;

/// One value of a table.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    /// Text.
    Str(String),
    /// A count.
    Int(u64),
    /// A number, written to CSV with this many decimals; `None` is an empty CSV field.
    Float(Option<f64>, usize),
}

impl Cell {
    /// A number with `decimals` in the CSV.
    pub fn float(v: f64, decimals: usize) -> Self {
        Cell::Float(Some(v), decimals)
    }

    fn write_csv(&self, s: &mut String) {
        let _ = match self {
            Cell::Str(v) => {
                write_csv_field(s, v);
                Ok(())
            }
            Cell::Int(v) => write!(s, "{v}"),
            Cell::Float(Some(v), d) => write!(s, "{v:.d$}"),
            Cell::Float(None, _) => Ok(()),
        };
    }
}

/// RFC 4180: a field holding a comma, a quote or a line break is quoted, its quotes doubled,
/// so a reader (pandas, the `csv` module, a spreadsheet) finds the columns the header names.
fn write_csv_field(s: &mut String, v: &str) {
    if v.contains([',', '"', '\n', '\r']) {
        s.push('"');
        s.push_str(&v.replace('"', "\"\""));
        s.push('"');
    } else {
        s.push_str(v);
    }
}

impl From<&str> for Cell {
    fn from(v: &str) -> Self {
        Cell::Str(v.to_string())
    }
}

impl From<&String> for Cell {
    fn from(v: &String) -> Self {
        Cell::Str(v.clone())
    }
}

impl From<u64> for Cell {
    fn from(v: u64) -> Self {
        Cell::Int(v)
    }
}

/// A named table: a header and rows of the same width.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    /// Its name (`figure4`, `hit_rate`, `cpu`, ...): the key of Python's `tables`.
    pub name: &'static str,
    /// The CSV file the report writes it to, if any.
    pub file: Option<&'static str>,
    /// Column names.
    pub columns: Vec<&'static str>,
    /// Rows, each `columns.len()` cells.
    pub rows: Vec<Vec<Cell>>,
}

impl Table {
    /// An empty table.
    pub fn new(name: &'static str, file: Option<&'static str>, columns: &[&'static str]) -> Self {
        Table {
            name,
            file,
            columns: columns.to_vec(),
            rows: Vec::new(),
        }
    }

    /// Appends a row (a short or long row is a bug of the caller: checked in debug builds).
    pub fn push(&mut self, row: Vec<Cell>) {
        debug_assert_eq!(row.len(), self.columns.len(), "table {}", self.name);
        self.rows.push(row);
    }

    /// The CSV text: the header, then one line per row.
    pub fn to_csv(&self) -> String {
        let mut s = String::new();
        for (i, c) in self.columns.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            write_csv_field(&mut s, c);
        }
        s.push('\n');
        for row in &self.rows {
            for (i, c) in row.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                c.write_csv(&mut s);
            }
            s.push('\n');
        }
        s
    }

    /// Column `i`'s values, top to bottom.
    pub fn column(&self, i: usize) -> impl Iterator<Item = &Cell> {
        self.rows.iter().filter_map(move |r| r.get(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_rounds_as_asked_and_leaves_none_empty() {
        let mut t = Table::new("t", Some("t.csv"), &["name", "n", "x", "y"]);
        t.push(vec![
            "a".into(),
            3u64.into(),
            Cell::float(0.123456, 4),
            Cell::Float(None, 4),
        ]);
        t.push(vec![
            "b".into(),
            0u64.into(),
            Cell::float(2.0, 1),
            Cell::float(1.0, 4),
        ]);
        assert_eq!(t.to_csv(), "name,n,x,y\na,3,0.1235,\nb,0,2.0,1.0000\n");
        let names: Vec<&Cell> = t.column(0).collect();
        // A comma or a quote inside a field is quoted, not a new column.
        let mut q = Table::new("q", None, &["a", "b"]);
        q.push(vec!["x, y".into(), "say \"hi\"".into()]);
        assert_eq!(q.to_csv(), "a,b\n\"x, y\",\"say \"\"hi\"\"\"\n");
        assert_eq!(names, [&Cell::Str("a".into()), &Cell::Str("b".into())]);
    }
}
