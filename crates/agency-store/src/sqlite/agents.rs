//! [`AgentTx`] on SQLite: agent rows (at most one live per handler, a
//! partial unique index), their bearer tokens (stored hashed), and the
//! process groups of spawned agents (pgid and the leader's start time),
//! read back at a restart to stop what a crashed daemon left.

use agency_core::{AgentId, HandlerId, Timestamp};
use rusqlite::params;

use super::SqliteTx;
use super::convert::*;
use crate::error::StoreError;
use crate::model::*;
use crate::tx::AgentTx;

impl AgentTx for SqliteTx<'_> {
    fn insert_agent(&mut self, a: &AgentRow) -> R<()> {
        let c = self.conn;
        let res = execute(
            c,
            concat!(
                "INSERT INTO agents (",
                agent_cols!(),
                ") VALUES (?1, ?2, ?3, ?4, ?5)"
            ),
            params![
                a.id.to_string(),
                a.handler.to_string(),
                a.started_at.0,
                a.ended_at.map(|t| t.0),
                a.end_reason
            ],
            || format!("insert agent {} for handler {}", a.id, a.handler),
        );
        match res {
            // The partial unique index on live agents names its column; turn
            // SQLite's wording into the rule it enforces.
            Err(StoreError::Unique { op, message }) if message.contains("agents.handler") => {
                Err(StoreError::Unique {
                    op,
                    message: format!("handler {} already has a live agent", a.handler),
                })
            }
            other => other.map(drop),
        }
    }

    fn agent(&mut self, id: AgentId) -> R<Option<AgentRow>> {
        let c = self.conn;
        query_opt(
            c,
            concat!("SELECT ", agent_cols!(), " FROM agents WHERE id = ?1"),
            [id.to_string()],
            || format!("read agent {id}"),
            agent_row,
        )
    }

    fn agent_with_handler(&mut self, id: AgentId) -> R<Option<(AgentRow, HandlerRow)>> {
        query_opt(
            self.conn,
            concat!(
                "SELECT ",
                agent_and_handler_cols!(),
                " FROM agents a JOIN handlers h ON h.id = a.handler WHERE a.id = ?1"
            ),
            [id.to_string()],
            || format!("read agent {id} with its handler"),
            agent_and_handler_row,
        )
    }

    fn end_agent(&mut self, id: AgentId, at: Timestamp, reason: &str) -> R<bool> {
        let c = self.conn;
        let n = execute(
            c,
            "UPDATE agents SET ended_at = ?2, end_reason = ?3 WHERE id = ?1 AND ended_at IS NULL",
            params![id.to_string(), at.0, reason],
            || format!("end agent {id}"),
        )?;
        Ok(n > 0)
    }

    fn live_agents_of(&mut self, handlers: &[HandlerId]) -> R<Vec<AgentRow>> {
        let c = self.conn;
        query_rows(
            c,
            concat!(
                "SELECT ",
                agent_cols!(),
                " FROM agents WHERE ended_at IS NULL AND handler IN (SELECT value FROM json_each(?1)) ORDER BY id"
            ),
            [json_list(handlers, true)],
            || format!("list the live agents of {} handler(s)", handlers.len()),
            agent_row,
        )
    }

    fn live_agents(&mut self) -> R<Vec<AgentRow>> {
        let c = self.conn;
        query_rows(
            c,
            concat!(
                "SELECT ",
                agent_cols!(),
                " FROM agents WHERE ended_at IS NULL ORDER BY id"
            ),
            [],
            || "list live agents".to_owned(),
            agent_row,
        )
    }

    fn recent_agents(&mut self, n: usize) -> R<Vec<AgentRow>> {
        let c = self.conn;
        query_rows(
            c,
            concat!(
                "SELECT ",
                agent_cols!(),
                " FROM agents ORDER BY started_at DESC, id DESC LIMIT ?1"
            ),
            [limit(n)],
            || "list recent agents".to_owned(),
            agent_row,
        )
    }

    fn insert_token(&mut self, t: &TokenRow) -> R<()> {
        let c = self.conn;
        execute(
            c,
            "INSERT INTO tokens (hash, agent, handler, workspace, created_at, revoked_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                t.hash,
                t.agent.to_string(),
                t.handler.to_string(),
                t.workspace,
                t.created_at.0,
                t.revoked_at.map(|r| r.0)
            ],
            || format!("insert token for agent {}", t.agent),
        )
        .map(drop)
    }

    fn token(&mut self, hash: &str) -> R<Option<TokenRow>> {
        query_opt(
            self.conn,
            "SELECT hash, agent, handler, workspace, created_at, revoked_at FROM tokens WHERE hash = ?1",
            [hash],
            || "read token".to_owned(),
            |r| token_row_at(r, 0),
        )
    }

    fn token_caller(&mut self, hash: &str) -> R<Option<(TokenRow, AgentRow, HandlerRow)>> {
        query_opt(
            self.conn,
            concat!(
                "SELECT ",
                agent_and_handler_cols!(),
                ", ",
                token_cols!(),
                " FROM tokens t JOIN agents a ON a.id = t.agent \
                  JOIN handlers h ON h.id = a.handler WHERE t.hash = ?1"
            ),
            [hash],
            || "read token with its agent and handler".to_owned(),
            |r| {
                let (a, h) = agent_and_handler_row(r)?;
                Ok((token_row_at(r, AGENT_AND_HANDLER_COLS)?, a, h))
            },
        )
    }

    fn revoke_tokens_of(&mut self, agent: AgentId, at: Timestamp) -> R<u64> {
        let c = self.conn;
        execute(
            c,
            "UPDATE tokens SET revoked_at = ?2 WHERE agent = ?1 AND revoked_at IS NULL",
            params![agent.to_string(), at.0],
            || format!("revoke tokens of agent {agent}"),
        )
        .map(|n| n as u64)
    }

    fn put_agent_process(&mut self, r: &AgentProcessRow) -> R<()> {
        let c = self.conn;
        execute(
            c,
            "INSERT INTO agent_processes (agent, pgid, started) VALUES (?1, ?2, ?3)
             ON CONFLICT (agent) DO UPDATE SET pgid = ?2, started = ?3",
            params![r.agent.to_string(), r.pgid, r.started],
            || format!("record the process group of agent {}", r.agent),
        )
        .map(drop)
    }

    fn live_agent_processes(&mut self) -> R<Vec<AgentProcessRow>> {
        let c = self.conn;
        query_rows(
            c,
            "SELECT p.agent, p.pgid, p.started FROM agent_processes p
             JOIN agents a ON a.id = p.agent WHERE a.ended_at IS NULL ORDER BY p.agent",
            [],
            || "list the process groups of live agents".to_owned(),
            |r| {
                Ok(AgentProcessRow {
                    agent: col_id(r, 0, "process agent")?,
                    pgid: col(r, 1, "process group")?,
                    started: col(r, 2, "process start time")?,
                })
            },
        )
    }
}
