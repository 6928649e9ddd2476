//! A SQLite store copied into an empty PostgreSQL one
//! (`agency store migrate --to postgres://…`).
//!
//! Blobs first (each read back and verified by its hash, then put), then
//! every row in one write transaction from one snapshot of the SQLite
//! store, so the copy is all or nothing; identity sequences are moved past
//! the copied keys. The source is only read. The caller checks the result
//! with `fsck` against the new store.

use std::fmt;

use agency_store::sqlite::export::{Cell, RowSink};
use agency_store::{BlobStore, SqliteStore, StoreError};
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};

use crate::conn::Conn;
use crate::convert::Ctx;
use crate::{PgStore, begin_locked};

/// What a copy moved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopyReport {
    /// Rows per table, in the order the tables were copied.
    pub tables: Vec<(String, u64)>,
    pub blobs: u64,
    pub blob_bytes: u64,
}

impl CopyReport {
    pub fn rows(&self) -> u64 {
        self.tables.iter().map(|(_, n)| n).sum()
    }
}

/// A SQLite value bound to the PostgreSQL column it is copied into.
#[derive(Debug)]
struct Value(Cell);

impl ToSql for Value {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut tokio_postgres::types::private::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match &self.0 {
            Cell::Null => Ok(IsNull::Yes),
            Cell::Int(v) if *ty == Type::INT2 => i16::try_from(*v)?.to_sql(ty, out),
            Cell::Int(v) if *ty == Type::INT4 => i32::try_from(*v)?.to_sql(ty, out),
            Cell::Int(v) if *ty == Type::FLOAT8 => (*v as f64).to_sql(ty, out),
            Cell::Int(v) => v.to_sql(ty, out),
            Cell::Real(v) => v.to_sql(ty, out),
            Cell::Text(v) => v.to_sql(ty, out),
            Cell::Bytes(v) => v.to_sql(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        // Checked per value in `to_sql`, which refuses a mismatch.
        true
    }

    to_sql_checked!();
}

/// Inserts exported rows into the table of the same name.
struct Inserter<'a> {
    conn: &'a mut Conn,
    sql: String,
    table: String,
    report: CopyReport,
}

impl fmt::Debug for Inserter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inserter")
            .field("table", &self.table)
            .finish()
    }
}

fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

impl RowSink for Inserter<'_> {
    fn table(&mut self, name: &str, columns: &[String]) -> Result<(), StoreError> {
        let cols: Vec<String> = columns.iter().map(|c| quote(c)).collect();
        let params: Vec<String> = (1..=columns.len()).map(|i| format!("${i}")).collect();
        self.sql = format!(
            "INSERT INTO {} ({}) VALUES ({})",
            quote(name),
            cols.join(", "),
            params.join(", ")
        );
        self.table = name.to_owned();
        self.report.tables.push((name.to_owned(), 0));
        Ok(())
    }

    fn row(&mut self, cells: Vec<Cell>) -> Result<(), StoreError> {
        let values: Vec<Value> = cells.into_iter().map(Value).collect();
        let refs: Vec<&(dyn ToSql + Sync)> = values.iter().map(|v| v as _).collect();
        let table = &self.table;
        self.conn
            .execute(&self.sql, &refs)
            .ctx(|| format!("copy a row of table {table}"))?;
        if let Some(last) = self.report.tables.last_mut() {
            last.1 += 1;
        }
        Ok(())
    }
}

/// The store's tables (not the schema's bookkeeping).
const TABLES: &str = "SELECT table_name::TEXT FROM information_schema.tables
    WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'
      AND table_name <> 'agency_schema' ORDER BY table_name";

impl PgStore {
    /// Copy the rows of `src` and the blobs of `src_blobs` into this store,
    /// which must be empty. Nothing is written to the source.
    pub fn copy_from_sqlite(
        &self,
        src: &SqliteStore,
        src_blobs: &dyn BlobStore,
    ) -> Result<CopyReport, StoreError> {
        let target = self.shared.target.clone();
        let op = |what: &str| format!("{what} of {target}");
        // Refuse a store that holds anything: a copy merges nothing.
        self.shared.transaction(&begin_locked(), false, &mut |conn| {
            let tables: Vec<String> = conn
                .query(TABLES, &[])
                .ctx(|| op("list the tables"))?
                .iter()
                .map(|r| r.try_get(0))
                .collect::<Result<_, _>>()
                .ctx(|| op("list the tables"))?;
            for t in tables {
                let sql = format!("SELECT EXISTS (SELECT 1 FROM {})", quote(&t));
                let row = conn
                    .query_opt(&sql, &[])
                    .ctx(|| op(&format!("look into table {t}")))?;
                let full: bool = match row {
                    Some(r) => r.try_get(0).ctx(|| op(&format!("look into table {t}")))?,
                    None => false,
                };
                if full {
                    return Err(StoreError::backend(
                        format!("copy into {target}"),
                        format!("the database is not empty (table {t} has rows); copy into a new, empty database"),
                    ));
                }
            }
            Ok(())
        })?;

        let mut report = CopyReport::default();
        let dst_blobs = self.blobs();
        for id in src_blobs.list()? {
            let content = src_blobs.get(&id)?;
            dst_blobs.put(&content)?;
            report.blobs += 1;
            report.blob_bytes += content.len() as u64;
        }

        let high_water = src.key_high_water()?;
        let mut tables = Vec::new();
        self.shared.transaction(&begin_locked(), true, &mut |conn| {
            let mut sink = Inserter {
                conn,
                sql: String::new(),
                table: String::new(),
                report: CopyReport::default(),
            };
            src.export(&mut sink)?;
            tables = std::mem::take(&mut sink.report.tables);
            // Keys assigned from now on must follow the copied ones.
            let idents = conn
                .query(
                    "SELECT table_name::TEXT, column_name::TEXT FROM information_schema.columns
                     WHERE table_schema = current_schema() AND is_identity = 'YES'",
                    &[],
                )
                .ctx(|| op("list the identity columns"))?;
            for r in idents {
                let (t, c): (String, String) = (
                    r.try_get(0).ctx(|| op("list the identity columns"))?,
                    r.try_get(1).ctx(|| op("list the identity columns"))?,
                );
                let floor = high_water
                    .iter()
                    .find(|(name, _)| *name == t)
                    .map_or(0, |(_, seq)| *seq);
                let sql = format!(
                    "SELECT setval(pg_get_serial_sequence($1, $2), GREATEST(MAX({c}), $3, 1), GREATEST(MAX({c}), $3) > 0) FROM {t}",
                    c = quote(&c),
                    t = quote(&t)
                );
                conn.query(&sql, &[&t, &c, &floor])
                    .ctx(|| op(&format!("move the sequence of {t}.{c}")))?;
            }
            // The event log's last number survives its rows (readers hold
            // cursors): carry SQLite's over.
            if let Some((_, seq)) = high_water.iter().find(|(name, _)| name == "events") {
                conn.execute(
                    "INSERT INTO events_end (id, seq) VALUES (1, $1)
                     ON CONFLICT (id) DO UPDATE SET seq = GREATEST(events_end.seq, $1)",
                    &[seq],
                )
                .ctx(|| op("carry the event log's last number"))?;
            }
            Ok(())
        })?;
        report.tables = tables;
        Ok(report)
    }
}
