//! The event log: numbers only grow (also past removals), pages follow the
//! cursor, scopes follow the handler tree, kind families match by prefix,
//! titles come with each row.

use agency_core::Timestamp;

use super::New;
use super::fixtures::*;
use crate::{EventFilter, EventRow, EventScope, NewEventRow};

fn ev(at: i64, kind: &str, handler: Option<agency_core::HandlerId>) -> NewEventRow {
    NewEventRow {
        at: Timestamp(at),
        kind: kind.to_owned(),
        handler,
        agent: None,
        outcome: handler.map(|h| h.root()),
        summary: format!("{kind} at {at}"),
        data: format!("{{\"at\":{at}}}"),
    }
}

fn all(after: i64) -> EventFilter {
    EventFilter {
        after,
        scope: EventScope::All,
        kinds: Vec::new(),
        since: None,
        limit: 100,
    }
}

fn kinds(rows: &[EventRow]) -> Vec<String> {
    rows.iter().map(|r| r.event.summary.clone()).collect()
}

pub fn event_log_cursor_scopes_kinds_and_retention(new: &New) {
    let (_d, store) = new();
    // h1 ─ h2 ─ h3, and h4 beside h2 under h1; h5 a second root.
    let (h1, h2, h3, h4, h5) = wr(&store, |tx| {
        let h1 = add_handler(tx, 1, None)?;
        let h2 = add_handler(tx, 2, Some(h1))?;
        let h3 = add_handler(tx, 3, Some(h2))?;
        let h4 = add_handler(tx, 4, Some(h1))?;
        let h5 = add_handler(tx, 5, None)?;
        Ok((h1, h2, h3, h4, h5))
    });
    assert_eq!(rd(&store, |tx| tx.last_event_seq()), 0, "an empty log");
    let seqs = wr(&store, |tx| {
        Ok(vec![
            tx.append_event(&ev(10, "mail.sent", Some(h1)))?,
            tx.append_event(&ev(20, "mail.delivered", Some(h2)))?,
            tx.append_event(&ev(30, "mailbox.odd", Some(h3)))?,
            tx.append_event(&ev(40, "model_call.ended", Some(h4)))?,
            tx.append_event(&ev(50, "agent.started", Some(h5)))?,
            tx.append_event(&ev(60, "config.reloaded", None))?,
        ])
    });
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    assert_eq!(rd(&store, |tx| tx.last_event_seq()), seqs[5]);

    rd(&store, |tx| {
        let every = tx.events_after(&all(0))?;
        assert_eq!(every.iter().map(|r| r.seq).collect::<Vec<_>>(), seqs);
        assert_eq!(
            every[0].event,
            ev(10, "mail.sent", Some(h1)),
            "read back whole"
        );
        assert_eq!(
            every[1].handler_title.as_deref(),
            Some(format!("outcome {}", h2.root()).as_str()),
            "the handler's title comes with the row"
        );
        assert_eq!(every[5].handler_title, None, "organisation-wide");

        // A page ends at its limit; the next starts after its last number.
        let first = tx.events_after(&EventFilter { limit: 2, ..all(0) })?;
        assert_eq!(kinds(&first), ["mail.sent at 10", "mail.delivered at 20"]);
        let next = tx.events_after(&EventFilter {
            limit: 2,
            ..all(first[1].seq)
        })?;
        assert_eq!(
            kinds(&next),
            ["mailbox.odd at 30", "model_call.ended at 40"]
        );
        assert!(
            tx.events_after(&all(seqs[5]))?.is_empty(),
            "nothing after the last"
        );

        let scoped = |scope| EventFilter { scope, ..all(0) };
        assert_eq!(
            kinds(&tx.events_after(&scoped(EventScope::Handler(h2)))?),
            ["mail.delivered at 20"]
        );
        assert_eq!(
            kinds(&tx.events_after(&scoped(EventScope::Subtree(h2)))?),
            ["mail.delivered at 20", "mailbox.odd at 30"],
            "h2 and h3 below it; not h1 above, not h4 beside"
        );
        assert_eq!(
            kinds(&tx.events_after(&scoped(EventScope::Subtree(h1)))?).len(),
            4,
            "h1's whole tree, not the other root nor the organisation's events"
        );

        let of_kinds = |k: &[&str]| EventFilter {
            kinds: k.iter().map(|s| (*s).to_owned()).collect(),
            ..all(0)
        };
        assert_eq!(
            kinds(&tx.events_after(&of_kinds(&["mail"]))?),
            ["mail.sent at 10", "mail.delivered at 20"],
            "a family is a prefix up to a dot: `mailbox.odd` is not mail"
        );
        assert_eq!(
            kinds(&tx.events_after(&of_kinds(&["mail.sent", "agent"]))?),
            ["mail.sent at 10", "agent.started at 50"]
        );
        assert_eq!(
            kinds(&tx.events_after(&of_kinds(&["model.call"]))?),
            Vec::<String>::new(),
            "`_` is a character, not a wildcard"
        );
        assert_eq!(
            kinds(&tx.events_after(&EventFilter {
                since: Some(Timestamp(40)),
                ..all(0)
            })?),
            [
                "model_call.ended at 40",
                "agent.started at 50",
                "config.reloaded at 60"
            ]
        );
        Ok(())
    });

    rd(&store, |tx| {
        assert_eq!(tx.last_event_at(h2, &[])?, Some(Timestamp(20)));
        assert_eq!(
            tx.last_event_at(h1, &["mail".to_owned()])?,
            Some(Timestamp(10))
        );
        assert_eq!(tx.last_event_at(h1, &["agent".to_owned()])?, None);
        assert_eq!(
            tx.last_event_at(hid(99), &[])?,
            None,
            "a handler without events"
        );
        Ok(())
    });

    // Retention removes the oldest first, a bounded number at a time.
    assert_eq!(
        rd(&store, |tx| tx.count_events_before(Timestamp(45), 100)),
        4
    );
    assert_eq!(rd(&store, |tx| tx.count_events_before(Timestamp(45), 2)), 2);
    assert_eq!(
        wr(&store, |tx| tx.delete_events_before(Timestamp(45), 3)),
        3
    );
    assert_eq!(
        kinds(&rd(&store, |tx| tx.events_after(&all(0)))),
        [
            "model_call.ended at 40",
            "agent.started at 50",
            "config.reloaded at 60"
        ]
    );
    // Removing every row keeps the numbers growing.
    assert_eq!(
        wr(&store, |tx| tx.delete_events_before(Timestamp(1000), 100)),
        3
    );
    assert_eq!(rd(&store, |tx| tx.last_event_seq()), seqs[5]);
    let again = wr(&store, |tx| {
        tx.append_event(&ev(70, "agent.ended", Some(h5)))
    });
    assert!(again > seqs[5], "{again} must follow {}", seqs[5]);
}
