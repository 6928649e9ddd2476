//! Handlers: the boss tree and who has work.

use agency_core::OutcomeStatus;

use super::New;
use super::fixtures::*;
use crate::tx::R;
use crate::*;

pub fn handler_tree_and_work(new: &New) {
    let (_d, store) = new();
    wr(&store, |tx| {
        let root = add_handler(tx, 1, None)?; // only its perpetual root: no work
        let h2 = add_handler(tx, 2, Some(root))?; // its root is open: work
        let h3 = add_handler(tx, 3, Some(root))?; // blocked root, finished/perpetual rest
        let h4 = add_handler(tx, 4, Some(h2))?; // deactivated, with open work
        add_handler(tx, 5, Some(h4))?; // open root: work
        tx.update_outcome(&OutcomeRow {
            status: OutcomeStatus::Blocked,
            ..outcome(h3.root(), h3)
        })?;
        add_outcome(
            tx,
            OutcomeRow {
                status: OutcomeStatus::Completed,
                ..outcome(oid(30), h3)
            },
        )?;
        add_outcome(
            tx,
            OutcomeRow {
                perpetual: true,
                ..outcome(oid(31), h3)
            },
        )?;
        let h4row = tx.handler(h4)?.unwrap();
        tx.update_handler(&HandlerRow {
            status: HandlerStatus::Deactivated,
            ..h4row
        })
    });
    rd(&store, |tx| {
        assert_eq!(tx.handlers_with_work(None, 10)?, [hid(2), hid(5)]);
        assert_eq!(tx.handlers_with_work(Some(hid(2)), 10)?, [hid(5)]);
        assert_eq!(tx.handlers_with_work(None, 1)?, [hid(2)]);
        let work = (1..=6)
            .map(|n| tx.has_work(hid(n)))
            .collect::<R<Vec<_>>>()?;
        assert_eq!(work, [false, true, false, false, true, false]);

        assert_eq!(tx.root_handler()?.unwrap().id, hid(1));
        let hids = |rows: Vec<HandlerRow>| rows.into_iter().map(|h| h.id).collect::<Vec<_>>();
        assert_eq!(hids(tx.handler_subtree(hid(2))?), [2, 4, 5].map(hid));
        assert_eq!(hids(tx.handler_subtree(hid(1))?), [1, 2, 3, 4, 5].map(hid));
        assert_eq!(hids(tx.underlings(hid(1))?), [2, 3].map(hid));
        assert_eq!(hids(tx.handlers(Some(hid(2)), 2)?), [3, 4].map(hid));
        assert_eq!(hids(tx.handlers(None, 100)?), [1, 2, 3, 4, 5].map(hid));
        let counts = tx.counts()?;
        assert_eq!(
            (
                counts.handlers_active,
                counts.outcomes_open,
                counts.agents_live
            ),
            (4, 5, 0)
        );
        assert_eq!(
            counts.files,
            5 * 3 + 2,
            "root outcome, state and audit log each, plus 30, 31"
        );
        Ok(())
    });
}

pub fn active_subtree_counts_stop_at_the_limit(new: &New) {
    let (_d, store) = new();
    let (h1, h2) = wr(&store, |tx| {
        let h1 = add_handler(tx, 1, None)?;
        let h2 = add_handler(tx, 2, Some(h1))?;
        add_handler(tx, 3, Some(h2))?;
        add_handler(tx, 4, Some(h1))?;
        Ok((h1, h2))
    });
    rd(&store, |tx| {
        assert_eq!(tx.active_subtree_size(h1, 10)?, 4);
        assert_eq!(tx.active_subtree_size(h1, 2)?, 2);
        assert_eq!(tx.active_subtree_size(h2, 10)?, 2);
        assert_eq!(tx.active_subtree_size(hid(9), 10)?, 0);
        Ok(())
    });
    // A deactivated handler is not counted, nor is anything below it.
    wr(&store, |tx| {
        for n in [2, 3] {
            let mut h = tx.handler(hid(n))?.unwrap();
            h.status = HandlerStatus::Deactivated;
            tx.update_handler(&h)?;
        }
        Ok(())
    });
    assert_eq!(rd(&store, |tx| tx.active_subtree_size(h1, 10)), 2);
}

/// A handler's chain of bosses in one read: nearest first, to the root;
/// a cycle (corrupt data) ends it; an unknown handler has none.
pub fn the_chain_of_bosses_in_one_read(new: &New) {
    let (_d, store) = new();
    // h1 (root) ← h2 ← h3, and h4 beside h3.
    let [h1, h2, h3, h4] = wr(&store, |tx| {
        let h1 = add_handler(tx, 1, None)?;
        let h2 = add_handler(tx, 2, Some(h1))?;
        let h3 = add_handler(tx, 3, Some(h2))?;
        Ok([h1, h2, h3, add_handler(tx, 4, Some(h2))?])
    });
    let ids = |rows: Vec<HandlerRow>| rows.into_iter().map(|r| r.id).collect::<Vec<_>>();
    rd(&store, |tx| {
        assert_eq!(ids(tx.handler_chain(h3)?), [h3, h2, h1]);
        assert_eq!(ids(tx.handler_chain(h4)?), [h4, h2, h1]);
        assert_eq!(ids(tx.handler_chain(h1)?), [h1]);
        assert_eq!(tx.handler_chain(hid(99))?, []);
        let whole = tx.handler_chain(h3)?;
        assert_eq!(whole[1], tx.handler(h2)?.expect("h2"), "whole rows");
        Ok(())
    });
    // Corrupt data: the root's boss is h3, a cycle.
    wr(&store, |tx| {
        let mut root = tx.handler(h1)?.expect("h1");
        root.boss = Some(h3);
        tx.update_handler(&root)
    });
    rd(&store, |tx| {
        assert_eq!(
            ids(tx.handler_chain(h2)?),
            [h2, h1, h3],
            "the cycle ends it"
        );
        assert_eq!(ids(tx.handler_chain(h4)?), [h4, h2, h1, h3]);
        Ok(())
    });
}
