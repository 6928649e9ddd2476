//! [`OrgTx`] on SQLite: applied organisations (`orgs`, `org_agents`,
//! `org_grants`); their standing instructions are in `handler_settings`.

use agency_core::{CapabilityId, HandlerId};
use rusqlite::{Row, params};

use super::SqliteTx;
use super::convert::*;
use crate::error::StoreError;
use crate::orgs::{OrgAgentRow, OrgAgentStatus, OrgGrantRow, OrgRow};
use crate::tx::OrgTx;

const ORG_COLS: &str = "name, model_json, model_hash, executive, applied_at, retired_at";

fn org_row(r: &Row<'_>) -> R<OrgRow> {
    Ok(OrgRow {
        name: col(r, 0, "org name")?,
        model_json: col(r, 1, "org model")?,
        model_hash: col(r, 2, "org model hash")?,
        executive: col_id(r, 3, "org executive handler")?,
        applied_at: col_ts(r, 4, "org applied at")?,
        retired_at: col_opt_ts(r, 5, "org retired at")?,
    })
}

const AGENT_COLS: &str = "org, agent, agency, handler, def_hash, runtime, status, updated_at";

fn agent_row(r: &Row<'_>) -> R<OrgAgentRow> {
    let status: String = col(r, 6, "org agent status")?;
    Ok(OrgAgentRow {
        org: col(r, 0, "org agent org")?,
        agent: col(r, 1, "org agent name")?,
        agency: col(r, 2, "org agent agency")?,
        handler: col_id(r, 3, "org agent handler")?,
        def_hash: col(r, 4, "org agent definition hash")?,
        runtime: col(r, 5, "org agent runtime")?,
        status: OrgAgentStatus::parse(&status)
            .ok_or_else(|| StoreError::corrupt("org agent status", status))?,
        updated_at: col_ts(r, 7, "org agent updated at")?,
    })
}

impl OrgTx for SqliteTx<'_> {
    fn org(&mut self, name: &str) -> R<Option<OrgRow>> {
        let c = self.conn;
        query_opt(
            c,
            &format!("SELECT {ORG_COLS} FROM orgs WHERE name = ?1"),
            [name],
            || format!("read organisation {name}"),
            org_row,
        )
    }

    fn orgs(&mut self) -> R<Vec<OrgRow>> {
        let c = self.conn;
        query_rows(
            c,
            &format!("SELECT {ORG_COLS} FROM orgs ORDER BY name"),
            [],
            || "list the organisations".to_owned(),
            org_row,
        )
    }

    fn put_org(&mut self, o: &OrgRow) -> R<()> {
        let c = self.conn;
        execute(
            c,
            "INSERT INTO orgs (name, model_json, model_hash, executive, applied_at, retired_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (name) DO UPDATE SET model_json = ?2, model_hash = ?3,
               executive = ?4, applied_at = ?5, retired_at = ?6",
            params![
                o.name,
                o.model_json,
                o.model_hash,
                o.executive.to_string(),
                o.applied_at.0,
                o.retired_at.map(|t| t.0)
            ],
            || format!("record organisation {}", o.name),
        )
        .map(drop)
    }

    /// Every agent ever stood up for `org`, ordered by name.
    fn org_agents(&mut self, org: &str) -> R<Vec<OrgAgentRow>> {
        let c = self.conn;
        query_rows(
            c,
            &format!("SELECT {AGENT_COLS} FROM org_agents WHERE org = ?1 ORDER BY agent"),
            [org],
            || format!("list the agents of organisation {org}"),
            agent_row,
        )
    }

    fn org_agent_by_handler(&mut self, h: HandlerId) -> R<Option<OrgAgentRow>> {
        let c = self.conn;
        query_opt(
            c,
            &format!("SELECT {AGENT_COLS} FROM org_agents WHERE handler = ?1"),
            [h.to_string()],
            || format!("read the organisation agent of handler {h}"),
            agent_row,
        )
    }

    fn put_org_agent(&mut self, a: &OrgAgentRow) -> R<()> {
        let c = self.conn;
        execute(
            c,
            "INSERT INTO org_agents (org, agent, agency, handler, def_hash, runtime, status, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
             ON CONFLICT (org, agent) DO UPDATE SET agency = ?3, handler = ?4, def_hash = ?5,
               runtime = ?6, status = ?7, updated_at = ?8",
            params![
                a.org,
                a.agent,
                a.agency,
                a.handler.to_string(),
                a.def_hash,
                a.runtime,
                a.status.as_str(),
                a.updated_at.0
            ],
            || format!("record agent {} of organisation {}", a.agent, a.org),
        )
        .map(drop)
    }

    /// Every capability `org` granted, ordered by (holder, key).
    fn org_grants(&mut self, org: &str) -> R<Vec<OrgGrantRow>> {
        let c = self.conn;
        query_rows(
            c,
            "SELECT org, holder, key, level, capability FROM org_grants
             WHERE org = ?1 ORDER BY holder, key",
            [org],
            || format!("list the grants of organisation {org}"),
            |r| {
                Ok(OrgGrantRow {
                    org: col(r, 0, "org grant org")?,
                    holder: col(r, 1, "org grant holder")?,
                    key: col(r, 2, "org grant key")?,
                    level: col_level(r, 3, "org grant level")?,
                    capability: CapabilityId(col(r, 4, "org grant capability")?),
                })
            },
        )
    }

    fn put_org_grant(&mut self, g: &OrgGrantRow) -> R<()> {
        let c = self.conn;
        execute(
            c,
            "INSERT INTO org_grants (org, holder, key, level, capability) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (org, holder, key) DO UPDATE SET level = ?4, capability = ?5",
            params![g.org, g.holder, g.key, g.level.as_i64(), g.capability.0],
            || {
                format!(
                    "record grant {} to {} of organisation {}",
                    g.key, g.holder, g.org
                )
            },
        )
        .map(drop)
    }

    fn delete_org_grant(&mut self, org: &str, holder: &str, key: &str) -> R<()> {
        let c = self.conn;
        execute(
            c,
            "DELETE FROM org_grants WHERE org = ?1 AND holder = ?2 AND key = ?3",
            params![org, holder, key],
            || format!("forget grant {key} to {holder} of organisation {org}"),
        )
        .map(drop)
    }
}
