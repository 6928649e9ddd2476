//! Item 12: memory search of one handler at 100 and at
//! 100,000 memories. The service's `memory_search` (as the user, full-text
//! BM25 over SQLite FTS5, no embeddings) with a 2-word query, against the
//! same service reading one memory by id (`memory_show`: authentication
//! plus an indexed SELECT of one row), in interleaved rounds in the same
//! store. Memories are written straight through the store's `Tx` in large
//! transactions, as `populate.rs` fills a home, so 100,000 take seconds.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agency_core::{HandlerId, MemoryId, Principal, Timestamp};
use agency_service::{MemorySearch, Service, System, SystemClock};
use agency_store::{FsBlobStore, MemoryRow, MemoryState, SqliteStore, StoreError, Tx};
use anyhow::{Context, Result, bail};

use crate::Cfg;
use crate::report::{Row, Section};
use crate::util::{Pct, fmt_dur};

/// Distinct words memories are made of; each memory has [`WORDS`] of them,
/// so a word is in about `WORDS / VOCABULARY` of the memories (0.6%).
const VOCABULARY: u64 = 2000;
const WORDS: usize = 12;
/// Memories per write transaction while populating.
const BATCH: usize = 10_000;
const ROUNDS: usize = 10;

/// A small xorshift generator: the same memories and queries every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn word(&mut self) -> String {
        format!("w{}", self.next() % VOCABULARY)
    }
}

fn memory(h: HandlerId, i: usize, rng: &mut Rng) -> MemoryRow {
    let words: Vec<String> = (0..WORDS).map(|_| rng.word()).collect();
    MemoryRow {
        id: MemoryId::new_random(),
        handler: h,
        text: format!("note {i}: {}", words.join(" ")),
        kind: Some("note".to_owned()),
        tags: Vec::new(),
        created_at: Timestamp(1_800_000_000_000 + i as i64),
        state: MemoryState::Live,
        changed_at: None,
        condensed_into: None,
        compaction: None,
    }
}

/// A fresh store with `n` memories of its root handler: the service, the
/// handler and one memory's id.
fn setup(dir: &std::path::Path, n: usize) -> Result<(Arc<System>, HandlerId, MemoryId)> {
    let store = Arc::new(SqliteStore::open(&dir.join("agency.db"))?);
    let blobs = Arc::new(FsBlobStore::open(dir.join("blobs"))?);
    let svc = Arc::new(Service::builder(store.clone(), blobs, Arc::new(SystemClock)).build());
    let h = svc.bootstrap()?;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut first = None;
    let mut i = 0;
    while i < n {
        let end = (i + BATCH).min(n);
        let ids = agency_store::write(&*store, |tx: &mut dyn Tx| {
            let mut ids = Vec::new();
            for k in i..end {
                let m = memory(h, k, &mut rng);
                tx.insert_memory(&m)?;
                ids.push(m.id);
            }
            Ok::<_, StoreError>(ids)
        })?;
        first = first.or(ids.first().copied());
        i = end;
    }
    let first = first.context("failed to populate: no memory written")?;
    Ok((svc, h, first))
}

/// Search and by-id read of one size, interleaved: (search, by id).
fn measure(svc: &System, h: HandlerId, id: MemoryId, samples: usize) -> Result<(Pct, Pct)> {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let (mut search, mut by_id) = (Vec::new(), Vec::new());
    let mut found = 0usize;
    let per = samples.div_ceil(ROUNDS);
    for _ in 0..ROUNDS {
        for _ in 0..per {
            let q = MemorySearch {
                query: format!("{} {}", rng.word(), rng.word()),
                limit: Some(10),
                ..MemorySearch::default()
            };
            let t = Instant::now();
            let hits = svc.memory_search(Principal::User, Some(h), &q)?;
            search.push(t.elapsed());
            found += hits.len();
        }
        for _ in 0..per {
            let t = Instant::now();
            svc.memory_show(Principal::User, Some(h), id)?;
            by_id.push(t.elapsed());
        }
    }
    if found == 0 {
        bail!("no search found anything: the populated memories do not match the queries");
    }
    Ok((Pct::of(&search), Pct::of(&by_id)))
}

pub fn run(cfg: Cfg) -> Result<Vec<Section>> {
    let large = cfg.pick(100_000, 10_000);
    let samples = cfg.pick(500, 100);
    let mut s = Section::new(format!(
        "12. Memory search of one handler: 2-word query at 100 and {large} memories vs reading one memory by id"
    ));
    let mut p50s: Vec<(usize, Duration)> = Vec::new();
    for n in [100, large] {
        let dir = tempfile::tempdir().context("failed to create a temporary directory")?;
        let t = Instant::now();
        let (svc, h, id) = setup(dir.path(), n)?;
        let filled = t.elapsed();
        // Warm the caches (page cache, statements) before timing.
        measure(&svc, h, id, ROUNDS * 5)?;
        let (search, by_id) = measure(&svc, h, id, samples)?;
        s.rows.push(Row::times(
            format!("memory_search p50, {n} memories"),
            search.p50,
            ("memory by id p50", by_id.p50),
        ));
        s.rows.push(Row::times(
            format!("memory_search p99, {n} memories"),
            search.p99,
            ("memory by id p99", by_id.p99),
        ));
        s.notes.push(format!(
            "{n} memories written in {} ({} per transaction); {} searches and {} reads by id, interleaved in {ROUNDS} rounds after a warm-up",
            fmt_dur(filled),
            BATCH.min(n),
            search.n,
            by_id.n
        ));
        p50s.push((n, search.p50));
    }
    if let [(_, small), (n, big)] = p50s[..] {
        s.shows = format!(
            "what a handler's memory costs to search as it grows: the p50 of a 2-word search goes from {} at 100 memories to {} at {n} ({}), against one indexed read of a memory by id through the same service.",
            fmt_dur(small),
            fmt_dur(big),
            crate::report::ratio(big.as_secs_f64(), small.as_secs_f64())
        );
    }
    s.notes.push(format!(
        "each memory is 12 words drawn from {VOCABULARY} (so each query word is in about 0.6% of memories); queries are 2 such words, OR-ed, top 10 by BM25; SQLite FTS5 with the Porter tokenizer, in a temporary directory; the service is called directly as the user (no daemon, no MCP); 100,000 is past the default `memory.max_per_handler` (10,000), so the memories are written through the store, not `memory_store`."
    ));
    Ok(vec![s])
}
