//! Approvals: requests bound to (handler, tool, arguments), decided once
//! (a decision races no other), listed newest first; capabilities that
//! need an approval for each use.

use agency_core::policy::ApprovalId;
use agency_core::{Level, Resource, Timestamp};

use super::New;
use super::fixtures::*;
use crate::{ApprovalRow, ApprovalStatus, StoreError};

pub fn approvals_are_bound_and_decided_once(new: &New) {
    let (_d, store) = new();
    let (h1, h2) = wr(&store, |tx| {
        let h1 = add_handler(tx, 1, None)?;
        let h2 = add_handler(tx, 2, Some(h1))?;
        tx.insert_agent(&agent(100, h2, 1))?;
        Ok((h1, h2))
    });
    let request = |h, tool: &str, hash: &str, at| ApprovalRow {
        id: ApprovalId(0),
        handler: h,
        agent: aid(100),
        tool: tool.to_owned(),
        args_hash: hash.to_owned(),
        args: "{}".into(),
        reason: "risky".into(),
        status: ApprovalStatus::Pending,
        always: false,
        created_at: Timestamp(at),
        decided_at: None,
        decided_by: None,
        deny_reason: None,
        consumed_at: None,
    };
    let (a, c) = wr(&store, |tx| {
        let a = tx.insert_approval(&request(h2, "deploy", "x", 1))?;
        let c = tx.insert_approval(&request(h1, "deploy", "x", 3))?;
        Ok((a, c))
    });
    assert_ne!(a, c, "fresh ids");
    // One pending request per binding.
    let err = wr_err(&store, |tx| {
        tx.insert_approval(&request(h2, "deploy", "x", 2))
    });
    assert!(matches!(err, StoreError::Unique { .. }), "{err:?}");
    let stored = rd(&store, |tx| tx.approval(a)).unwrap();
    assert_eq!(
        stored,
        ApprovalRow {
            id: a,
            ..request(h2, "deploy", "x", 1)
        }
    );
    assert_eq!(rd(&store, |tx| tx.approval(ApprovalId(-1))), None);

    // Decided once: the second decision finds it no longer pending.
    let approved = ApprovalRow {
        status: ApprovalStatus::Approved,
        decided_at: Some(Timestamp(5)),
        decided_by: Some("user".into()),
        ..stored.clone()
    };
    assert!(wr(&store, |tx| tx
        .update_approval(&approved, ApprovalStatus::Pending)));
    let denied = ApprovalRow {
        status: ApprovalStatus::Denied,
        ..approved.clone()
    };
    assert!(!wr(&store, |tx| tx
        .update_approval(&denied, ApprovalStatus::Pending)));
    assert_eq!(rd(&store, |tx| tx.approval(a)), Some(approved.clone()));
    // Decided, it no longer blocks a new pending request.
    let b = wr(&store, |tx| {
        tx.insert_approval(&request(h2, "deploy", "x", 4))
    });
    // Consumed requests are no longer bound.
    let consumed = ApprovalRow {
        status: ApprovalStatus::Consumed,
        consumed_at: Some(Timestamp(6)),
        ..approved
    };
    wr(&store, |tx| {
        tx.update_approval(&consumed, ApprovalStatus::Approved)
    });
    rd(&store, |tx| {
        let bound: Vec<ApprovalId> = tx
            .approvals_bound(h2, "deploy", "x")?
            .into_iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(bound, [b]);
        assert!(tx.approvals_bound(h2, "deploy", "y")?.is_empty());
        let ids = |rows: Vec<ApprovalRow>| rows.into_iter().map(|r| r.id).collect::<Vec<_>>();
        assert_eq!(
            ids(tx.approvals_list(false, None, 10)?),
            [b, c],
            "pending, newest first"
        );
        assert_eq!(ids(tx.approvals_list(true, Some(h2), 10)?), [b, a]);
        assert_eq!(ids(tx.approvals_list(true, None, 1)?), [b]);
        Ok(())
    });

    // A capability that needs approval for each use.
    let cap_id = wr(&store, |tx| {
        tx.insert_capability(&cap(
            h2,
            Resource::Repo("agency".into()),
            Level::Write,
            None,
        ))
    });
    assert_eq!(rd(&store, |tx| tx.capability_approval(cap_id)), None);
    wr(&store, |tx| tx.set_capability_approval(cap_id, "each_use"));
    assert_eq!(
        rd(&store, |tx| tx.capability_approval(cap_id)).as_deref(),
        Some("each_use")
    );
}
