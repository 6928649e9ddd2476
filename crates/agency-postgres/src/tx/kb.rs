//! [`KbTx`] on PostgreSQL: Knowledge Base rows (files, their versions, their
//! access log), the candidate search behind KB listing and search, a
//! handler's work product, bounded counts for quotas and file deletion
//! for retention.

use agency_core::access::FileKind;
use agency_core::{FileId, HandlerId};
use agency_store::model::{FileRow, KbAuditRow, KbCandidate, VersionRow};
use agency_store::tx::KbTx;
use agency_store::tx::R;
use tokio_postgres::types::ToSql;

use crate::PgTx;
use crate::convert::*;

/// Where a handler's candidates come from, merged per file (see
/// `Tx::kb_candidates`). Parameters: $1 the handler (also its root
/// outcome's id), $2 the `after` bound, $3 the limit, $4… the terms.
const HANDLER_CANDIDATES: &str = "
WITH RECURSIVE
  down(id) AS (
    SELECT $1::TEXT COLLATE \"C\"
    UNION
    SELECT e.child FROM outcome_edges e JOIN down d ON e.parent = d.id
  ),
  up(id) AS (
    SELECT $1::TEXT COLLATE \"C\"
    UNION
    SELECT e.parent FROM outcome_edges e JOIN up u ON e.child = u.id
  ),
  cand(file_id, cap, owned, of_underling, in_area) AS (
    SELECT resource_key, MAX(level), 0::BIGINT, 0::BIGINT, 0::BIGINT FROM capabilities
      WHERE holder = $1 AND resource_kind = 'kb' AND revoked_at IS NULL
      GROUP BY resource_key
    UNION ALL
    SELECT id, NULL, 1, 0, 0 FROM files WHERE owner = $1 AND kind IN ('state', 'audit_log')
    UNION ALL
    SELECT f.id, NULL, 0, 1, 0 FROM handlers u JOIN files f ON f.owner = u.id
      WHERE u.boss = $1 AND f.kind IN ('state', 'audit_log')
    UNION ALL
    SELECT id, NULL, 0, 0, 1 FROM down
    UNION ALL
    SELECT id, NULL, 0, 0, 1 FROM up
  ),
  merged(file_id, cap, owned, of_underling, in_area) AS (
    SELECT file_id, MAX(cap), MAX(owned), MAX(of_underling), MAX(in_area) FROM cand
      WHERE file_id > $2 GROUP BY file_id
  )
SELECT id, kind, description, owner, created_at, created_by, latest_version,
       m.cap, m.owned, m.of_underling, m.in_area = 1 AND kind = 'outcome'
  FROM merged m JOIN files ON files.id = m.file_id
  WHERE (m.cap IS NOT NULL OR m.owned = 1 OR m.of_underling = 1 OR (m.in_area = 1 AND kind = 'outcome'))";

/// The user sees every file. Parameters: $1 the `after` bound, $2 the
/// limit, $3… the terms.
const USER_CANDIDATES: &str = "
SELECT id, kind, description, owner, created_at, created_by, latest_version,
       NULL::BIGINT, 0::BIGINT, 0::BIGINT, 0::BIGINT
  FROM files WHERE id > $1";

/// A LIKE pattern matching `term` anywhere, with LIKE's wildcards in the
/// term taken literally (escaped with `\`).
fn like_pattern(term: &str) -> String {
    let mut p = String::with_capacity(term.len() + 2);
    p.push('%');
    // Lowercasing again is idempotent and keeps the match case-insensitive
    // even if a caller forgets; the description side is lower()ed in SQL
    // (ASCII only in the "C" collation, as SQLite's lower()).
    for ch in term.to_lowercase().chars() {
        if matches!(ch, '%' | '_' | '\\') {
            p.push('\\');
        }
        p.push(ch);
    }
    p.push('%');
    p
}

impl KbTx for PgTx<'_> {
    fn insert_file(&mut self, f: &FileRow) -> R<()> {
        execute(
            self.conn,
            concat!(
                "INSERT INTO files (",
                file_cols!(),
                ") VALUES ($1, $2, $3, $4, $5, $6, $7)"
            ),
            &[
                &f.id.to_string(),
                &f.kind.as_str(),
                &f.description,
                &opt_text(f.owner),
                &f.created_at.0,
                &opt_text(f.created_by),
                &f.latest_version,
            ],
            || format!("insert file {}", f.id),
        )
        .map(drop)
    }

    fn file(&mut self, id: FileId) -> R<Option<FileRow>> {
        query_opt(
            self.conn,
            concat!("SELECT ", file_cols!(), " FROM files WHERE id = $1"),
            &[&id.to_string()],
            || format!("read file {id}"),
            file_row,
        )
    }

    fn set_file_description(&mut self, id: FileId, description: &str) -> R<()> {
        let op = || format!("set the description of file {id}");
        let n = execute(
            self.conn,
            "UPDATE files SET description = $2 WHERE id = $1",
            &[&id.to_string(), &description],
            op,
        )?;
        require_row(n, op)
    }

    fn insert_version(&mut self, v: &VersionRow) -> R<()> {
        let op = || format!("insert version {} of file {}", v.version, v.file);
        execute(
            self.conn,
            concat!(
                "INSERT INTO versions (",
                version_cols!(),
                ") VALUES ($1, $2, $3, $4, $5, $6, $7)"
            ),
            &[
                &v.file.to_string(),
                &v.version,
                &v.hash.as_str(),
                &v.size,
                &v.created_at.0,
                &opt_text(v.handler),
                &opt_text(v.agent),
            ],
            op,
        )?;
        // Same transaction as the insert: a reader never sees a latest_version
        // without its row, nor a row beyond latest_version.
        let n = execute(
            self.conn,
            "UPDATE files SET latest_version = $2 WHERE id = $1",
            &[&v.file.to_string(), &v.version],
            op,
        )?;
        require_row(n, op)
    }

    fn version(&mut self, file: FileId, version: i64) -> R<Option<VersionRow>> {
        query_opt(
            self.conn,
            concat!(
                "SELECT ",
                version_cols!(),
                " FROM versions WHERE file = $1 AND version = $2"
            ),
            &[&file.to_string(), &version],
            || format!("read version {version} of file {file}"),
            version_row,
        )
    }

    fn versions(&mut self, file: FileId) -> R<Vec<VersionRow>> {
        query_rows(
            self.conn,
            concat!(
                "SELECT ",
                version_cols!(),
                " FROM versions WHERE file = $1 ORDER BY version"
            ),
            &[&file.to_string()],
            || format!("list the versions of file {file}"),
            version_row,
        )
    }

    fn versions_after(&mut self, file: FileId, after: Option<i64>, n: usize) -> R<Vec<VersionRow>> {
        query_rows(
            self.conn,
            concat!(
                "SELECT ",
                version_cols!(),
                " FROM versions WHERE file = $1 AND version > $2 ORDER BY version LIMIT $3"
            ),
            &[&file.to_string(), &after.unwrap_or(0), &limit(n)],
            || format!("list a page of the versions of file {file}"),
            version_row,
        )
    }

    fn all_versions(&mut self) -> R<Vec<VersionRow>> {
        query_rows(
            self.conn,
            concat!(
                "SELECT ",
                version_cols!(),
                " FROM versions ORDER BY file, version"
            ),
            &[],
            || "list all file versions".to_owned(),
            version_row,
        )
    }

    fn insert_kb_audit(&mut self, rows: &[KbAuditRow]) -> R<()> {
        for a in rows {
            execute(
                self.conn,
                concat!(
                    "INSERT INTO kb_audit (",
                    kb_audit_cols!(),
                    ") VALUES ($1, $2, $3, $4, $5, $6)"
                ),
                &[
                    &a.file.to_string(),
                    &a.at.0,
                    &opt_text(a.handler),
                    &opt_text(a.agent),
                    &a.action.as_str(),
                    &a.version,
                ],
                || format!("insert a KB audit entry for file {}", a.file),
            )?;
        }
        Ok(())
    }

    fn kb_audit(&mut self, file: FileId, n: usize) -> R<Vec<KbAuditRow>> {
        query_rows(
            self.conn,
            concat!(
                "SELECT ",
                kb_audit_cols!(),
                " FROM kb_audit WHERE file = $1 ORDER BY at, id LIMIT $2"
            ),
            &[&file.to_string(), &limit(n)],
            || format!("read the access log of file {file}"),
            kb_audit_row,
        )
    }

    fn kb_candidates(
        &mut self,
        handler: Option<HandlerId>,
        terms: &[String],
        after: Option<FileId>,
        n: usize,
    ) -> R<Vec<KbCandidate>> {
        // One statement per (caller kind, number of terms), so the cache keeps
        // a handful of them.
        let mut args: Vec<Box<dyn ToSql + Sync>> = Vec::new();
        let mut sql = String::from(match handler {
            Some(h) => {
                args.push(Box::new(h.to_string()));
                HANDLER_CANDIDATES
            }
            None => USER_CANDIDATES,
        });
        // Every hyphenated UUID sorts after the empty string.
        args.push(Box::new(opt_text(after).unwrap_or_default()));
        args.push(Box::new(limit(n)));
        let limit_param = args.len();
        for term in terms {
            sql.push_str(&format!(
                "\n  AND lower(description) LIKE ${} ESCAPE '\\'",
                args.len() + 1
            ));
            args.push(Box::new(like_pattern(term)));
        }
        sql.push_str(&format!("\n  ORDER BY id LIMIT ${limit_param}"));
        let refs: Vec<&(dyn ToSql + Sync)> = args.iter().map(|a| &**a as _).collect();
        let who = handler.map_or_else(|| "the user".to_owned(), |h| format!("handler {h}"));
        query_rows(
            self.conn,
            &sql,
            &refs,
            || format!("search KB files visible to {who}"),
            |r| {
                Ok(KbCandidate {
                    file: file_row(r)?,
                    cap: col_opt_level(r, 7, "capability level")?,
                    owned: col(r, 8, "KB candidate flag")?,
                    of_underling: col(r, 9, "KB candidate flag")?,
                    outcome_in_area: col(r, 10, "KB candidate flag")?,
                })
            },
        )
    }

    /// The files a retiring subtree hands to its boss: documents and message
    /// bodies its handlers created, message bodies delivered to them, and their
    /// state documents and audit logs. Outcome files are left out: they follow
    /// outcome visibility, not capabilities.
    fn work_product(&mut self, handlers: &[HandlerId]) -> R<Vec<FileRow>> {
        query_rows(
            self.conn,
            concat!(
                "WITH ids(id) AS (
                   SELECT f.id FROM files f
                    WHERE f.created_by = ANY($1) AND f.kind IN ('document', 'message')
                   UNION
                   SELECT m.file FROM messages m JOIN files f ON f.id = m.file
                    WHERE m.to_party = ANY($1) AND m.delivered_at IS NOT NULL AND f.kind = 'message'
                   UNION
                   SELECT f.id FROM files f WHERE f.owner = ANY($1)
                 )
                 SELECT ",
                file_cols!(),
                " FROM files WHERE id IN (SELECT id FROM ids) ORDER BY id"
            ),
            &[&text_list(handlers)],
            || format!("list the work product of {}", list_text(handlers)),
            file_row,
        )
    }

    fn files_created_by(&mut self, handler: HandlerId, kind: FileKind, n: usize) -> R<usize> {
        query_value::<i64>(
            self.conn,
            "SELECT COUNT(*) FROM (SELECT 1 FROM files
               WHERE created_by = $1 AND kind = $2 LIMIT $3) t",
            &[&handler.to_string(), &kind.as_str(), &limit(n)],
            || {
                format!(
                    "count the {} files handler {handler} created",
                    kind.as_str()
                )
            },
        )
        .map(count)
    }

    fn delete_file(&mut self, id: FileId) -> R<()> {
        let key = id.to_string();
        execute(
            self.conn,
            "DELETE FROM kb_audit WHERE file = $1",
            &[&key],
            || format!("delete the access log of KB file {id}"),
        )?;
        execute(
            self.conn,
            "DELETE FROM versions WHERE file = $1",
            &[&key],
            || format!("delete the versions of KB file {id}"),
        )?;
        let op = || format!("delete KB file {id}");
        let n = execute(self.conn, "DELETE FROM files WHERE id = $1", &[&key], op)?;
        require_row(n, op)
    }
}
