//! Knowledge Base rows: files, their versions, their access log, and the
//! candidate search behind KB listing and search.

use agency_core::{FileId, HandlerId};
use rusqlite::types::Value;
use rusqlite::{Connection, params, params_from_iter};

use super::convert::*;
use crate::model::*;

pub(crate) fn insert_file(c: &Connection, f: &FileRow) -> R<()> {
    execute(
        c,
        concat!(
            "INSERT INTO files (",
            file_cols!(),
            ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
        ),
        params![
            f.id.to_string(),
            f.kind.as_str(),
            f.description,
            opt_text(f.owner),
            f.created_at.0,
            opt_text(f.created_by),
            f.latest_version,
        ],
        || format!("insert file {}", f.id),
    )
    .map(drop)
}

pub(crate) fn file(c: &Connection, id: FileId) -> R<Option<FileRow>> {
    query_opt(
        c,
        concat!("SELECT ", file_cols!(), " FROM files WHERE id = ?1"),
        [id.to_string()],
        || format!("read file {id}"),
        file_row,
    )
}

pub(crate) fn set_file_description(c: &Connection, id: FileId, description: &str) -> R<()> {
    let op = || format!("set the description of file {id}");
    let n = execute(
        c,
        "UPDATE files SET description = ?2 WHERE id = ?1",
        params![id.to_string(), description],
        op,
    )?;
    require_row(n, op)
}

pub(crate) fn insert_version(c: &Connection, v: &VersionRow) -> R<()> {
    let op = || format!("insert version {} of file {}", v.version, v.file);
    execute(
        c,
        concat!(
            "INSERT INTO versions (",
            version_cols!(),
            ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
        ),
        params![
            v.file.to_string(),
            v.version,
            v.hash.as_str(),
            v.size,
            v.created_at.0,
            opt_text(v.handler),
            opt_text(v.agent),
        ],
        op,
    )?;
    // Same transaction as the insert: a reader never sees a latest_version
    // without its row, nor a row beyond latest_version.
    let n = execute(
        c,
        "UPDATE files SET latest_version = ?2 WHERE id = ?1",
        params![v.file.to_string(), v.version],
        op,
    )?;
    require_row(n, op)
}

pub(crate) fn version(c: &Connection, file: FileId, version: i64) -> R<Option<VersionRow>> {
    query_opt(
        c,
        concat!(
            "SELECT ",
            version_cols!(),
            " FROM versions WHERE file = ?1 AND version = ?2"
        ),
        params![file.to_string(), version],
        || format!("read version {version} of file {file}"),
        version_row,
    )
}

pub(crate) fn versions(c: &Connection, file: FileId) -> R<Vec<VersionRow>> {
    query_rows(
        c,
        concat!(
            "SELECT ",
            version_cols!(),
            " FROM versions WHERE file = ?1 ORDER BY version"
        ),
        [file.to_string()],
        || format!("list the versions of file {file}"),
        version_row,
    )
}

pub(crate) fn all_versions(c: &Connection) -> R<Vec<VersionRow>> {
    query_rows(
        c,
        concat!(
            "SELECT ",
            version_cols!(),
            " FROM versions ORDER BY file, version"
        ),
        [],
        || "list all file versions".to_owned(),
        version_row,
    )
}

pub(crate) fn insert_kb_audit(c: &Connection, rows: &[KbAuditRow]) -> R<()> {
    for a in rows {
        execute(
            c,
            concat!(
                "INSERT INTO kb_audit (",
                kb_audit_cols!(),
                ") VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
            ),
            params![
                a.file.to_string(),
                a.at.0,
                opt_text(a.handler),
                opt_text(a.agent),
                a.action.as_str(),
                a.version,
            ],
            || format!("insert a KB audit entry for file {}", a.file),
        )?;
    }
    Ok(())
}

pub(crate) fn kb_audit(c: &Connection, file: FileId, n: usize) -> R<Vec<KbAuditRow>> {
    query_rows(
        c,
        concat!(
            "SELECT ",
            kb_audit_cols!(),
            " FROM kb_audit WHERE file = ?1 ORDER BY at, id LIMIT ?2"
        ),
        params![file.to_string(), limit(n)],
        || format!("read the access log of file {file}"),
        kb_audit_row,
    )
}

/// Where a handler's candidates come from, merged per file (see
/// `Tx::kb_candidates`). Parameters: ?1 the handler (also its root
/// outcome's id), ?2 the `after` bound, ?3 the limit, ?4… the terms.
const HANDLER_CANDIDATES: &str = "
WITH RECURSIVE
  down(id) AS (
    SELECT ?1
    UNION
    SELECT e.child FROM outcome_edges e JOIN down d ON e.parent = d.id
  ),
  up(id) AS (
    SELECT ?1
    UNION
    SELECT e.parent FROM outcome_edges e JOIN up u ON e.child = u.id
  ),
  cand(file_id, cap, owned, of_underling, in_area) AS (
    SELECT resource_key, MAX(level), 0, 0, 0 FROM capabilities
      WHERE holder = ?1 AND resource_kind = 'kb' AND revoked_at IS NULL
      GROUP BY resource_key
    UNION ALL
    SELECT id, NULL, 1, 0, 0 FROM files WHERE owner = ?1 AND kind IN ('state', 'audit_log')
    UNION ALL
    SELECT f.id, NULL, 0, 1, 0 FROM handlers u JOIN files f ON f.owner = u.id
      WHERE u.boss = ?1 AND f.kind IN ('state', 'audit_log')
    UNION ALL
    SELECT id, NULL, 0, 0, 1 FROM down
    UNION ALL
    SELECT id, NULL, 0, 0, 1 FROM up
  ),
  merged(file_id, cap, owned, of_underling, in_area) AS (
    SELECT file_id, MAX(cap), MAX(owned), MAX(of_underling), MAX(in_area) FROM cand
      WHERE file_id > ?2 GROUP BY file_id
  )
SELECT id, kind, description, owner, created_at, created_by, latest_version,
       m.cap, m.owned, m.of_underling, m.in_area AND kind = 'outcome'
  FROM merged m JOIN files ON files.id = m.file_id
  WHERE (m.cap IS NOT NULL OR m.owned OR m.of_underling OR (m.in_area AND kind = 'outcome'))";

/// The user sees every file. Parameters as above; ?1 is bound (NULL) but
/// unused, which SQLite allows.
const USER_CANDIDATES: &str = "
SELECT id, kind, description, owner, created_at, created_by, latest_version, NULL, 0, 0, 0
  FROM files WHERE id > ?2";

pub(crate) fn kb_candidates(
    c: &Connection,
    handler: Option<HandlerId>,
    terms: &[String],
    after: Option<FileId>,
    n: usize,
) -> R<Vec<KbCandidate>> {
    // One statement per (caller kind, number of terms), so the cache keeps
    // a handful of them.
    let mut sql = String::from(if handler.is_some() {
        HANDLER_CANDIDATES
    } else {
        USER_CANDIDATES
    });
    let mut args = vec![
        handler.map_or(Value::Null, |h| Value::Text(h.to_string())),
        // Every hyphenated UUID sorts after the empty string.
        Value::Text(opt_text(after).unwrap_or_default()),
        Value::Integer(limit(n)),
    ];
    for term in terms {
        sql.push_str(&format!(
            "\n  AND lower(description) LIKE ?{} ESCAPE '\\'",
            args.len() + 1
        ));
        args.push(Value::Text(like_pattern(term)));
    }
    sql.push_str("\n  ORDER BY id LIMIT ?3");
    let who = handler.map_or_else(|| "the user".to_owned(), |h| format!("handler {h}"));
    query_rows(
        c,
        &sql,
        params_from_iter(args),
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

/// A LIKE pattern matching `term` anywhere, with LIKE's wildcards in the
/// term taken literally (escaped with `\`).
fn like_pattern(term: &str) -> String {
    let mut p = String::with_capacity(term.len() + 2);
    p.push('%');
    // Lowercasing again is idempotent and keeps the match case-insensitive
    // even if a caller forgets; the description side is lower()ed in SQL.
    for ch in term.to_lowercase().chars() {
        if matches!(ch, '%' | '_' | '\\') {
            p.push('\\');
        }
        p.push(ch);
    }
    p.push('%');
    p
}
