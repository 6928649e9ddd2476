//! Outcomes: DAG walks, reassignment, listings, history pages.

use agency_core::{HandlerId, OutcomeId, OutcomeStatus, Timestamp};

use super::New;
use super::fixtures::*;
use crate::*;

/// The diamond 1 -> {2, 3} -> 4 -> 5, plus an unconnected outcome 6.
fn diamond(store: &dyn Store) -> HandlerId {
    wr(store, |tx| {
        let h = add_handler(tx, 1, None)?;
        for n in 2..=6 {
            add_outcome(tx, outcome(oid(n), h))?;
        }
        for (p, c) in [(1, 3), (1, 2), (2, 4), (3, 4), (4, 5), (1, 2)] {
            tx.insert_edge(oid(p), oid(c))?; // (1, 2) twice: idempotent
        }
        Ok(h)
    })
}

fn edge(p: u128, c: u128) -> (OutcomeId, OutcomeId) {
    (oid(p), oid(c))
}

fn ids(rows: &[OutcomeRow]) -> Vec<OutcomeId> {
    rows.iter().map(|o| o.id).collect()
}

pub fn dag_walks_on_a_diamond(new: &New) {
    let (_d, store) = new();
    diamond(&store);
    rd(&store, |tx| {
        assert_eq!(tx.parents(oid(4))?, [oid(2), oid(3)]);
        assert_eq!(tx.children(oid(1))?, [oid(2), oid(3)]);
        let all = [edge(1, 2), edge(1, 3), edge(2, 4), edge(3, 4), edge(4, 5)];
        assert_eq!(
            tx.ancestor_edges(oid(5))?,
            all,
            "ordered by (child, parent)"
        );
        assert_eq!(tx.ancestor_edges(oid(2))?, [edge(1, 2)]);
        assert_eq!(tx.ancestor_edges(oid(1))?, []);
        for (node, ancestor, want) in [
            (5, 1, true),
            (4, 3, true),
            (3, 3, true),
            (1, 5, false),
            (3, 2, false),
            (6, 1, false),
        ] {
            assert_eq!(
                tx.is_descendant_or_self(oid(node), oid(ancestor))?,
                want,
                "{node} under {ancestor}"
            );
        }
        let (rows, edges) = tx.subtree(oid(1), 100)?;
        assert_eq!(
            ids(&rows),
            [1, 2, 3, 4, 5].map(oid),
            "breadth-first, each once"
        );
        assert_eq!(edges, all);
        let (rows, edges) = tx.subtree(oid(1), 3)?;
        assert_eq!(ids(&rows), [1, 2, 3].map(oid));
        assert_eq!(
            edges,
            [edge(1, 2), edge(1, 3)],
            "only edges among the returned rows"
        );
        let (rows, edges) = tx.subtree(oid(3), 10)?;
        assert_eq!(ids(&rows), [3, 4, 5].map(oid));
        assert_eq!(edges, [edge(3, 4), edge(4, 5)]);
        Ok(())
    });
    wr(&store, |tx| tx.delete_edge(oid(3), oid(4)));
    assert_eq!(rd(&store, |tx| tx.parents(oid(4))), [oid(2)]);
}

pub fn reassignment_and_outcome_listings(new: &New) {
    let (_d, store) = new();
    let h1 = diamond(&store);
    let (h7, h8) = wr(&store, |tx| {
        let h7 = add_handler(tx, 7, Some(h1))?;
        let h8 = add_handler(tx, 8, Some(h1))?;
        // Outcome 5 belongs to h7 already: reassigning h1's work below 3
        // must not take it along.
        tx.update_outcome(&OutcomeRow {
            priority: 3,
            ..outcome(oid(5), h7)
        })?;
        Ok((h7, h8))
    });
    assert_eq!(
        wr(&store, |tx| tx.reassign_subtree(
            oid(3),
            h1,
            h8,
            Timestamp(77)
        )),
        2
    );
    rd(&store, |tx| {
        for (o, who) in [(1, h1), (2, h1), (3, h8), (4, h8), (5, h7), (6, h1)] {
            assert_eq!(tx.outcome(oid(o))?.unwrap().responsible, who, "outcome {o}");
        }
        assert_eq!(tx.outcome(oid(3))?.unwrap().updated_at, Timestamp(77));
        assert_eq!(tx.outcome(oid(2))?.unwrap().updated_at, Timestamp(10));
        Ok(())
    });
    // 3, 4, 5 and the roots of 7 and 8.
    assert_eq!(
        wr(&store, |tx| tx.reassign_all(&[h8, h7], h1, Timestamp(78))),
        5
    );
    let mine = rd(&store, |tx| tx.outcomes_of(h1, 100));
    assert_eq!(mine.len(), 8);
    assert_eq!(mine[0].id, oid(5), "highest priority first");
    assert_eq!(
        ids(&mine[1..4]),
        [1, 2, 3].map(oid),
        "then oldest, then by id"
    );
    assert_eq!(rd(&store, |tx| tx.outcomes_of(h1, 2)).len(), 2);

    wr(&store, |tx| {
        let done = OutcomeRow {
            process_inbox: true,
            status: OutcomeStatus::Completed,
            ..outcome(oid(20), h1)
        };
        add_outcome(tx, done)?;
        add_outcome(
            tx,
            OutcomeRow {
                process_inbox: true,
                ..outcome(oid(21), h1)
            },
        )?;
        for (at, action) in [(3, "b"), (1, "a"), (3, "c")] {
            let (handler, action, detail) = (Some(h1), action.to_owned(), String::new());
            let at = Timestamp(at);
            tx.insert_outcome_event(&OutcomeEventRow {
                outcome: oid(21),
                at,
                handler,
                agent: None,
                action,
                detail,
            })?;
        }
        Ok(())
    });
    rd(&store, |tx| {
        assert_eq!(tx.open_process_inbox(h1)?, Some(oid(21)));
        assert_eq!(tx.open_process_inbox(h7)?, None);
        let actions: Vec<_> = tx
            .outcome_events(oid(21))?
            .into_iter()
            .map(|e| e.action)
            .collect();
        assert_eq!(
            actions,
            ["a", "b", "c"],
            "oldest first, then in insertion order"
        );
        Ok(())
    });
}

pub fn history_pages_and_child_counts(new: &New) {
    let (_d, store) = new();
    let h = wr(&store, |tx| add_handler(tx, 1, None));
    let root = h.root();
    // Five events; two share a time, so the order falls back on insertion.
    let times = [1, 2, 2, 3, 4];
    wr(&store, |tx| {
        for (i, at) in times.iter().enumerate() {
            tx.insert_outcome_event(&OutcomeEventRow {
                outcome: root,
                at: Timestamp(*at),
                handler: Some(h),
                agent: None,
                action: if i == 0 { "created" } else { "note" }.to_owned(),
                detail: format!("event {i}"),
            })?;
        }
        Ok(())
    });
    let details = |rows: &[(i64, OutcomeEventRow)]| -> Vec<String> {
        rows.iter().map(|(_, e)| e.detail.clone()).collect()
    };
    rd(&store, |tx| {
        assert_eq!(tx.outcome_event_count(root)?, 5);
        assert_eq!(tx.outcome_event_count(oid(99))?, 0);
        // Paging with each page's last sequence number walks the whole
        // history once, in order.
        let mut seen = Vec::new();
        let mut after = None;
        loop {
            let page = tx.outcome_events_after(root, after, 2)?;
            if page.is_empty() {
                break;
            }
            assert!(page.len() <= 2);
            after = Some(page[page.len() - 1].0);
            seen.extend(details(&page));
        }
        let all: Vec<String> = (0..5).map(|i| format!("event {i}")).collect();
        assert_eq!(seen, all);
        assert_eq!(
            details(
                &tx.outcome_events(root)?
                    .into_iter()
                    .map(|e| (0, e))
                    .collect::<Vec<_>>()
            ),
            all
        );
        // The newest three, oldest first.
        assert_eq!(
            details(&tx.outcome_events_latest(root, 3)?),
            ["event 2", "event 3", "event 4"]
        );
        assert_eq!(tx.outcomes_created_by(h, 10)?, 1);
        assert_eq!(tx.outcomes_created_by(hid(9), 10)?, 0);
        Ok(())
    });

    // Children: open ones oldest first, finished ones most recently
    // changed first.
    wr(&store, |tx| {
        let kids = [
            (10, OutcomeStatus::Open, 30, 30),
            (11, OutcomeStatus::Completed, 20, 50),
            (12, OutcomeStatus::Blocked, 10, 10),
            (13, OutcomeStatus::Closed, 25, 60),
        ];
        for (n, status, created, updated) in kids {
            add_outcome(
                tx,
                OutcomeRow {
                    status,
                    created_at: Timestamp(created),
                    updated_at: Timestamp(updated),
                    ..outcome(oid(n), h)
                },
            )?;
            tx.insert_edge(root, oid(n))?;
        }
        Ok(())
    });
    rd(&store, |tx| {
        assert_eq!(tx.child_counts(root)?, (2, 2));
        assert_eq!(tx.child_counts(oid(10))?, (0, 0));
        assert_eq!(tx.children_by_state(root, false, 10)?, [oid(12), oid(10)]);
        assert_eq!(tx.children_by_state(root, true, 10)?, [oid(13), oid(11)]);
        assert_eq!(tx.children_by_state(root, true, 1)?, [oid(13)]);
        Ok(())
    });
}
