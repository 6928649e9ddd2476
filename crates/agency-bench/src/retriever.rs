//! Item 15b: the Retriever's ranking of a pipeline's lessons at 100 and at
//! 10,000 admitted lessons. The store's `search_lessons` (SQLite FTS5,
//! BM25 over title, trigger and advice; the call AgencyCore's Retriever
//! makes when its stage is handed out) with 10 search words and the top 5
//! (`RECALL_LESSONS`), against reading one lesson by id from the same
//! store, in interleaved rounds. Lessons are written straight through the
//! store's `Tx` in large transactions, as item 12 fills memories.

use std::time::{Duration, Instant};

use agency_core::{LessonId, Timestamp};
use agency_store::{LessonRow, LessonState, SqliteStore, StoreError, Tx};
use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::Cfg;
use crate::learning::DEMO_SCRIPT;
use crate::report::{Row, Section, ratio};
use crate::util::{Pct, fmt_dur};

/// Distinct words lessons are made of; each lesson has [`WORDS`] of them
/// (title 3, trigger 5, advice 12), so a word is in about 1% of lessons.
const VOCABULARY: u64 = 2000;
const WORDS: usize = 20;
/// Search words per recall: what AgencyCore's Retriever passes for the
/// demo's request is about this many (see the notes).
const QUERY_WORDS: usize = 10;
/// Lessons per write transaction while populating.
const BATCH: usize = 10_000;
const ROUNDS: usize = 10;
const PIPELINE: &str = "agencycore";

/// A small xorshift generator: the same lessons and queries every run.
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

    fn words(&mut self, n: usize) -> Vec<String> {
        (0..n)
            .map(|_| format!("w{}", self.next() % VOCABULARY))
            .collect()
    }
}

fn lesson(i: usize, rng: &mut Rng) -> LessonRow {
    let w = rng.words(WORDS);
    let at = Timestamp(1_800_000_000_000 + i as i64);
    LessonRow {
        id: LessonId::new_random(),
        pipeline: PIPELINE.to_owned(),
        key: format!("lesson-{i}"),
        title: format!("Lesson {i}: {}", w[..3].join(" ")),
        scope_kind: "pipeline".to_owned(),
        scope: PIPELINE.to_owned(),
        trigger: w[3..8].join(" "),
        advice: format!("{}.", w[8..].join(" ")),
        counterexample: None,
        state: LessonState::Admitted,
        reason: None,
        version: 3,
        recalled: 0,
        used: 0,
        helpful: 0,
        harmful: 0,
        created_at: at,
        updated_at: at,
    }
}

/// A fresh store with `n` admitted lessons of one pipeline, and one's id.
fn setup(dir: &std::path::Path, n: usize) -> Result<(SqliteStore, LessonId)> {
    let store = SqliteStore::open(&dir.join("agency.db"))?;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut first = None;
    let mut i = 0;
    while i < n {
        let end = (i + BATCH).min(n);
        let id = agency_store::write(&store, |tx: &mut dyn Tx| {
            let mut first = None;
            for k in i..end {
                let l = lesson(k, &mut rng);
                tx.insert_lesson(&l)?;
                first = first.or(Some(l.id));
            }
            Ok::<_, StoreError>(first)
        })?;
        first = first.or(id);
        i = end;
    }
    let first = first.context("failed to populate: no lesson written")?;
    Ok((store, first))
}

/// Search and by-id read of one size, interleaved: (search, by id, found).
fn measure(store: &SqliteStore, id: LessonId, samples: usize) -> Result<(Pct, Pct, usize)> {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let (mut search, mut by_id) = (Vec::new(), Vec::new());
    let mut found = 0usize;
    let per = samples.div_ceil(ROUNDS);
    let n = agency_service::pipelines::RECALL_LESSONS;
    for _ in 0..ROUNDS {
        for _ in 0..per {
            let words = rng.words(QUERY_WORDS);
            let t = Instant::now();
            let hits = agency_store::read(store, |tx: &mut dyn Tx| {
                tx.search_lessons(PIPELINE, &words, n)
            })?;
            search.push(t.elapsed());
            found += hits.len();
        }
        for _ in 0..per {
            let t = Instant::now();
            let l = agency_store::read(store, |tx: &mut dyn Tx| tx.lesson(id))?;
            by_id.push(t.elapsed());
            if l.is_none() {
                bail!("lesson {id} is missing from the store it was written to");
            }
        }
    }
    if found == 0 {
        bail!("no search found anything: the populated lessons do not match the queries");
    }
    Ok((Pct::of(&search), Pct::of(&by_id), found))
}

/// The search words AgencyCore's Retriever passes for the demo's run:
/// those of its reads in the demo's answers.
fn demo_words() -> Result<usize> {
    let doc: Value =
        serde_json::from_str(DEMO_SCRIPT).context("failed to parse the demo's model script")?;
    let answer = |stage: &str| -> Result<Value> {
        let s = doc["scenarios"]
            .as_array()
            .and_then(|a| {
                a.iter()
                    .find(|s| s["name"] == format!("AgencyCore {stage}"))
            })
            .with_context(|| format!("failed to find {stage} in the demo's model script"))?;
        serde_json::from_str(s["turns"][0]["text"].as_str().unwrap_or_default())
            .with_context(|| format!("failed to parse {stage}'s answer in the demo's script"))
    };
    let (o, p, c) = (
        answer("Observer")?,
        answer("PatternObserver")?,
        answer("CruxFinder")?,
    );
    let names: Vec<Value> = p["patterns"]
        .as_array()
        .map(|a| a.iter().map(|x| x["name"].clone()).collect())
        .unwrap_or_default();
    let names = Value::Array(names);
    let reads = [
        &c["subProblems"],
        &c["requiredKnowledge"],
        &o["keywords"],
        &names,
    ];
    Ok(agency_service::pipelines::words_of(reads).len())
}

pub fn run(cfg: Cfg) -> Result<Section> {
    let large = 10_000;
    let samples = cfg.pick(2000, 200);
    let top = agency_service::pipelines::RECALL_LESSONS;
    let mut s = Section::new(format!(
        "15b. Learning loop: the Retriever's ranking of {QUERY_WORDS} words over 100 and {large} admitted lessons vs reading one lesson by id"
    ));
    let mut p50s: Vec<(usize, Duration, Duration)> = Vec::new();
    for n in [100, large] {
        let dir = tempfile::tempdir().context("failed to create a temporary directory")?;
        let t = Instant::now();
        let (store, id) = setup(dir.path(), n)?;
        let filled = t.elapsed();
        // Warm the caches (page cache, statements) before timing.
        measure(&store, id, ROUNDS * 5)?;
        let (search, by_id, found) = measure(&store, id, samples)?;
        s.rows.push(Row::times(
            format!("search_lessons p50, {n} lessons"),
            search.p50,
            ("lesson by id p50", by_id.p50),
        ));
        s.rows.push(Row::times(
            format!("search_lessons p99, {n} lessons"),
            search.p99,
            ("lesson by id p99", by_id.p99),
        ));
        s.notes.push(format!(
            "{n} lessons written in {} ({} per transaction); {} searches ({:.1} lessons found per search, top {top}) and {} reads by id, interleaved in {ROUNDS} rounds after a warm-up",
            fmt_dur(filled),
            BATCH.min(n),
            search.n,
            found as f64 / search.n.max(1) as f64,
            by_id.n
        ));
        p50s.push((n, search.p50, search.p99));
    }
    if let [(_, small, small99), (n, big, big99)] = p50s[..] {
        s.rows.push(Row::times(
            format!("search_lessons p50, {n} vs 100 lessons"),
            big,
            ("p50 at 100 lessons", small),
        ));
        s.rows.push(Row::times(
            format!("search_lessons p99, {n} vs 100 lessons"),
            big99,
            ("p99 at 100 lessons", small99),
        ));
        s.shows = format!(
            "what recalling lessons costs a run's Retriever as a pipeline's lessons grow: the p50 of a {QUERY_WORDS}-word ranking goes from {} at 100 lessons to {} at {n} ({}), once per run, beside model calls of milliseconds.",
            fmt_dur(small),
            fmt_dur(big),
            ratio(big.as_secs_f64(), small.as_secs_f64())
        );
    }
    s.notes.push(format!(
        "each lesson is {WORDS} words drawn from {VOCABULARY} (title 3, trigger 5, advice 12, so each query word is in about 1% of lessons and a {QUERY_WORDS}-word query matches about a tenth of them, all ranked); queries are {QUERY_WORDS} such words OR-ed, top {top} by BM25 among the pipeline's admitted lessons, as the Retriever asks (for the demo's request it passes {} words); SQLite FTS5 with the Porter tokenizer, in a temporary directory; the store is called directly (a read transaction each), not through the service's recall, which then logs each lesson recalled with the run; lessons are written through the store, not learned.",
        demo_words()?
    ));
    Ok(s)
}
