//! Handlers' audit logs: entries read back whole, in pages, the newest
//! few, and those of one agent.

use agency_core::Timestamp;

use super::New;
use super::fixtures::*;
use crate::LogEntryRow;

pub fn audit_log_whole_and_in_pages(new: &New) {
    let (_d, store) = new();
    let (h1, h2) = wr(&store, |tx| {
        let h1 = add_handler(tx, 1, None)?;
        Ok((h1, add_handler(tx, 2, Some(h1))?))
    });
    let entry = |n: i64, agent_n: Option<u128>, summary: &str| LogEntryRow {
        handler: h1,
        // Two entries share a time: the order falls back on insertion.
        at: Timestamp(n.min(3)),
        agent: agent_n.map(aid),
        summary: summary.to_owned(),
    };
    wr(&store, |tx| {
        tx.insert_agent(&agent(100, h1, 1))?;
        tx.insert_log_entry(&entry(1, None, "born"))?;
        tx.insert_log_entry(&entry(2, Some(100), "done: a"))?;
        tx.insert_log_entry(&entry(3, Some(100), "note"))?;
        tx.insert_log_entry(&entry(4, Some(100), "done: b"))
    });
    let summaries = |rows: &[(i64, LogEntryRow)]| -> Vec<String> {
        rows.iter().map(|(_, e)| e.summary.clone()).collect()
    };
    rd(&store, |tx| {
        let all: Vec<String> = tx.log_entries(h1)?.into_iter().map(|e| e.summary).collect();
        assert_eq!(all, ["born", "done: a", "note", "done: b"]);
        assert!(tx.log_entries(h2)?.is_empty());
        assert_eq!(tx.log_entry_count(h1)?, 4);
        assert_eq!(tx.log_entry_count(h2)?, 0);
        let first = tx.log_entries_after(h1, None, 3)?;
        assert_eq!(summaries(&first), ["born", "done: a", "note"]);
        let rest = tx.log_entries_after(h1, Some(first[2].0), 3)?;
        assert_eq!(summaries(&rest), ["done: b"]);
        assert_eq!(
            summaries(&tx.log_entries_latest(h1, 2)?),
            ["note", "done: b"]
        );
        let mine: Vec<String> = tx
            .log_entries_of_agent(h1, aid(100), "done:", 10)?
            .into_iter()
            .map(|e| e.summary)
            .collect();
        assert_eq!(mine, ["done: a", "done: b"]);
        assert!(tx.log_entries_of_agent(h1, aid(101), "", 10)?.is_empty());
        Ok(())
    });
}
