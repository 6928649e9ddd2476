//! Problems: one open episode per key, seen again without a second row,
//! closed once, then a new episode may open.

use agency_core::Timestamp;

use super::New;
use super::fixtures::*;
use crate::ProblemRow;

fn problem(key: &str, at: i64) -> ProblemRow {
    ProblemRow {
        id: 0,
        kind: "stuck".into(),
        key: key.into(),
        handler: Some(hid(1)),
        agent: None,
        summary: format!("{key} at {at}"),
        detail: "{}".into(),
        opened_at: Timestamp(at),
        seen_at: Timestamp(at),
        closed_at: None,
    }
}

pub fn problems_open_once_per_key_and_close(new: &New) {
    let (_d, store) = new();
    let a = wr(&store, |tx| tx.open_problem(&problem("a", 10))).expect("a new episode");
    assert_eq!(
        wr(&store, |tx| tx.open_problem(&problem("a", 20))),
        None,
        "the same episode"
    );
    let b = wr(&store, |tx| tx.open_problem(&problem("b", 30))).expect("another key");
    rd(&store, |tx| {
        let open = tx.open_problems(10)?;
        assert_eq!(open.iter().map(|p| p.id).collect::<Vec<_>>(), [a, b]);
        assert_eq!(open[0].opened_at, Timestamp(10));
        assert_eq!(open[0].seen_at, Timestamp(20), "seen again");
        assert_eq!(
            open[0].summary, "a at 10",
            "the first detection's words stay"
        );
        assert_eq!(tx.open_problems(1)?.len(), 1, "bounded");
        Ok(())
    });
    assert!(wr(&store, |tx| tx.close_problem(a, Timestamp(40))));
    assert!(
        !wr(&store, |tx| tx.close_problem(a, Timestamp(41))),
        "closed once"
    );
    let again = wr(&store, |tx| tx.open_problem(&problem("a", 50))).expect("a new episode");
    assert!(again > b);
    rd(&store, |tx| {
        let recent = tx.recent_problems(10)?;
        assert_eq!(
            recent.iter().map(|p| p.id).collect::<Vec<_>>(),
            [again, b, a]
        );
        assert_eq!(recent[2].closed_at, Some(Timestamp(40)));
        assert_eq!(tx.open_problems(10)?.len(), 2);
        Ok(())
    });
}
