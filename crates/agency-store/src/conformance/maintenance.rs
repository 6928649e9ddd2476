//! Queries across every table: ids by prefix, counts, which blobs some
//! row still points at.

use agency_core::Timestamp;
use agency_core::access::FileKind;

use super::New;
use super::fixtures::*;
use crate::{AgentRunRow, BlobId, IdKind, StoreCounts};

pub fn id_prefixes_counts_and_referenced_blobs(new: &New) {
    let (_d, store) = new();
    assert_eq!(rd(&store, |tx| tx.counts()), StoreCounts::default());
    let (h1, _h2) = wr(&store, |tx| {
        let h1 = add_handler(tx, 1, None)?;
        let h2 = add_handler(tx, 2, Some(h1))?;
        add_handler(tx, 0x100, Some(h1))?;
        tx.insert_agent(&agent(100, h2, 1))?;
        tx.set_stalled(h2, Timestamp(2), "stuck")?;
        Ok((h1, h2))
    });
    rd(&store, |tx| {
        // Ids are lowercase hyphenated UUIDs; a prefix selects in order.
        let all = tx.ids_with_prefix(IdKind::Handler, "00000000-", 10)?;
        assert_eq!(all, [hid(1).0, hid(2).0, hid(0x100).0]);
        let two = tx.ids_with_prefix(IdKind::Handler, "00000000-0000-0000-0000-00000000000", 10)?;
        assert_eq!(two, [hid(1).0, hid(2).0]);
        assert_eq!(
            tx.ids_with_prefix(IdKind::Handler, "00000000-", 1)?,
            [hid(1).0]
        );
        assert!(tx.ids_with_prefix(IdKind::Handler, "f", 10)?.is_empty());
        assert_eq!(tx.ids_with_prefix(IdKind::Agent, "0", 10)?, [aid(100).0]);
        let counts = tx.counts()?;
        assert_eq!(counts.handlers_active, 3);
        // Every handler's root outcome is open.
        assert_eq!(counts.outcomes_open, 3);
        assert_eq!(counts.agents_live, 1);
        // State documents, audit logs and outcome files.
        assert_eq!(counts.files, 9);
        assert_eq!(counts.handlers_stalled, 1);
        Ok(())
    });

    let (kept, transcript, log, loose) = (
        BlobId::of(b"version"),
        BlobId::of(b"transcript"),
        BlobId::of(b"log"),
        BlobId::of(b"loose"),
    );
    let (prompt, first) = (BlobId::of(b"prompt"), BlobId::of(b"first"));
    wr(&store, |tx| {
        tx.insert_file(&file(fid(DOC + 1), FileKind::Document, "doc", Some(h1)))?;
        tx.insert_version(&crate::VersionRow {
            hash: kept.clone(),
            ..version(fid(DOC + 1), 1)
        })?;
        tx.put_agent_run(&AgentRunRow {
            transcript: Some(transcript.clone()),
            ..AgentRunRow::spawned(aid(100), "claude", "p")
        })?;
        tx.set_agent_run_log(aid(100), &log)?;
        tx.set_run_prompt(aid(100), &prompt, &first).map(drop)
    });
    let candidates = [
        loose.clone(),
        log.clone(),
        kept.clone(),
        transcript.clone(),
        prompt.clone(),
        first.clone(),
    ];
    assert_eq!(
        rd(&store, |tx| tx.referenced_blobs(&candidates)),
        [log, kept, transcript, prompt, first],
        "in the order given: a run's prompt and first message are kept too"
    );
}
