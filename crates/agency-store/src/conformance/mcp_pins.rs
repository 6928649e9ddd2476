//! Pinned MCP tool definitions: sealing a server's first listing, pins
//! replaced and listed, changes recorded, found, listed and decided.

use agency_core::Timestamp;

use super::New;
use super::fixtures::*;
use crate::{McpPinChangeRow, McpPinRow, PinChangeStatus};

pub fn pins_seal_and_changes(new: &New) {
    let (_d, store) = new();
    wr(&store, |tx| {
        tx.mcp_pin_seal("git", Timestamp(1))?;
        // Kept if already set.
        tx.mcp_pin_seal("git", Timestamp(2))
    });
    assert!(rd(&store, |tx| tx.mcp_pin_sealed("git")));
    assert!(!rd(&store, |tx| tx.mcp_pin_sealed("web")));

    let pin = |server: &str, tool: &str, hash: &str| McpPinRow {
        server: server.to_owned(),
        tool: tool.to_owned(),
        approved_hash: Some(hash.to_owned()),
        approved_def: Some(format!("def {hash}")),
        approved_at: Some(Timestamp(1)),
        seen_hash: hash.to_owned(),
        seen_at: Timestamp(1),
    };
    wr(&store, |tx| {
        tx.put_mcp_pin(&pin("web", "fetch", "h1"))?;
        tx.put_mcp_pin(&pin("git", "push", "h1"))?;
        tx.put_mcp_pin(&pin("git", "log", "h1"))?;
        tx.put_mcp_pin(&McpPinRow {
            seen_hash: "h2".into(),
            ..pin("git", "push", "h1")
        })
    });
    rd(&store, |tx| {
        assert_eq!(
            tx.mcp_pin("git", "push")?.unwrap().seen_hash,
            "h2",
            "replaced"
        );
        assert_eq!(tx.mcp_pin("git", "pull")?, None);
        let names = |pins: Vec<McpPinRow>| {
            pins.into_iter()
                .map(|p| format!("{}/{}", p.server, p.tool))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(tx.mcp_pins(None)?),
            ["git/log", "git/push", "web/fetch"]
        );
        assert_eq!(names(tx.mcp_pins(Some("web"))?), ["web/fetch"]);
        Ok(())
    });

    let change = |id: &str, tool: &str, new_hash: &str, at| McpPinChangeRow {
        id: id.to_owned(),
        server: "git".into(),
        tool: tool.to_owned(),
        old_hash: Some("h1".into()),
        old_def: Some("def h1".into()),
        new_hash: new_hash.to_owned(),
        new_def: format!("def {new_hash}"),
        seen_at: Timestamp(at),
        seen_by: None,
        status: PinChangeStatus::Pending,
        decided_at: None,
    };
    wr(&store, |tx| {
        tx.insert_mcp_pin_change(&change("c1", "push", "h2", 2))?;
        tx.insert_mcp_pin_change(&change("c2", "log", "h3", 3))?;
        tx.insert_mcp_pin_change(&change("c3", "push", "h2", 4))
    });
    let err = wr_err(&store, |tx| {
        tx.insert_mcp_pin_change(&change("c1", "push", "h2", 5))
    });
    assert!(matches!(err, crate::StoreError::Unique { .. }), "{err:?}");
    rd(&store, |tx| {
        assert_eq!(tx.mcp_pin_change("c2")?, Some(change("c2", "log", "h3", 3)));
        assert_eq!(tx.mcp_pin_change("c9")?, None);
        let open = tx.mcp_pin_open_change("git", "push", "h2", Some("h1"))?;
        assert_eq!(open.unwrap().id, "c3", "the latest");
        assert_eq!(tx.mcp_pin_open_change("git", "push", "h2", None)?, None);
        Ok(())
    });
    wr(&store, |tx| {
        tx.set_mcp_pin_change_status("c3", PinChangeStatus::Approved, Timestamp(6))?;
        tx.set_mcp_pin_change_status("c2", PinChangeStatus::Rejected, Timestamp(7))
    });
    rd(&store, |tx| {
        let c3 = tx.mcp_pin_change("c3")?.unwrap();
        assert_eq!(
            (c3.status, c3.decided_at),
            (PinChangeStatus::Approved, Some(Timestamp(6)))
        );
        // An approved change is no longer open; a rejected one still is.
        assert_eq!(
            tx.mcp_pin_open_change("git", "push", "h2", Some("h1"))?
                .unwrap()
                .id,
            "c1"
        );
        assert!(
            tx.mcp_pin_open_change("git", "log", "h3", Some("h1"))?
                .is_some()
        );
        let ids = |rows: Vec<McpPinChangeRow>| rows.into_iter().map(|c| c.id).collect::<Vec<_>>();
        assert_eq!(
            ids(tx.mcp_pin_changes(None, None, 10)?),
            ["c1", "c2", "c3"],
            "oldest first"
        );
        assert_eq!(
            ids(tx.mcp_pin_changes(Some(PinChangeStatus::Pending), None, 10)?),
            ["c1"]
        );
        assert_eq!(
            ids(tx.mcp_pin_changes(None, Some(("git", "push")), 1)?),
            ["c1"]
        );
        Ok(())
    });
}
