//! The rows of a read statement as one packed copy: `crate::sql_read` runs the statement in JS, walks its
//! rows there and hands wasm four arrays (a type tag a cell, the numbers, the byte length of each text and
//! blob, and their bytes one after another), so a read of many rows crosses between wasm and JS a few times
//! a statement instead of a dozen times a row. This module reads them back into cells (no I/O, so its tests
//! run natively).

/// Tag of a `NULL` cell, as `crate::sql_read`'s JS writes it.
pub const TAG_NULL: u8 = 0;
/// Tag of a number cell (SQLite's integers and reals reach JS as numbers).
pub const TAG_NUMBER: u8 = 1;
/// Tag of a text cell, its bytes UTF-8.
pub const TAG_TEXT: u8 = 2;
/// Tag of a blob cell.
pub const TAG_BLOB: u8 = 3;

/// One cell of a row, borrowed from the packed copy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cell<'a> {
    /// `NULL`.
    Null,
    /// A number.
    Number(f64),
    /// A text.
    Text(&'a str),
    /// A blob.
    Blob(&'a [u8]),
}

/// Largest integer a JS number holds exactly.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

impl Cell<'_> {
    /// The cell as an integer: a number with no fraction that a JS number holds exactly (SQLite's
    /// integers reach wasm as JS numbers).
    pub fn int(&self) -> Option<i64> {
        match *self {
            Cell::Number(n) if n.fract() == 0.0 && n.abs() <= MAX_SAFE_INTEGER => Some(n as i64),
            _ => None,
        }
    }
}

/// A statement's rows as `crate::sql_read` packs them.
#[derive(Debug, Default)]
pub struct PackedRows {
    /// Cells a row.
    pub columns: usize,
    /// A tag a cell, row after row.
    pub tags: Vec<u8>,
    /// The number cells, in order.
    pub numbers: Vec<f64>,
    /// The byte length of each text and blob cell, in order.
    pub lengths: Vec<u32>,
    /// The text (UTF-8) and blob cells' bytes, in order.
    pub bytes: Vec<u8>,
}

impl PackedRows {
    /// The cells, row after row (`columns` a row), or why the packed arrays do not fit together.
    pub fn cells(&self) -> Result<Vec<Cell<'_>>, String> {
        if self.columns == 0 {
            return if self.tags.is_empty() {
                Ok(Vec::new())
            } else {
                Err("rows of no column hold cells".into())
            };
        }
        if !self.tags.len().is_multiple_of(self.columns) {
            return Err(format!(
                "{} cells are not rows of {} columns",
                self.tags.len(),
                self.columns
            ));
        }
        let mut cells = Vec::with_capacity(self.tags.len());
        let (mut numbers, mut lengths) = (self.numbers.iter(), self.lengths.iter());
        let mut at = 0usize;
        let short = || "the packed rows end early".to_string();
        for &tag in &self.tags {
            let cell = match tag {
                TAG_NULL => Cell::Null,
                TAG_NUMBER => Cell::Number(*numbers.next().ok_or_else(short)?),
                TAG_TEXT | TAG_BLOB => {
                    let length = *lengths.next().ok_or_else(short)? as usize;
                    let bytes = self.bytes.get(at..at + length).ok_or_else(short)?;
                    at += length;
                    if tag == TAG_TEXT {
                        Cell::Text(std::str::from_utf8(bytes).map_err(|e| e.to_string())?)
                    } else {
                        Cell::Blob(bytes)
                    }
                }
                other => return Err(format!("unknown cell tag {other}")),
            };
            cells.push(cell);
        }
        if numbers.next().is_some() || lengths.next().is_some() || at != self.bytes.len() {
            return Err("the packed rows hold more than their cells".into());
        }
        Ok(cells)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packed() -> PackedRows {
        PackedRows {
            columns: 3,
            tags: vec![
                TAG_TEXT, TAG_NUMBER, TAG_BLOB, TAG_TEXT, TAG_NUMBER, TAG_NULL,
            ],
            numbers: vec![0.0, 7.0],
            lengths: vec![3, 2, 2],
            bytes: b"p/a\x01\x02\xc3\xa9".to_vec(),
        }
    }

    #[test]
    fn packed_rows_read_back_as_their_cells_in_order() {
        let rows = packed();
        let cells = rows.cells().unwrap();
        assert_eq!(
            cells,
            vec![
                Cell::Text("p/a"),
                Cell::Number(0.0),
                Cell::Blob(&[1, 2]),
                Cell::Text("é"),
                Cell::Number(7.0),
                Cell::Null,
            ]
        );
        assert_eq!(cells[4].int(), Some(7));
        assert_eq!(Cell::Number(0.5).int(), None);
        assert_eq!(Cell::Number(2f64.powi(60)).int(), None);
        assert_eq!(Cell::Null.int(), None);
        assert_eq!(PackedRows::default().cells().unwrap(), Vec::new());
    }

    #[test]
    fn packed_rows_that_do_not_fit_together_are_an_error() {
        let broken: [fn(&mut PackedRows); 7] = [
            |p| p.columns = 4,
            |p| p.columns = 0,
            |p| {
                p.numbers.pop();
            },
            |p| p.numbers.push(1.0),
            |p| p.lengths[2] = 3,
            |p| {
                p.bytes.pop();
            },
            |p| p.tags[5] = 9,
        ];
        for (i, breaks) in broken.iter().enumerate() {
            let mut rows = packed();
            breaks(&mut rows);
            assert!(rows.cells().is_err(), "case {i}");
        }
        let mut not_utf8 = packed();
        not_utf8.bytes[5] = 0xff;
        assert!(not_utf8.cells().is_err());
    }
}
