//! [`MemoryTx`] on PostgreSQL: each handler's memory (`memories` with its
//! `fts` column, `memory_embeddings`, `memory_compactions`).
//!
//! Every query names one handler in its WHERE clause: there is no query
//! across handlers, so no caller can widen a search by mistake. The words
//! of a search reach the full-text engine only as quoted terms
//! (`fts::tsquery`). A search's score is `ts_rank`, higher is better.

use agency_core::{HandlerId, MemoryCompactionId, MemoryId, Timestamp};
use agency_store::StoreError;
use agency_store::memory::{
    CompactionStatus, MemoryChangeRow, MemoryCompactionRow, MemoryCounts, MemoryFilter, MemoryRow,
    MemoryState,
};
use agency_store::tx::{MemoryTx, R};
use tokio_postgres::Row;

use crate::PgTx;
use crate::convert::*;
use crate::fts::tsquery;

const COLS: &str = "m.id, m.handler, m.text, m.kind, m.tags, m.created_at, m.state, \
                    m.changed_at, m.condensed_into, m.compaction";

/// The filter every listing shares, with fixed parameter numbers: $2
/// handler, $3 states, $4 kind, $5 since, $6 until, $7 tags (each must be
/// on the memory, whose tags are a JSON list). $1 and $8 are the query's
/// own.
const FILTER: &str = "m.handler = $2
    AND m.state = ANY($3::TEXT[])
    AND ($4::TEXT IS NULL OR m.kind = $4)
    AND ($5::BIGINT IS NULL OR m.created_at >= $5)
    AND ($6::BIGINT IS NULL OR m.created_at < $6)
    AND NOT EXISTS (SELECT 1 FROM unnest($7::TEXT[]) t(v) WHERE NOT (m.tags::jsonb ? t.v))";

fn row(r: &Row) -> R<MemoryRow> {
    let tags: String = col(r, 4, "memory tags")?;
    let state: String = col(r, 6, "memory state")?;
    Ok(MemoryRow {
        id: col_id(r, 0, "memory id")?,
        handler: col_id(r, 1, "memory handler")?,
        text: col(r, 2, "memory text")?,
        kind: col(r, 3, "memory kind")?,
        tags: serde_json::from_str(&tags).map_err(|_| StoreError::corrupt("memory tags", tags))?,
        created_at: col_ts(r, 5, "memory created_at")?,
        state: MemoryState::parse(&state)
            .ok_or_else(|| StoreError::corrupt("memory state", state))?,
        changed_at: col_opt_ts(r, 7, "memory changed_at")?,
        condensed_into: col_opt_id(r, 8, "memory condensed_into")?,
        compaction: col_opt_id(r, 9, "memory compaction")?,
    })
}

fn states(f: &MemoryFilter) -> Vec<String> {
    if f.states.is_empty() {
        vec![MemoryState::Live.as_str().to_owned()]
    } else {
        f.states.iter().map(|s| s.as_str().to_owned()).collect()
    }
}

fn tags_json(tags: &[String]) -> R<String> {
    serde_json::to_string(tags).map_err(|e| StoreError::backend("encode memory tags", e))
}

fn decode_vector(blob: &[u8]) -> R<Vec<f32>> {
    if !blob.len().is_multiple_of(4) {
        return Err(StoreError::corrupt(
            "memory embedding",
            format!("{} bytes", blob.len()),
        ));
    }
    Ok(blob
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}

const COMPACTION_COLS: &str = "id, handler, requested_at, done_at, undone_at, status, summary";

fn compaction_row(r: &Row) -> R<MemoryCompactionRow> {
    let status: String = col(r, 5, "memory compaction status")?;
    Ok(MemoryCompactionRow {
        id: col_id(r, 0, "memory compaction id")?,
        handler: col_id(r, 1, "memory compaction handler")?,
        requested_at: col_ts(r, 2, "memory compaction requested_at")?,
        done_at: col_opt_ts(r, 3, "memory compaction done_at")?,
        undone_at: col_opt_ts(r, 4, "memory compaction undone_at")?,
        status: CompactionStatus::parse(&status)
            .ok_or_else(|| StoreError::corrupt("memory compaction status", status))?,
        summary: col_opt_id(r, 6, "memory compaction summary")?,
    })
}

impl MemoryTx for PgTx<'_> {
    fn insert_memory(&mut self, m: &MemoryRow) -> R<()> {
        execute(
            self.conn,
            "INSERT INTO memories (id, handler, text, kind, tags, created_at, state, changed_at,
               condensed_into, compaction)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            &[
                &m.id.to_string(),
                &m.handler.to_string(),
                &m.text,
                &m.kind,
                &tags_json(&m.tags)?,
                &m.created_at.0,
                &m.state.as_str(),
                &m.changed_at.map(|t| t.0),
                &opt_text(m.condensed_into),
                &opt_text(m.compaction),
            ],
            || format!("store memory {} of handler {}", m.id, m.handler),
        )
        .map(drop)
    }

    fn memory(&mut self, id: MemoryId) -> R<Option<MemoryRow>> {
        query_opt(
            self.conn,
            &format!("SELECT {COLS} FROM memories m WHERE m.id = $1"),
            &[&id.to_string()],
            || format!("read memory {id}"),
            row,
        )
    }

    /// Full-text search: (row, score) best first.
    fn search_memories(
        &mut self,
        words: &[String],
        f: &MemoryFilter,
        n: usize,
    ) -> R<Vec<(MemoryRow, f64)>> {
        let Some(q) = tsquery(words) else {
            return Ok(Vec::new());
        };
        query_rows(
            self.conn,
            &format!(
                "SELECT {COLS}, ts_rank(m.fts, q)::FLOAT8 AS score
                 FROM memories m, to_tsquery('english', $1) q
                 WHERE m.fts @@ q AND {FILTER}
                 ORDER BY score DESC, m.seq LIMIT $8"
            ),
            &[
                &q,
                &f.handler.to_string(),
                &states(f),
                &f.kind,
                &f.since.map(|t| t.0),
                &f.until.map(|t| t.0),
                &f.tags,
                &limit(n),
            ],
            || format!("search the memory of handler {}", f.handler),
            |r| Ok((row(r)?, col(r, 10, "memory score")?)),
        )
    }

    /// Memories matching the filter, newest first.
    fn list_memories(&mut self, f: &MemoryFilter, n: usize) -> R<Vec<MemoryRow>> {
        query_rows(
            self.conn,
            &format!(
                "SELECT {COLS} FROM memories m WHERE $1::TEXT IS NULL AND {FILTER}
                 ORDER BY m.created_at DESC, m.seq DESC LIMIT $8"
            ),
            &[
                &Option::<String>::None,
                &f.handler.to_string(),
                &states(f),
                &f.kind,
                &f.since.map(|t| t.0),
                &f.until.map(|t| t.0),
                &f.tags,
                &limit(n),
            ],
            || format!("list the memory of handler {}", f.handler),
            row,
        )
    }

    /// Memories matching the filter that have an embedding by `model`, with it.
    fn memory_vectors(&mut self, f: &MemoryFilter, model: &str) -> R<Vec<(MemoryRow, Vec<f32>)>> {
        query_rows(
            self.conn,
            &format!(
                "SELECT {COLS}, e.vector FROM memories m
                 JOIN memory_embeddings e ON e.memory = m.id AND e.model = $1
                 WHERE {FILTER} AND $8::BIGINT IS NULL
                 ORDER BY m.seq"
            ),
            &[
                &model,
                &f.handler.to_string(),
                &states(f),
                &f.kind,
                &f.since.map(|t| t.0),
                &f.until.map(|t| t.0),
                &f.tags,
                &Option::<i64>::None,
            ],
            || format!("read the memory embeddings of handler {}", f.handler),
            |r| {
                let blob: Vec<u8> = col(r, 10, "memory embedding")?;
                Ok((row(r)?, decode_vector(&blob)?))
            },
        )
    }

    fn put_memory_vector(&mut self, memory: MemoryId, model: &str, v: &[f32]) -> R<()> {
        let blob: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        execute(
            self.conn,
            "INSERT INTO memory_embeddings (memory, model, dims, vector) VALUES ($1, $2, $3, $4)
             ON CONFLICT (memory, model) DO UPDATE SET dims = $3, vector = $4",
            &[&memory.to_string(), &model, &limit(v.len()), &blob],
            || format!("store the embedding of memory {memory}"),
        )
        .map(drop)
    }

    fn memory_embedded_count(&mut self, handler: HandlerId, model: &str) -> R<i64> {
        query_value(
            self.conn,
            "SELECT COUNT(*) FROM memories m JOIN memory_embeddings e
               ON e.memory = m.id AND e.model = $2
             WHERE m.handler = $1 AND m.state = 'live'",
            &[&handler.to_string(), &model],
            || format!("count the embedded memories of handler {handler}"),
        )
    }

    fn set_memory_state(
        &mut self,
        id: MemoryId,
        state: MemoryState,
        condensed_into: Option<MemoryId>,
        compaction: Option<MemoryCompactionId>,
        at: Timestamp,
    ) -> R<()> {
        let n = execute(
            self.conn,
            "UPDATE memories SET state = $2, condensed_into = $3,
               compaction = COALESCE($4, compaction), changed_at = $5
             WHERE id = $1",
            &[
                &id.to_string(),
                &state.as_str(),
                &opt_text(condensed_into),
                &opt_text(compaction),
                &at.0,
            ],
            || format!("mark memory {id} {}", state.as_str()),
        )?;
        require_row(n, || format!("mark memory {id} {}", state.as_str()))
    }

    fn memories_condensed_into(&mut self, summary: MemoryId) -> R<Vec<MemoryRow>> {
        query_rows(
            self.conn,
            &format!("SELECT {COLS} FROM memories m WHERE m.condensed_into = $1 ORDER BY m.seq"),
            &[&summary.to_string()],
            || format!("list the memories condensed into {summary}"),
            row,
        )
    }

    fn memory_counts(&mut self, handler: HandlerId) -> R<MemoryCounts> {
        query_opt(
            self.conn,
            "SELECT COUNT(*) FILTER (WHERE state = 'live'),
               COUNT(*) FILTER (WHERE state = 'condensed'),
               COUNT(*) FILTER (WHERE state = 'forgotten'),
               COALESCE(SUM(octet_length(text)) FILTER (WHERE state = 'live'), 0)::BIGINT
             FROM memories WHERE handler = $1",
            &[&handler.to_string()],
            || format!("count the memories of handler {handler}"),
            |r| {
                Ok(MemoryCounts {
                    live: col(r, 0, "live memories")?,
                    condensed: col(r, 1, "condensed memories")?,
                    forgotten: col(r, 2, "forgotten memories")?,
                    live_bytes: col(r, 3, "live memory bytes")?,
                })
            },
        )
        .map(Option::unwrap_or_default)
    }

    fn memory_live_count(&mut self, handler: HandlerId) -> R<i64> {
        query_value(
            self.conn,
            "SELECT COUNT(*) FROM memories WHERE handler = $1 AND state = 'live'",
            &[&handler.to_string()],
            || format!("count the live memories of handler {handler}"),
        )
    }

    fn memory_changes(&mut self, handler: HandlerId, n: usize) -> R<Vec<MemoryChangeRow>> {
        query_rows(
            self.conn,
            "SELECT id, 'stored'::TEXT, created_at FROM memories WHERE handler = $1
             UNION ALL
             SELECT id, state, changed_at FROM memories WHERE handler = $1 AND changed_at IS NOT NULL
             ORDER BY 3 DESC LIMIT $2",
            &[&handler.to_string(), &limit(n)],
            || format!("list the last memory changes of handler {handler}"),
            |r| {
                Ok(MemoryChangeRow {
                    memory: col_id(r, 0, "memory change id")?,
                    change: col(r, 1, "memory change")?,
                    at: col_ts(r, 2, "memory change time")?,
                })
            },
        )
    }

    /// Insert a condensation, or overwrite the one with its id.
    fn put_memory_compaction(&mut self, k: &MemoryCompactionRow) -> R<()> {
        execute(
            self.conn,
            &format!(
                "INSERT INTO memory_compactions ({COMPACTION_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7)
                 ON CONFLICT (id) DO UPDATE SET done_at = $4, undone_at = $5, status = $6,
                   summary = $7"
            ),
            &[
                &k.id.to_string(),
                &k.handler.to_string(),
                &k.requested_at.0,
                &k.done_at.map(|t| t.0),
                &k.undone_at.map(|t| t.0),
                &k.status.as_str(),
                &opt_text(k.summary),
            ],
            || format!("store memory compaction {} of handler {}", k.id, k.handler),
        )
        .map(drop)
    }

    fn memory_compaction(&mut self, id: MemoryCompactionId) -> R<Option<MemoryCompactionRow>> {
        query_opt(
            self.conn,
            &format!("SELECT {COMPACTION_COLS} FROM memory_compactions WHERE id = $1"),
            &[&id.to_string()],
            || format!("read memory compaction {id}"),
            compaction_row,
        )
    }

    /// A handler's condensations, newest first.
    fn memory_compactions(&mut self, handler: HandlerId, n: usize) -> R<Vec<MemoryCompactionRow>> {
        query_rows(
            self.conn,
            &format!(
                "SELECT {COMPACTION_COLS} FROM memory_compactions WHERE handler = $1
                 ORDER BY requested_at DESC, id LIMIT $2"
            ),
            &[&handler.to_string(), &limit(n)],
            || format!("list the memory compactions of handler {handler}"),
            compaction_row,
        )
    }

    /// The handler's open request to condense, if any.
    fn open_memory_compaction(&mut self, handler: HandlerId) -> R<Option<MemoryCompactionRow>> {
        query_opt(
            self.conn,
            &format!(
                "SELECT {COMPACTION_COLS} FROM memory_compactions
                 WHERE handler = $1 AND status = 'requested' ORDER BY requested_at LIMIT 1"
            ),
            &[&handler.to_string()],
            || format!("find the open memory compaction of handler {handler}"),
            compaction_row,
        )
    }
}
