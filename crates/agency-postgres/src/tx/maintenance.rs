//! [`MaintenanceTx`] on PostgreSQL: queries across tables. Id-prefix
//! resolution for the CLI's abbreviated ids, the status counts, and which
//! blobs some row still points at (retention, fsck).

use agency_store::blob::BlobId;
use agency_store::model::{IdKind, StoreCounts};
use agency_store::tx::MaintenanceTx;
use agency_store::tx::R;

use crate::PgTx;
use crate::convert::*;

impl MaintenanceTx for PgTx<'_> {
    fn ids_with_prefix(&mut self, kind: IdKind, prefix: &str, max: usize) -> R<Vec<uuid::Uuid>> {
        // Ids are stored as lowercase hyphenated text in the "C" collation;
        // '~' sorts after every character an id can hold, so this range is
        // exactly "starts with".
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
        let sql = format!("SELECT id FROM {table} WHERE id >= $1 AND id < $2 ORDER BY id LIMIT $3");
        let upper = format!("{prefix}~");
        query_rows(
            self.conn,
            &sql,
            &[&prefix, &upper, &limit(max)],
            || format!("resolve {table} prefix {prefix:?}"),
            |r| col_id(r, 0, "id"),
        )
    }

    fn counts(&mut self) -> R<StoreCounts> {
        query_opt(
            self.conn,
            "SELECT (SELECT COUNT(*) FROM handlers WHERE status = 'active'),
                    (SELECT COUNT(*) FROM outcomes WHERE status = 'open'),
                    (SELECT COUNT(*) FROM agents WHERE ended_at IS NULL),
                    (SELECT COUNT(*) FROM files),
                    (SELECT COUNT(*) FROM handler_stalls s JOIN handlers h ON h.id = s.handler
                      WHERE h.status = 'active')",
            &[],
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
        let mut out = Vec::new();
        for b in candidates {
            let used: bool = query_value(
                self.conn,
                // A run's transcript and captured output are blobs too: gc must
                // never take them from under a run record.
                "SELECT EXISTS (SELECT 1 FROM versions WHERE hash = $1)
                     OR EXISTS (SELECT 1 FROM agent_runs WHERE transcript = $1)
                     OR EXISTS (SELECT 1 FROM agent_runs WHERE log = $1)
                     OR EXISTS (SELECT 1 FROM agent_runs WHERE prompt = $1)
                     OR EXISTS (SELECT 1 FROM agent_runs WHERE first_message = $1)",
                &[&b.as_str()],
                || format!("check whether a version or a run points at blob {b}"),
            )?;
            if used {
                out.push(b.clone());
            }
        }
        Ok(out)
    }
}
