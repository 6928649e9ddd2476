//! Quota counts and retention (garbage collection) queries.
//!
//! Every count here is bounded: it stops at the caller's limit, so checking
//! a quota of N costs at most N index entries of one handler, however large
//! the store (the indexes are in `schema_v4_quotas.sql`).

use agency_core::access::FileKind;
use agency_core::{FileId, HandlerId, MailTarget, MessageId, Resource, Timestamp};
use rusqlite::{Connection, params};

use super::convert::*;
use crate::blob::BlobId;
use crate::model::*;

fn count(n: i64) -> usize {
    usize::try_from(n).unwrap_or(0)
}

pub(crate) fn pending_mail_from(c: &Connection, from: MailTarget, n: usize) -> R<usize> {
    query_value::<i64>(
        c,
        "SELECT COUNT(*) FROM (SELECT 1 FROM messages
           WHERE from_party = ?1 AND delivered_at IS NULL LIMIT ?2)",
        params![target_text(from), limit(n)],
        || format!("count the undelivered mail of {}", target_text(from)),
    )
    .map(count)
}

pub(crate) fn files_created_by(
    c: &Connection,
    handler: HandlerId,
    kind: FileKind,
    n: usize,
) -> R<usize> {
    query_value::<i64>(
        c,
        "SELECT COUNT(*) FROM (SELECT 1 FROM files
           WHERE created_by = ?1 AND kind = ?2 LIMIT ?3)",
        params![handler.to_string(), kind.as_str(), limit(n)],
        || {
            format!(
                "count the {} files handler {handler} created",
                kind.as_str()
            )
        },
    )
    .map(count)
}

pub(crate) fn outcomes_created_by(c: &Connection, handler: HandlerId, n: usize) -> R<usize> {
    query_value::<i64>(
        c,
        "SELECT COUNT(*) FROM (SELECT 1 FROM outcome_events
           WHERE handler = ?1 AND action = 'created' LIMIT ?2)",
        params![handler.to_string(), limit(n)],
        || format!("count the outcomes handler {handler} created"),
    )
    .map(count)
}

pub(crate) fn active_subtree_size(c: &Connection, id: HandlerId, n: usize) -> R<usize> {
    // Only active children are followed: a deactivated handler's subtree
    // is deactivated with it, so nothing active hides below one. UNION
    // keeps a corrupt cycle finite; LIMIT stops the walk at the quota.
    query_value::<i64>(
        c,
        "WITH RECURSIVE tree(node) AS (
           SELECT id FROM handlers WHERE id = ?1 AND status = 'active'
           UNION
           SELECT h.id FROM tree JOIN handlers h ON h.boss = tree.node AND h.status = 'active'
           LIMIT ?2
         )
         SELECT COUNT(*) FROM tree",
        params![id.to_string(), limit(n)],
        || format!("count the active handlers in the subtree of handler {id}"),
    )
    .map(count)
}

pub(crate) fn acked_messages_before(
    c: &Connection,
    before: Timestamp,
    after: Option<(Timestamp, MessageId)>,
    n: usize,
) -> R<Vec<MessageRow>> {
    let (at, id) = match after {
        Some((at, id)) => (at.0, id.to_string()),
        None => (i64::MIN, String::new()),
    };
    query_rows(
        c,
        concat!(
            "SELECT ",
            message_cols!(),
            " FROM messages
              WHERE acked_at IS NOT NULL AND acked_at < ?1 AND (acked_at, id) > (?2, ?3)
              ORDER BY acked_at, id LIMIT ?4"
        ),
        params![before.0, at, id, limit(n)],
        || format!("list mail acknowledged before {}", before.0),
        message_row,
    )
}

pub(crate) fn delete_message(c: &Connection, id: MessageId) -> R<()> {
    let op = || format!("delete message {id}");
    let n = execute(
        c,
        "DELETE FROM messages WHERE id = ?1",
        [id.to_string()],
        op,
    )?;
    require_row(n, op)
}

pub(crate) fn delete_messages_carrying(c: &Connection, file: FileId) -> R<usize> {
    execute(
        c,
        "DELETE FROM messages WHERE file = ?1",
        [file.to_string()],
        || format!("delete the messages that carry KB file {file}"),
    )
}

pub(crate) fn file_in_unexpired_mail(c: &Connection, file: FileId, before: Timestamp) -> R<bool> {
    query_value(
        c,
        "SELECT EXISTS (SELECT 1 FROM messages
           WHERE file = ?1 AND (acked_at IS NULL OR acked_at >= ?2))",
        params![file.to_string(), before.0],
        || format!("check the mail that carries KB file {file}"),
    )
}

pub(crate) fn live_capabilities_on(c: &Connection, resource: &Resource) -> R<Vec<CapabilityRow>> {
    query_rows(
        c,
        concat!(
            "SELECT ",
            capability_cols!(),
            " FROM capabilities
              WHERE resource_kind = ?1 AND resource_key = ?2 AND revoked_at IS NULL
              ORDER BY id"
        ),
        params![resource.kind().as_str(), resource.key()],
        || format!("list the live capabilities on {resource}"),
        capability_row,
    )
}

pub(crate) fn delete_file(c: &Connection, id: FileId) -> R<()> {
    let key = id.to_string();
    execute(c, "DELETE FROM kb_audit WHERE file = ?1", [&key], || {
        format!("delete the access log of KB file {id}")
    })?;
    execute(c, "DELETE FROM versions WHERE file = ?1", [&key], || {
        format!("delete the versions of KB file {id}")
    })?;
    let op = || format!("delete KB file {id}");
    let n = execute(c, "DELETE FROM files WHERE id = ?1", [&key], op)?;
    require_row(n, op)
}

pub(crate) fn referenced_blobs(c: &Connection, candidates: &[BlobId]) -> R<Vec<BlobId>> {
    let mut out = Vec::new();
    for b in candidates {
        let used: bool = query_value(
            c,
            // A run's transcript and captured output are blobs too: gc must
            // never take them from under a run record (indexed in the
            // logging migration).
            "SELECT EXISTS (SELECT 1 FROM versions WHERE hash = ?1)
                 OR EXISTS (SELECT 1 FROM agent_runs WHERE transcript = ?1)
                 OR EXISTS (SELECT 1 FROM agent_runs WHERE log = ?1)",
            [b.as_str()],
            || format!("check whether a version or a run points at blob {b}"),
        )?;
        if used {
            out.push(b.clone());
        }
    }
    Ok(out)
}
