//! Budgets: limits set, replaced and deleted, the paused ones listed, the
//! running totals added to, reservations of calls in flight, hop counts.

use agency_core::Timestamp;

use super::New;
use super::fixtures::*;
use crate::{
    BudgetLimits, BudgetPause, BudgetReservationRow, BudgetRow, BudgetSpend, ReservedTotals,
};

pub fn budgets_spend_reservations_and_hops(new: &New) {
    let (_d, store) = new();
    let (h1, h2, h3) = wr(&store, |tx| {
        let h1 = add_handler(tx, 1, None)?;
        let h2 = add_handler(tx, 2, Some(h1))?;
        Ok((h1, h2, add_handler(tx, 3, Some(h1))?))
    });
    let budget = |h, tokens, paused_at: Option<i64>| BudgetRow {
        handler: h,
        limits: BudgetLimits {
            tokens: Some(tokens),
            ..BudgetLimits::default()
        },
        set_at: Timestamp(1),
        carved_by: None,
        paused: paused_at.map(|at| BudgetPause {
            at: Timestamp(at),
            reason: "over".into(),
        }),
        warned: 0,
    };
    wr(&store, |tx| {
        tx.set_budget(&budget(h1, 100, None))?;
        tx.set_budget(&budget(h1, 200, None))?;
        tx.set_budget(&budget(h2, 50, Some(7)))?;
        tx.set_budget(&budget(h3, 50, Some(5)))
    });
    rd(&store, |tx| {
        assert_eq!(tx.budget_of(h1)?, Some(budget(h1, 200, None)), "replaced");
        let paused: Vec<_> = tx
            .paused_budgets()?
            .into_iter()
            .map(|b| b.handler)
            .collect();
        assert_eq!(paused, [h3, h2], "oldest pause first");
        let mut holders = vec![h1, h2, h3];
        holders.sort();
        let listed: Vec<_> = tx
            .budgets_after(None, 10)?
            .into_iter()
            .map(|b| b.handler)
            .collect();
        assert_eq!(listed, holders, "every budget, by holder");
        let rest: Vec<_> = tx
            .budgets_after(Some(holders[0]), 1)?
            .into_iter()
            .map(|b| b.handler)
            .collect();
        assert_eq!(rest, [holders[1]], "a page after a holder");
        Ok(())
    });
    wr(&store, |tx| tx.delete_budget(h3));
    assert_eq!(rd(&store, |tx| tx.budget_of(h3)), None);

    // Running totals: added to every handler given, zeros before any.
    assert_eq!(
        rd(&store, |tx| tx.budget_spend_of(h1)),
        BudgetSpend::default()
    );
    let delta = BudgetSpend {
        tokens: 10,
        calls: 1,
        ..BudgetSpend::default()
    };
    wr(&store, |tx| {
        tx.budget_spend_add(&[h1, h2], &delta)?;
        tx.budget_spend_add(&[h1], &delta)
    });
    assert_eq!(rd(&store, |tx| tx.budget_spend_of(h1)).tokens, 20);
    assert_eq!(rd(&store, |tx| tx.budget_spend_of(h2)).calls, 1);
    // A whole chain in one call, negative amounts, a handler given twice
    // (counted twice), and none at all.
    let back = BudgetSpend {
        tokens: -3,
        reserved_calls: 2,
        ..BudgetSpend::default()
    };
    wr(&store, |tx| {
        tx.budget_spend_add(&[h3, h2, h1], &back)?;
        tx.budget_spend_add(&[h1, h3, h1], &back)?;
        tx.budget_spend_add(&[], &back)
    });
    let totals = |h| {
        let s = rd(&store, |tx| tx.budget_spend_of(h));
        (s.tokens, s.reserved_calls)
    };
    assert_eq!(totals(h1), (20 - 9, 6));
    assert_eq!(totals(h2), (10 - 3, 2));
    assert_eq!(totals(h3), (-6, 4));
    wr(&store, |tx| {
        let undo = BudgetSpend {
            tokens: 3,
            reserved_calls: -2,
            ..BudgetSpend::default()
        };
        tx.budget_spend_add(&[h3, h2, h1], &undo)?;
        tx.budget_spend_add(&[h1, h3, h1], &undo)
    });
    assert_eq!(totals(h1), (20, 0));
    assert_eq!(totals(h2), (10, 0));
    assert_eq!(totals(h3), (0, 0));

    // Reservations of calls in flight.
    let reservation = |h, tokens| BudgetReservationRow {
        at: Timestamp(3),
        handler: h,
        agent: aid(100),
        tokens,
        micro_usd: 2 * tokens,
    };
    let (r1, r2, r3) = wr(&store, |tx| {
        tx.insert_agent(&agent(100, h2, 1))?;
        let r1 = tx.insert_budget_reservation(&reservation(h2, 30))?;
        let r2 = tx.insert_budget_reservation(&reservation(h2, 5))?;
        let r3 = tx.insert_budget_reservation(&reservation(h3, 1))?;
        tx.budget_spend_add(
            &[h2],
            &BudgetSpend {
                reserved_calls: 1,
                ..BudgetSpend::default()
            },
        )?;
        Ok((r1, r2, r3))
    });
    assert_ne!(r1, r2);
    rd(&store, |tx| {
        assert_eq!(tx.budget_reservation(r1)?, Some(reservation(h2, 30)));
        assert_eq!(
            tx.budget_reserved_of(&[h2])?,
            ReservedTotals {
                calls: 2,
                tokens: 35,
                micro_usd: 70
            }
        );
        assert_eq!(tx.budget_reserved_of(&[h1])?, ReservedTotals::default());
        Ok(())
    });
    wr(&store, |tx| tx.delete_budget_reservation(r1));
    assert_eq!(rd(&store, |tx| tx.budget_reservation(r1)), None);
    assert_eq!(rd(&store, |tx| tx.budget_reserved_of(&[h2])).tokens, 5);
    assert_eq!(
        rd(&store, |tx| tx
            .budget_reservations_of_agents(&[aid(100), aid(7)])),
        [(r2, reservation(h2, 5)), (r3, reservation(h3, 1))],
        "by agent, in id order"
    );
    assert_eq!(
        rd(&store, |tx| tx.budget_reservations_of_agents(&[aid(7)])),
        []
    );
    assert_eq!(wr(&store, |tx| tx.clear_budget_reservations()), 2);
    rd(&store, |tx| {
        assert_eq!(tx.budget_reserved_of(&[h2, h3])?, ReservedTotals::default());
        assert_eq!(
            tx.budget_spend_of(h2)?.reserved_calls,
            0,
            "the ledger's too"
        );
        assert_eq!(tx.budget_spend_of(h2)?.tokens, 10, "spend stays");
        Ok(())
    });

    // Hop counts.
    assert_eq!(rd(&store, |tx| tx.handler_hops(h2)), 0);
    wr(&store, |tx| {
        tx.set_handler_hops(h2, 3)?;
        tx.set_handler_hops(h2, 4)
    });
    assert_eq!(rd(&store, |tx| tx.handler_hops(h2)), 4);
}

/// The budgets of a chain in one read: each with its running totals (zeros
/// before any), handlers without a budget left out, in any order.
pub fn budgets_of_a_chain_with_their_totals(new: &New) {
    let (_d, store) = new();
    let [h1, h2, h3] = wr(&store, |tx| {
        let h1 = add_handler(tx, 1, None)?;
        let h2 = add_handler(tx, 2, Some(h1))?;
        Ok([h1, h2, add_handler(tx, 3, Some(h2))?])
    });
    let budget = |h, calls| BudgetRow {
        handler: h,
        limits: BudgetLimits {
            calls: Some(calls),
            ..BudgetLimits::default()
        },
        set_at: Timestamp(1),
        carved_by: None,
        paused: None,
        warned: 0,
    };
    assert!(rd(&store, |tx| tx.budgets_with_spend(&[h1, h2, h3])).is_empty());
    let delta = BudgetSpend {
        tokens: 7,
        calls: 1,
        reserved_micro_usd: 3,
        ..BudgetSpend::default()
    };
    wr(&store, |tx| {
        tx.set_budget(&budget(h1, 10))?;
        tx.set_budget(&budget(h3, 5))?;
        // Totals on h1 and on h2 (which holds no budget), none on h3.
        tx.budget_spend_add(&[h1, h2], &delta)
    });
    let mut got = rd(&store, |tx| tx.budgets_with_spend(&[h3, h2, h1, hid(99)]));
    got.sort_by_key(|(b, _)| b.handler);
    let mut want = vec![
        (budget(h1, 10), delta),
        (budget(h3, 5), BudgetSpend::default()),
    ];
    want.sort_by_key(|(b, _)| b.handler);
    assert_eq!(got, want);
    assert_eq!(
        rd(&store, |tx| tx.budgets_with_spend(&[h2])),
        [],
        "totals without a budget are not a budget"
    );
    assert_eq!(rd(&store, |tx| tx.budgets_with_spend(&[])), []);
}
