//! Every row of a SQLite store, table by table, for a copy into another
//! backend (`agency store migrate`): one read transaction, so the copy is
//! one consistent snapshot even while a daemon writes.
//!
//! Tables come in the order they were created (a table is created after
//! the tables it references) and rows in key order. Full-text index tables
//! are left out: the target backend derives its own index from the rows.

use rusqlite::types::ValueRef;

use super::SqliteStore;
use super::convert::*;
use crate::error::StoreError;

/// One value of a row, as SQLite holds it.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Bytes(Vec<u8>),
}

/// Where exported rows go: `table` once per table, then its rows.
pub trait RowSink {
    fn table(&mut self, name: &str, columns: &[String]) -> Result<(), StoreError>;
    fn row(&mut self, cells: Vec<Cell>) -> Result<(), StoreError>;
}

/// Whether a table of `sqlite_master` holds the store's own rows (not
/// SQLite's bookkeeping, not a full-text index or its shadow tables).
fn is_data_table(name: &str) -> bool {
    !name.starts_with("sqlite_") && !name.ends_with("_fts") && !name.contains("_fts_")
}

impl SqliteStore {
    /// Hand every row of every table to `sink`, from one snapshot.
    pub fn export(&self, sink: &mut dyn RowSink) -> Result<(), StoreError> {
        let conn = self.take_reader()?;
        let op = || self.op("export the store");
        super::group::exec(&conn, "BEGIN").ctx(op)?;
        let result = export_from(&conn, sink, &op);
        let _ = super::group::exec(&conn, "ROLLBACK");
        self.put_reader(conn);
        result
    }
}

fn export_from(
    conn: &rusqlite::Connection,
    sink: &mut dyn RowSink,
    op: &dyn Fn() -> String,
) -> Result<(), StoreError> {
    let tables: Vec<String> = query_rows(
        conn,
        "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY rowid",
        [],
        op,
        |r| col(r, 0, "table name"),
    )?;
    for table in tables.into_iter().filter(|t| is_data_table(t)) {
        // Names come from sqlite_master, not from outside; quoted anyway.
        let quoted = format!("\"{}\"", table.replace('"', "\"\""));
        let mut stmt = conn
            .prepare(&format!("SELECT * FROM {quoted}"))
            .ctx(op)?;
        let columns: Vec<String> = stmt.column_names().iter().map(|c| c.to_string()).collect();
        // Key order: the primary key's columns, else the rowid.
        let keys: Vec<String> = query_rows(
            conn,
            "SELECT name FROM pragma_table_info(?1) WHERE pk > 0 ORDER BY pk",
            [&table],
            op,
            |r| col(r, 0, "key column"),
        )?;
        let order = if keys.is_empty() {
            "rowid".to_owned()
        } else {
            keys.iter()
                .map(|k| format!("\"{}\"", k.replace('"', "\"\"")))
                .collect::<Vec<_>>()
                .join(", ")
        };
        drop(stmt);
        stmt = conn
            .prepare(&format!("SELECT * FROM {quoted} ORDER BY {order}"))
            .ctx(op)?;
        sink.table(&table, &columns)?;
        let mut rows = stmt.query([]).ctx(op)?;
        while let Some(row) = rows.next().ctx(op)? {
            let mut cells = Vec::with_capacity(columns.len());
            for i in 0..columns.len() {
                cells.push(match row.get_ref(i).ctx(op)? {
                    ValueRef::Null => Cell::Null,
                    ValueRef::Integer(v) => Cell::Int(v),
                    ValueRef::Real(v) => Cell::Real(v),
                    ValueRef::Text(t) => Cell::Text(
                        String::from_utf8(t.to_vec())
                            .map_err(|_| StoreError::corrupt("text value", table.clone()))?,
                    ),
                    ValueRef::Blob(b) => Cell::Bytes(b.to_vec()),
                });
            }
            sink.row(cells)?;
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Collect(Vec<(String, Vec<String>, Vec<Vec<Cell>>)>);

    impl RowSink for Collect {
        fn table(&mut self, name: &str, columns: &[String]) -> Result<(), StoreError> {
            self.0.push((name.to_owned(), columns.to_vec(), Vec::new()));
            Ok(())
        }
        fn row(&mut self, cells: Vec<Cell>) -> Result<(), StoreError> {
            self.0.last_mut().unwrap().2.push(cells);
            Ok(())
        }
    }

    #[test]
    fn rows_come_in_key_order_and_full_text_tables_are_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("agency.db")).unwrap();
        crate::write(&store, |tx| {
            for (at, kind) in [(30, "b.x"), (10, "a.y")] {
                tx.append_event(&crate::NewEventRow {
                    at: agency_core::Timestamp(at),
                    kind: kind.into(),
                    handler: None,
                    agent: None,
                    outcome: None,
                    summary: String::new(),
                    data: "{}".into(),
                })?;
            }
            Ok::<_, StoreError>(())
        })
        .unwrap();
        let mut out = Collect::default();
        store.export(&mut out).unwrap();
        let names: Vec<&str> = out.0.iter().map(|t| t.0.as_str()).collect();
        assert!(names.contains(&"memories") && names.contains(&"events"));
        assert!(!names.iter().any(|n| n.contains("fts") || n.starts_with("sqlite_")));
        let events = out.0.iter().find(|t| t.0 == "events").unwrap();
        assert_eq!(events.1[0], "seq");
        let kinds: Vec<&Cell> = events.2.iter().map(|r| &r[2]).collect();
        assert_eq!(kinds, [&Cell::Text("b.x".into()), &Cell::Text("a.y".into())]);
    }
}
