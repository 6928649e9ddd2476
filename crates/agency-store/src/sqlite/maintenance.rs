//! [`MaintenanceTx`] on SQLite: queries across tables. Id-prefix
//! resolution for the CLI's abbreviated ids, the status counts, and which
//! blobs some row still points at (retention, fsck).

use rusqlite::params;

use super::SqliteTx;
use super::convert::*;
use crate::blob::BlobId;
use crate::model::*;
use crate::tx::MaintenanceTx;

impl MaintenanceTx for SqliteTx<'_> {
    fn ids_with_prefix(&mut self, kind: IdKind, prefix: &str, max: usize) -> R<Vec<uuid::Uuid>> {
        let c = self.conn;
        // Ids are stored as lowercase hyphenated text; '~' sorts after every
        // character an id can hold, so this range is exactly "starts with".
        let table = match kind {
            IdKind::Handler => "handlers",
            IdKind::Outcome => "outcomes",
            IdKind::File => "files",
            IdKind::Agent => "agents",
            IdKind::Message => "messages",
            IdKind::OrgMessage => "org_messages",
            IdKind::OrgKey => "org_keys",
            IdKind::Memory => "memories",
            IdKind::MemoryCompaction => "memory_compactions",
            IdKind::Lesson => "lessons",
        };
        let sql = format!("SELECT id FROM {table} WHERE id >= ?1 AND id < ?2 ORDER BY id LIMIT ?3");
        let upper = format!("{prefix}~");
        query_rows(
            c,
            &sql,
            params![prefix, upper, limit(max)],
            || format!("resolve {table} prefix {prefix:?}"),
            |r| col_id(r, 0, "id"),
        )
    }

    fn counts(&mut self) -> R<StoreCounts> {
        let c = self.conn;
        query_opt(
            c,
            "SELECT (SELECT COUNT(*) FROM handlers WHERE status = 'active'),
                    (SELECT COUNT(*) FROM outcomes WHERE status = 'open'),
                    (SELECT COUNT(*) FROM agents WHERE ended_at IS NULL),
                    (SELECT COUNT(*) FROM files),
                    (SELECT COUNT(*) FROM handler_stalls s JOIN handlers h ON h.id = s.handler
                      WHERE h.status = 'active')",
            [],
            || "count handlers, outcomes, agents and files".to_owned(),
            |r| {
                Ok(StoreCounts {
                    handlers_active: col(r, 0, "count")?,
                    outcomes_open: col(r, 1, "count")?,
                    agents_live: col(r, 2, "count")?,
                    files: col(r, 3, "count")?,
                    handlers_stalled: col(r, 4, "count")?,
                })
            },
        )
        .map(Option::unwrap_or_default)
    }

    fn referenced_blobs(&mut self, candidates: &[BlobId]) -> R<Vec<BlobId>> {
        let c = self.conn;
        let mut out = Vec::new();
        for b in candidates {
            let used: bool = query_value(
                c,
                // A run's transcript and captured output are blobs too: gc must
                // never take them from under a run record (indexed in the
                // logging migration).
                "SELECT EXISTS (SELECT 1 FROM versions WHERE hash = ?1)
                     OR EXISTS (SELECT 1 FROM agent_runs WHERE transcript = ?1)
                     OR EXISTS (SELECT 1 FROM agent_runs WHERE log = ?1)
                     OR EXISTS (SELECT 1 FROM agent_runs WHERE prompt = ?1)
                     OR EXISTS (SELECT 1 FROM agent_runs WHERE first_message = ?1)",
                [b.as_str()],
                || format!("check whether a version or a run points at blob {b}"),
            )?;
            if used {
                out.push(b.clone());
            }
        }
        Ok(out)
    }
}
