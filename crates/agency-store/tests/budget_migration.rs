//! Migration 14 (issue 11 item 3): a store that metered model calls and
//! ran agents before the budget ledger existed gets running totals that
//! equal a re-sum of what it recorded, for every handler's subtree.

use agency_core::HandlerId;
use agency_store::{SqliteStore, Tx, read};
use uuid::Uuid;

const BEFORE_14: &[&str] = &[
    include_str!("../src/sqlite/schema_v1.sql"),
    include_str!("../src/sqlite/schema_v2.sql"),
    include_str!("../src/sqlite/schema_v3.sql"),
    include_str!("../src/sqlite/schema_v4.sql"),
    include_str!("../src/sqlite/schema_v5.sql"),
    include_str!("../src/sqlite/schema_v6.sql"),
    include_str!("../src/sqlite/schema_v7.sql"),
    include_str!("../src/sqlite/schema_v8.sql"),
    include_str!("../src/sqlite/schema_v9.sql"),
    include_str!("../src/sqlite/schema_v10.sql"),
    include_str!("../src/sqlite/schema_v11.sql"),
    include_str!("../src/sqlite/schema_v12.sql"),
    include_str!("../src/sqlite/schema_v13.sql"),
];

fn id(n: u128) -> HandlerId {
    HandlerId(Uuid::from_u128(n))
}

#[test]
fn migration_14_backfills_the_ledger_from_what_was_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agency.db");
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        // Handlers without their files: only the ledger's sources matter.
        c.pragma_update(None, "foreign_keys", false).unwrap();
        for m in BEFORE_14 {
            c.execute_batch(m).unwrap();
        }
        c.pragma_update(None, "user_version", BEFORE_14.len() as i64)
            .unwrap();
        // root → a → b, and root → c.
        for (h, boss) in [(1, None), (2, Some(1)), (3, Some(2)), (4, Some(1))] {
            c.execute(
                "INSERT INTO handlers (id, boss, status, state_doc, audit_log, created_at, updated_at)
                 VALUES (?1, ?2, 'active', ?1, ?1, 0, 0)",
                rusqlite::params![id(h).to_string(), boss.map(|b: u128| id(b).to_string())],
            )
            .unwrap();
        }
        // b: two calls; c: one; a: two agents.
        for (h, tokens, usd) in [(3, 10, 100), (3, 5, 50), (4, 7, 70)] {
            c.execute(
                "INSERT INTO model_calls (at, handler, agent, upstream, api, model, stream, status,
                   input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_micro_usd)
                 VALUES (0, ?1, 'x', 'up', 'anthropic', 'm', 0, 200, ?2, 1, 0, 0, ?3)",
                rusqlite::params![id(h).to_string(), tokens, usd],
            )
            .unwrap();
        }
        for n in 0..2u128 {
            c.execute(
                "INSERT INTO agents (id, handler, started_at, ended_at) VALUES (?1, ?2, 0, 1)",
                rusqlite::params![Uuid::from_u128(100 + n).to_string(), id(2).to_string()],
            )
            .unwrap();
        }
    }
    let store = SqliteStore::open(&path).unwrap();
    read(&store, |tx: &mut dyn Tx| {
        let root = tx.budget_spend_of(id(1))?;
        assert_eq!(
            (root.tokens, root.micro_usd, root.calls),
            (10 + 1 + 5 + 1 + 7 + 1, 220, 3)
        );
        assert_eq!((root.spawns, root.handlers), (2, 3));
        let a = tx.budget_spend_of(id(2))?;
        assert_eq!((a.tokens, a.calls, a.spawns, a.handlers), (17, 2, 2, 1));
        let b = tx.budget_spend_of(id(3))?;
        assert_eq!((b.micro_usd, b.calls, b.spawns, b.handlers), (150, 2, 0, 0));
        let c = tx.budget_spend_of(id(4))?;
        assert_eq!((c.tokens, c.calls, c.handlers), (8, 1, 0));
        Ok::<_, agency_store::StoreError>(())
    })
    .unwrap();
}
