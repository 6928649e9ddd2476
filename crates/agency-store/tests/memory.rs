//! The store side of handlers' memory (issue 13, migration 19): FTS5 is
//! there and stays in step with the rows, every search is one handler's,
//! filters and states hold, embeddings round-trip, and memories survive
//! reopening the database.

#![allow(clippy::unwrap_used)]

use agency_core::{HandlerId, MemoryId, Timestamp};
use agency_store::{MemoryFilter, MemoryRow, MemoryState, SqliteStore, StoreError, read, write};
use tempfile::TempDir;
use uuid::Uuid;

fn open(dir: &TempDir) -> SqliteStore {
    SqliteStore::open(&dir.path().join("agency.db")).unwrap()
}

fn hid(n: u128) -> HandlerId {
    HandlerId(Uuid::from_u128(n))
}

fn mem(h: HandlerId, text: &str, tags: &[&str], kind: &str, at: i64) -> MemoryRow {
    MemoryRow {
        id: MemoryId::new_random(),
        handler: h,
        text: text.to_owned(),
        kind: Some(kind.to_owned()),
        tags: tags.iter().map(|t| (*t).to_owned()).collect(),
        created_at: Timestamp(at),
        state: MemoryState::Live,
        changed_at: None,
        condensed_into: None,
        compaction: None,
    }
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_owned).collect()
}

fn search(store: &SqliteStore, q: &str, f: &MemoryFilter) -> Vec<(MemoryRow, f64)> {
    read(store, |tx| tx.search_memories(&words(q), f, 50)).unwrap()
}

#[test]
fn issue13_search_is_ranked_scoped_to_one_handler_and_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (hid(1), hid(2));
    let store = open(&dir);
    let best = mem(
        a,
        "Connect to the VPN first; connect to the build server after",
        &[],
        "fact",
        10,
    );
    let other = mem(
        a,
        "The user prefers tea to coffee",
        &["user"],
        "preference",
        20,
    );
    let weak = mem(a, "Connection notes live in the wiki", &[], "note", 30);
    let foreign = mem(b, "Handler B's secret plan to connect", &[], "fact", 40);
    write(&store, |tx| {
        for m in [&best, &other, &weak, &foreign] {
            tx.insert_memory(m)?;
        }
        Ok::<_, StoreError>(())
    })
    .unwrap();

    // Porter stemming: "connecting" finds "Connect" and "Connection"; two
    // occurrences rank above one; B's memory is never in A's results.
    let hits = search(&store, "connecting", &MemoryFilter::live(a));
    let ids: Vec<MemoryId> = hits.iter().map(|(m, _)| m.id).collect();
    assert_eq!(ids, vec![best.id, weak.id]);
    assert!(hits[0].1 > hits[1].1, "{hits:?}");
    let hits_b = search(&store, "connect", &MemoryFilter::live(b));
    assert_eq!(hits_b.len(), 1);
    assert_eq!(hits_b[0].0.id, foreign.id);

    // Tags are searchable words and exact filters; kinds and times filter.
    assert_eq!(
        search(&store, "user", &MemoryFilter::live(a))[0].0.id,
        other.id
    );
    let mut f = MemoryFilter::live(a);
    f.tags = vec!["user".into()];
    assert_eq!(search(&store, "tea connect", &f).len(), 1);
    let mut f = MemoryFilter::live(a);
    f.kind = Some("note".into());
    assert_eq!(search(&store, "connect", &f)[0].0.id, weak.id);
    let mut f = MemoryFilter::live(a);
    f.since = Some(Timestamp(15));
    f.until = Some(Timestamp(30));
    assert_eq!(search(&store, "connect tea", &f)[0].0.id, other.id);
    assert_eq!(search(&store, "connect tea", &f).len(), 1);

    // Punctuation alone (FTS5 syntax characters) finds nothing and is no
    // syntax error; a quote inside a word is only a character.
    assert!(search(&store, "\" * ( ) NEAR/2 -", &MemoryFilter::live(a)).is_empty());
    assert!(search(&store, "con\"nect", &MemoryFilter::live(a)).is_empty());

    // A forgotten memory is out of live search, in a search of all states.
    write(&store, |tx| {
        tx.set_memory_state(best.id, MemoryState::Forgotten, None, None, Timestamp(50))
    })
    .unwrap();
    assert_eq!(search(&store, "connect", &MemoryFilter::live(a)).len(), 1);
    let mut all = MemoryFilter::live(a);
    all.states = vec![
        MemoryState::Live,
        MemoryState::Forgotten,
        MemoryState::Condensed,
    ];
    assert_eq!(search(&store, "connect", &all).len(), 2);

    // Reopen (a daemon restart): the rows and the index are still there.
    drop(store);
    let store = open(&dir);
    let hits = search(&store, "coffee", &MemoryFilter::live(a));
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].0, other);
    let counts = read(&store, |tx| tx.memory_counts(a)).unwrap();
    assert_eq!((counts.live, counts.forgotten, counts.condensed), (2, 1, 0));
    assert_eq!(
        counts.live_bytes,
        (other.text.len() + weak.text.len()) as i64
    );
    let changes = read(&store, |tx| tx.memory_changes(a, 2)).unwrap();
    assert_eq!(changes[0].change, "forgotten");
    assert_eq!(changes[0].memory, best.id);
    assert_eq!(changes[1].change, "stored");
    assert_eq!(changes[1].memory, weak.id);
}

#[test]
fn issue13_fts_index_follows_changed_text() {
    // The triggers keep the external-content index in step: an UPDATE of
    // the text (nothing in Agency does it today, a repair might) moves
    // the words, and a DELETE removes them.
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let a = hid(1);
    let m = mem(a, "alpha", &[], "note", 1);
    write(&store, |tx| tx.insert_memory(&m)).unwrap();
    drop(store);
    let c = rusqlite_update(&dir, "UPDATE memories SET text = 'beta'");
    assert_eq!(c, 1);
    let store = open(&dir);
    assert!(search(&store, "alpha", &MemoryFilter::live(a)).is_empty());
    assert_eq!(search(&store, "beta", &MemoryFilter::live(a)).len(), 1);
    drop(store);
    rusqlite_update(&dir, "DELETE FROM memories");
    let store = open(&dir);
    assert!(search(&store, "beta", &MemoryFilter::live(a)).is_empty());
}

fn rusqlite_update(dir: &TempDir, sql: &str) -> usize {
    let c = rusqlite::Connection::open(dir.path().join("agency.db")).unwrap();
    c.execute(sql, []).unwrap()
}
