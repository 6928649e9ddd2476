//! Handlers' memory: every search is one handler's and follows states;
//! embeddings, condensation and compactions round-trip.

use agency_core::{HandlerId, MemoryCompactionId, MemoryId, Timestamp};

use super::New;
use super::fixtures::*;
use crate::{
    CompactionStatus, MemoryCompactionRow, MemoryFilter, MemoryRow, MemoryState, StoreError, read,
    write,
};

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

/// Plain words only (no stemming, no ranking): what every backend's full
/// text search agrees on. SQLite's FTS5 specifics are tested beside it.
pub fn search_is_scoped_to_one_handler_and_states(new: &New) {
    let (_d, store) = new();
    let (a, b) = (hid(1), hid(2));
    let tea = mem(a, "The user prefers tea", &["user"], "preference", 10);
    let vpn = mem(a, "Connect to the vpn first", &[], "fact", 20);
    let foreign = mem(b, "Handler two also likes tea", &[], "fact", 30);
    write(&*store, |tx| {
        for m in [&tea, &vpn, &foreign] {
            tx.insert_memory(m)?;
        }
        Ok::<_, StoreError>(())
    })
    .unwrap();
    let search = |q: &str, f: &MemoryFilter| -> Vec<MemoryId> {
        read(&*store, |tx| tx.search_memories(&words(q), f, 50))
            .unwrap()
            .into_iter()
            .map(|(m, _)| m.id)
            .collect()
    };
    assert_eq!(search("tea", &MemoryFilter::live(a)), [tea.id]);
    assert_eq!(search("tea", &MemoryFilter::live(b)), [foreign.id]);
    assert!(search("nothing", &MemoryFilter::live(a)).is_empty());
    assert!(
        search("* ( )", &MemoryFilter::live(a)).is_empty(),
        "no words left"
    );
    assert_eq!(rd(&*store, |tx| tx.memory(vpn.id)), Some(vpn.clone()));
    let listed: Vec<MemoryId> = rd(&*store, |tx| tx.list_memories(&MemoryFilter::live(a), 10))
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(listed, [vpn.id, tea.id], "newest first");

    wr(&*store, |tx| {
        tx.set_memory_state(tea.id, MemoryState::Forgotten, None, None, Timestamp(40))
    });
    assert!(search("tea", &MemoryFilter::live(a)).is_empty());
    let mut all = MemoryFilter::live(a);
    all.states = vec![MemoryState::Live, MemoryState::Forgotten];
    assert_eq!(search("tea", &all), [tea.id]);
    let counts = rd(&*store, |tx| tx.memory_counts(a));
    assert_eq!((counts.live, counts.forgotten, counts.condensed), (1, 1, 0));
    let changes = rd(&*store, |tx| tx.memory_changes(a, 1));
    assert_eq!(
        (changes[0].memory, changes[0].change.as_str()),
        (tea.id, "forgotten")
    );
}

pub fn issue13_embeddings_condensation_and_compactions_round_trip(new: &New) {
    let (_d, store) = new();
    let (a, b) = (hid(1), hid(2));
    let m1 = mem(a, "one", &[], "note", 1);
    let m2 = mem(a, "two", &[], "note", 2);
    let sum = mem(a, "one and two", &[], "note", 3);
    let mb = mem(b, "other", &[], "note", 4);
    let k = MemoryCompactionRow {
        id: MemoryCompactionId::new_random(),
        handler: a,
        requested_at: Timestamp(3),
        done_at: None,
        undone_at: None,
        status: CompactionStatus::Requested,
        summary: None,
    };
    write(&store, |tx| {
        for m in [&m1, &m2, &sum, &mb] {
            tx.insert_memory(m)?;
        }
        tx.put_memory_vector(m1.id, "e", &[1.0, -0.5, 0.25])?;
        tx.put_memory_vector(mb.id, "e", &[1.0, 1.0, 1.0])?;
        tx.put_memory_compaction(&k)?;
        Ok::<_, StoreError>(())
    })
    .unwrap();
    let v = read(&store, |tx| tx.memory_vectors(&MemoryFilter::live(a), "e")).unwrap();
    assert_eq!(v.len(), 1, "only A's embedded memory");
    assert_eq!(v[0].0.id, m1.id);
    assert_eq!(v[0].1, vec![1.0, -0.5, 0.25]);
    assert!(
        read(&store, |tx| tx
            .memory_vectors(&MemoryFilter::live(a), "other-model"))
        .unwrap()
        .is_empty()
    );
    assert_eq!(
        read(&store, |tx| tx.memory_embedded_count(a, "e")).unwrap(),
        1
    );
    assert_eq!(
        read(&store, |tx| tx.open_memory_compaction(a)).unwrap(),
        Some(k.clone())
    );
    assert_eq!(
        read(&store, |tx| tx.open_memory_compaction(b)).unwrap(),
        None
    );

    let done = MemoryCompactionRow {
        done_at: Some(Timestamp(5)),
        status: CompactionStatus::Done,
        summary: Some(sum.id),
        ..k.clone()
    };
    write(&store, |tx| {
        for m in [m1.id, m2.id] {
            tx.set_memory_state(
                m,
                MemoryState::Condensed,
                Some(sum.id),
                Some(k.id),
                Timestamp(5),
            )?;
        }
        tx.put_memory_compaction(&done)
    })
    .unwrap();
    let under = read(&store, |tx| tx.memories_condensed_into(sum.id)).unwrap();
    assert_eq!(
        under.iter().map(|m| m.id).collect::<Vec<_>>(),
        vec![m1.id, m2.id]
    );
    assert!(under.iter().all(|m| m.state == MemoryState::Condensed
        && m.compaction == Some(k.id)
        && m.changed_at == Some(Timestamp(5))));
    assert_eq!(
        read(&store, |tx| tx.open_memory_compaction(a)).unwrap(),
        None
    );
    assert_eq!(
        read(&store, |tx| tx.memory_compactions(a, 10)).unwrap(),
        vec![done]
    );
    assert_eq!(read(&store, |tx| tx.memory_live_count(a)).unwrap(), 1);
    // A condensed memory's embedding is not searched as live.
    assert!(
        read(&store, |tx| tx.memory_vectors(&MemoryFilter::live(a), "e"))
            .unwrap()
            .is_empty()
    );
}
