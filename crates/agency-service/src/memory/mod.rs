//! Each handler's memory: notes its agents store for the
//! later agents of the same handler, kept across agent lifetimes and daemon
//! restarts, apart from the state document.
//!
//! Who sees what: an agent acts on its own handler's memory only (naming
//! another handler, or another handler's memory id, finds nothing, exactly
//! as for a memory that does not exist); the user reads and forgets any
//! handler's (CLI and REST) and alone undoes a condensation. Nothing here
//! searches across handlers: every store query names one.
//!
//! A memory is text (1 byte to 16 KiB), up to 16 tags (1-64 characters of
//! `A-Za-z0-9_.:-`) and a kind, one of [`MEMORY_KINDS`] (default `note`).
//! Forgetting and condensing mark memories instead of deleting them, so the
//! user can read the history and undo a condensation.
//!
//! Ranking (`ranked`): full-text search with BM25 (SQLite FTS5, Porter
//! stemming); with an [`crate::Embedder`] installed, the query is embedded too and
//! the handler's embedded memories are ranked by cosine similarity (those
//! below `min_similarity` left out), and the two rankings are fused by
//! reciprocal rank fusion (score = Σ 1/(60 + rank)). An embedding that
//! fails is logged and the search falls back to full text; a memory stored
//! while embeddings failed keeps no embedding (it is never embedded later;
//! `agency memory status` shows how many have one) and is found by its
//! words only.

pub(crate) mod compact;
pub(crate) mod recall;

use std::collections::HashMap;

use agency_core::{HandlerId, MemoryId, Principal, Timestamp};
use agency_store::{
    CompactionStatus, MemoryCompactionRow, MemoryFilter, MemoryRow, MemoryState, Tx,
};

pub use agency_api::{CompactionView, MemoryStatus, MemoryView};

use crate::service::settings::MemoryConfig;
use crate::service::{Caller, Service, System, authenticate};
use crate::{Result, ServiceError};

/// The kinds a memory may have; `note` when none is given.
pub const MEMORY_KINDS: &[&str] = &["fact", "preference", "entity", "event", "note"];
/// Largest memory text, in bytes.
pub const MAX_MEMORY_BYTES: usize = 16 * 1024;
/// Most tags on one memory, and the longest tag.
pub const MAX_MEMORY_TAGS: usize = 16;
const MAX_TAG_CHARS: usize = 64;
/// Results of a search when no limit is given, and the most one may ask.
const DEFAULT_LIMIT: usize = 10;
const MAX_LIMIT: usize = 100;
/// Words of a query used (the rest are dropped): a long query would make
/// every search an OR of hundreds of terms.
const MAX_QUERY_WORDS: usize = 64;
/// Candidates each ranking contributes before fusion.
const CANDIDATES: usize = 100;
/// Reciprocal rank fusion's constant (Cormack et al.).
const RRF_K: f64 = 60.0;
/// Most memories one condensation replaces.
const MAX_CONDENSE: usize = 200;

/// The view of a memory row (`score` from a search).
pub(crate) fn memory_view(m: MemoryRow, score: Option<f64>) -> MemoryView {
    {
        MemoryView {
            id: m.id,
            handler: m.handler,
            text: m.text,
            kind: m.kind,
            tags: m.tags,
            created_at: m.created_at,
            state: m.state,
            condensed_into: m.condensed_into,
            compaction: m.compaction,
            score,
        }
    }
}

/// What a search asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemorySearch {
    /// Words; a memory matching more of them ranks higher.
    pub query: String,
    /// Every one must be on the memory.
    pub tags: Vec<String>,
    pub kind: Option<String>,
    /// Stored at or after.
    pub since: Option<Timestamp>,
    /// Stored before.
    pub until: Option<Timestamp>,
    pub limit: Option<usize>,
    /// Forgotten and condensed memories too (history).
    pub all_states: bool,
}

impl Service {
    pub(crate) fn memory_config(&self) -> MemoryConfig {
        self.memory_cfg
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .unwrap_or_default()
    }

    /// An agent stores a memory for its handler.
    pub fn memory_store(
        &self,
        who: Principal,
        text: &str,
        tags: &[String],
        kind: Option<&str>,
    ) -> Result<MemoryView> {
        check_text("store a memory", text)?;
        check_tags("store a memory", tags)?;
        let kind = check_kind("store a memory", kind)?;
        let vector = self.embed_one(text);
        let max = self.memory_config().max_per_handler;
        self.write(|op| {
            let caller = authenticate(op.tx, who)?;
            let h = caller.require_handler("store a memory")?.id;
            check_room(op.tx, h, max)?;
            let row = MemoryRow {
                id: MemoryId::new_random(),
                handler: h,
                text: text.to_owned(),
                kind: Some(kind),
                tags: tags.to_vec(),
                created_at: op.now,
                state: MemoryState::Live,
                changed_at: None,
                condensed_into: None,
                compaction: None,
            };
            op.tx.insert_memory(&row)?;
            if let Some((model, v)) = &vector {
                op.tx.put_memory_vector(row.id, model, v)?;
            }
            Ok(memory_view(row, None))
        })
    }

    /// Search a handler's memory: an agent its own (`handler` `None` or its
    /// own), the user any (named). Best first.
    pub fn memory_search(
        &self,
        who: Principal,
        handler: Option<HandlerId>,
        s: &MemorySearch,
    ) -> Result<Vec<MemoryView>> {
        let words = query_words(&s.query);
        if words.is_empty() {
            return Err(ServiceError::invalid(format!(
                "failed to search memories for {:?}: the query has no word (letters or digits); give the words to look for",
                s.query
            )));
        }
        check_tags("search memories", &s.tags)?;
        if let Some(k) = &s.kind {
            check_kind("search memories", Some(k))?;
        }
        let limit = s.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
        let query_vec = self.embed_one(&s.query);
        let min_sim = self.memory_config().min_similarity;
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            let h = scope(tx, &caller, handler, "search memories")?;
            let filter = MemoryFilter {
                handler: h,
                states: if s.all_states {
                    vec![
                        MemoryState::Live,
                        MemoryState::Condensed,
                        MemoryState::Forgotten,
                    ]
                } else {
                    vec![MemoryState::Live]
                },
                kind: s.kind.clone(),
                tags: s.tags.clone(),
                since: s.since,
                until: s.until,
            };
            let hits = ranked(tx, &words, query_vec.as_ref(), min_sim, &filter, limit)?;
            Ok(hits
                .into_iter()
                .map(|(m, score)| memory_view(m, Some(score)))
                .collect())
        })
    }

    /// One memory by id, in any state: an agent its own handler's, the
    /// user any handler's (named).
    pub fn memory_show(
        &self,
        who: Principal,
        handler: Option<HandlerId>,
        id: MemoryId,
    ) -> Result<MemoryView> {
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            let h = scope(tx, &caller, handler, "read a memory")?;
            Ok(memory_view(owned(tx, h, id)?, None))
        })
    }

    /// Forget a live memory (kept as history, out of search and recall):
    /// an agent its own handler's, the user any handler's (named).
    pub fn memory_forget(
        &self,
        who: Principal,
        handler: Option<HandlerId>,
        id: MemoryId,
    ) -> Result<MemoryView> {
        self.write(|op| {
            let caller = authenticate(op.tx, who)?;
            let h = scope(op.tx, &caller, handler, "forget a memory")?;
            let m = owned(op.tx, h, id)?;
            if m.state != MemoryState::Live {
                return Err(ServiceError::invalid(format!(
                    "failed to forget memory {id}: it is already {}",
                    m.state.as_str()
                )));
            }
            op.tx
                .set_memory_state(id, MemoryState::Forgotten, None, None, op.now)?;
            let m = owned(op.tx, h, id)?;
            Ok(memory_view(m, None))
        })
    }

    /// A handler's memory at a glance: the user any handler's, an agent its
    /// own.
    pub fn memory_status(
        &self,
        who: Principal,
        handler: Option<HandlerId>,
    ) -> Result<MemoryStatus> {
        let cfg = self.memory_config();
        let model = self.embedder.as_ref().map(|e| e.model().to_owned());
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            let h = scope(tx, &caller, handler, "read the memory status")?;
            let embedded_live = match &model {
                Some(m) => tx.memory_embedded_count(h, m)?,
                None => 0,
            };
            Ok(MemoryStatus {
                handler: h,
                counts: crate::wire::memory_counts(tx.memory_counts(h)?),
                last_changes: tx
                    .memory_changes(h, 5)?
                    .into_iter()
                    .map(crate::wire::memory_change)
                    .collect(),
                embeddings_model: model.clone(),
                embedded_live,
                open_compaction: tx.open_memory_compaction(h)?.map(crate::wire::compaction),
                condense_after: cfg.condense_after,
                max_per_handler: cfg.max_per_handler,
            })
        })
    }

    /// The embedding of `text` by the installed embedder, if any; a failure
    /// is logged and yields none (the caller goes on without).
    pub(crate) fn embed_one(&self, text: &str) -> Option<(String, Vec<f32>)> {
        let e = self.embedder.as_ref()?;
        match e.embed(&[text]) {
            Ok(mut v) if v.len() == 1 && !v[0].is_empty() => {
                Some((e.model().to_owned(), v.swap_remove(0)))
            }
            Ok(v) => {
                tracing::warn!(
                    model = e.model(),
                    vectors = v.len(),
                    "failed to embed a memory text: the endpoint answered no single vector; using full-text search only"
                );
                None
            }
            Err(err) => {
                tracing::warn!(model = e.model(), error = %err, "failed to embed a memory text; using full-text search only");
                None
            }
        }
    }
}

/// The handler whose memory an operation acts on: for an agent its own
/// (naming another is "not found", as if it did not exist), for the user
/// the one named, which must exist.
pub(crate) fn scope(
    tx: &mut dyn Tx,
    caller: &Caller,
    named: Option<HandlerId>,
    what: &str,
) -> Result<HandlerId> {
    match caller {
        Caller::Handler { row, .. } => match named {
            None => Ok(row.id),
            Some(h) if h == row.id => Ok(h),
            Some(h) => Err(ServiceError::not_found("handler", h)),
        },
        Caller::User => {
            let h = caller.named_or_own(named, what)?;
            if tx.handler(h)?.is_none() {
                return Err(ServiceError::not_found("handler", h));
            }
            Ok(h)
        }
    }
}

/// Memory `id` if it is `handler`'s; another handler's is "not found".
pub(crate) fn owned(tx: &mut dyn Tx, handler: HandlerId, id: MemoryId) -> Result<MemoryRow> {
    match tx.memory(id)? {
        Some(m) if m.handler == handler => Ok(m),
        _ => Err(ServiceError::not_found("memory", id)),
    }
}

/// Refuse a store past `memory.max_per_handler` live memories.
pub(crate) fn check_room(tx: &mut dyn Tx, h: HandlerId, max: usize) -> Result<()> {
    let live = usize::try_from(tx.memory_live_count(h)?).unwrap_or(usize::MAX);
    if live >= max {
        return Err(ServiceError::Quota(format!(
            "failed to store a memory for handler {h}: it holds {live} live memories, the limit memory.max_per_handler = {max} in agency.toml; forget some (memory_forget) or condense related ones into one (memory_condense) first"
        )));
    }
    Ok(())
}

/// The words of a query: runs of letters and digits, each once
/// (case-insensitively), at most [`MAX_QUERY_WORDS`]. Everything else
/// separates words, as the full-text tokenizer does, so no character of
/// the query is ever read as search syntax.
pub(crate) fn query_words(q: &str) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    q.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .filter(|w| seen.insert(w.to_lowercase()))
        .take(MAX_QUERY_WORDS)
        .map(str::to_owned)
        .collect()
}

pub(crate) fn check_text(what: &str, text: &str) -> Result<()> {
    if text.trim().is_empty() {
        return Err(ServiceError::invalid(format!(
            "failed to {what}: the text is empty; write what to remember"
        )));
    }
    if text.len() > MAX_MEMORY_BYTES {
        return Err(ServiceError::invalid(format!(
            "failed to {what}: the text is {} bytes, more than the {MAX_MEMORY_BYTES} a memory may hold; store the essentials, or several smaller memories",
            text.len()
        )));
    }
    Ok(())
}

pub(crate) fn check_tags(what: &str, tags: &[String]) -> Result<()> {
    if tags.len() > MAX_MEMORY_TAGS {
        return Err(ServiceError::invalid(format!(
            "failed to {what}: {} tags, more than the {MAX_MEMORY_TAGS} allowed",
            tags.len()
        )));
    }
    for t in tags {
        let ok = !t.is_empty()
            && t.chars().count() <= MAX_TAG_CHARS
            && t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'));
        if !ok {
            return Err(ServiceError::invalid(format!(
                "failed to {what}: tag {t:?} is not 1-{MAX_TAG_CHARS} characters of A-Z, a-z, 0-9, '_', '.', ':' or '-'"
            )));
        }
    }
    Ok(())
}

/// The kind, `note` when none is given.
pub(crate) fn check_kind(what: &str, kind: Option<&str>) -> Result<String> {
    let k = kind.unwrap_or("note");
    if !MEMORY_KINDS.contains(&k) {
        return Err(ServiceError::invalid(format!(
            "failed to {what}: kind {k:?} is not one of {}",
            MEMORY_KINDS.join(", ")
        )));
    }
    Ok(k.to_owned())
}

/// A handler's memories best first, at most `limit`: BM25 alone, or fused
/// with cosine similarity to `query_vec` by reciprocal rank fusion.
pub(crate) fn ranked(
    tx: &mut dyn Tx,
    words: &[String],
    query_vec: Option<&(String, Vec<f32>)>,
    min_similarity: f32,
    filter: &MemoryFilter,
    limit: usize,
) -> Result<Vec<(MemoryRow, f64)>> {
    let Some((model, qv)) = query_vec else {
        let mut hits = tx.search_memories(words, filter, limit)?;
        hits.truncate(limit);
        return Ok(hits);
    };
    let text_hits = tx.search_memories(words, filter, CANDIDATES)?;
    let mut by_vec: Vec<(MemoryRow, f32)> = tx
        .memory_vectors(filter, model)?
        .into_iter()
        .filter_map(|(m, v)| {
            let s = cosine(qv, &v)?;
            (s >= min_similarity).then_some((m, s))
        })
        .collect();
    by_vec.sort_by(|a, b| {
        b.1.total_cmp(&a.1)
            .then(a.0.created_at.cmp(&b.0.created_at))
    });
    by_vec.truncate(CANDIDATES);
    let mut fused: HashMap<MemoryId, (MemoryRow, f64)> = HashMap::new();
    let lists = [
        text_hits.into_iter().map(|(m, _)| m).collect::<Vec<_>>(),
        by_vec.into_iter().map(|(m, _)| m).collect(),
    ];
    for list in lists {
        for (i, m) in list.into_iter().enumerate() {
            let add = 1.0 / (RRF_K + (i + 1) as f64);
            fused.entry(m.id).or_insert((m, 0.0)).1 += add;
        }
    }
    let mut out: Vec<(MemoryRow, f64)> = fused.into_values().collect();
    out.sort_by(|a, b| {
        b.1.total_cmp(&a.1)
            .then(b.0.created_at.cmp(&a.0.created_at))
            .then(a.0.id.cmp(&b.0.id))
    });
    out.truncate(limit);
    Ok(out)
}

/// Cosine similarity; `None` for vectors of different lengths (another
/// model's, or a corrupt row) or a zero vector.
pub(crate) fn cosine(a: &[f32], b: &[f32]) -> Option<f32> {
    if a.len() != b.len() || a.is_empty() {
        return None;
    }
    let (mut dot, mut na, mut nb) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        return None;
    }
    Some(dot / (na.sqrt() * nb.sqrt()))
}

/// The stored states for a compaction listing: a condensation's originals.
pub(crate) fn compaction_view(tx: &mut dyn Tx, row: MemoryCompactionRow) -> Result<CompactionView> {
    let condensed = match row.summary {
        Some(s) => tx
            .memories_condensed_into(s)?
            .into_iter()
            .map(|m| m.id)
            .collect(),
        None => Vec::new(),
    };
    Ok(CompactionView {
        row: crate::wire::compaction(row),
        condensed,
    })
}

/// The status a finished condensation gets.
pub(crate) fn done(
    row: MemoryCompactionRow,
    summary: MemoryId,
    at: Timestamp,
) -> MemoryCompactionRow {
    MemoryCompactionRow {
        done_at: Some(at),
        status: CompactionStatus::Done,
        summary: Some(summary),
        ..row
    }
}

pub(crate) const MAX_CONDENSE_IDS: usize = MAX_CONDENSE;

impl System {
    /// Daemon: the `[memory]` settings (at start, and again at `agency
    /// reload`; a service never told uses the defaults).
    pub fn set_memory_config(&self, cfg: MemoryConfig) {
        *self.memory_cfg.write().unwrap_or_else(|p| p.into_inner()) = Some(cfg);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn query_words_drop_syntax_and_repeats() {
        assert_eq!(
            query_words("Deploy \"deploy\" (NEAR) key* -x"),
            vec!["Deploy", "NEAR", "key", "x"]
        );
        assert!(query_words("\"*()-^:").is_empty());
    }

    #[test]
    fn cosine_is_none_for_mismatched_or_zero_vectors() {
        assert_eq!(cosine(&[1.0, 0.0], &[1.0, 0.0]), Some(1.0));
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 1.0]), Some(0.0));
        assert_eq!(cosine(&[1.0], &[1.0, 0.0]), None);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), None);
    }

    #[test]
    fn tags_and_kinds_are_checked() {
        assert!(check_tags("x", &["a:b.c-d_e".into()]).is_ok());
        assert!(check_tags("x", &["a b".into()]).is_err());
        assert!(check_tags("x", &[String::new()]).is_err());
        assert!(check_tags("x", &["t".repeat(65)]).is_err());
        assert!(check_tags("x", &vec!["t".to_owned(); 17]).is_err());
        assert_eq!(check_kind("x", None).unwrap(), "note");
        assert!(check_kind("x", Some("instruction")).is_err());
    }
}
