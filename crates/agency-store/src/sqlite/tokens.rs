//! Agent bearer tokens (stored hashed) and id-prefix resolution for the
//! CLI's abbreviated ids.

use agency_core::{AgentId, Timestamp};
use rusqlite::{Connection, params};

use super::convert::*;
use crate::model::{IdKind, TokenRow};

pub(crate) fn insert_token(c: &Connection, t: &TokenRow) -> R<()> {
    execute(
        c,
        "INSERT INTO tokens (hash, agent, handler, workspace, created_at, revoked_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            t.hash,
            t.agent.to_string(),
            t.handler.to_string(),
            t.workspace,
            t.created_at.0,
            t.revoked_at.map(|r| r.0)
        ],
        || format!("insert token for agent {}", t.agent),
    )
    .map(drop)
}

pub(crate) fn token(c: &Connection, hash: &str) -> R<Option<TokenRow>> {
    query_opt(
        c,
        "SELECT hash, agent, handler, workspace, created_at, revoked_at FROM tokens WHERE hash = ?1",
        [hash],
        || "read token".to_owned(),
        |r| {
            Ok(TokenRow {
                hash: col(r, 0, "token hash")?,
                agent: col_id(r, 1, "token agent")?,
                handler: col_id(r, 2, "token handler")?,
                workspace: col(r, 3, "token workspace")?,
                created_at: col_ts(r, 4, "token created_at")?,
                revoked_at: col_opt_ts(r, 5, "token revoked_at")?,
            })
        },
    )
}

pub(crate) fn revoke_tokens_of(c: &Connection, agent: AgentId, at: Timestamp) -> R<u64> {
    execute(
        c,
        "UPDATE tokens SET revoked_at = ?2 WHERE agent = ?1 AND revoked_at IS NULL",
        params![agent.to_string(), at.0],
        || format!("revoke tokens of agent {agent}"),
    )
    .map(|n| n as u64)
}

pub(crate) fn ids_with_prefix(
    c: &Connection,
    kind: IdKind,
    prefix: &str,
    max: usize,
) -> R<Vec<uuid::Uuid>> {
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
