//! [`OrgTx`] on PostgreSQL: applied organisations (`orgs`, `org_agents`,
//! `org_grants`); their standing instructions are in `handler_settings`.

use agency_core::{CapabilityId, HandlerId};
use agency_store::StoreError;
use agency_store::orgs::{OrgAgentRow, OrgAgentStatus, OrgGrantRow, OrgRow};
use agency_store::tx::OrgTx;
use agency_store::tx::R;
use tokio_postgres::Row;

use crate::PgTx;
use crate::convert::*;

macro_rules! org_cols {
    () => {
        "name, model_json, model_hash, executive, applied_at, retired_at"
    };
}

fn org_row(r: &Row) -> R<OrgRow> {
    Ok(OrgRow {
        name: col(r, 0, "org name")?,
        model_json: col(r, 1, "org model")?,
        model_hash: col(r, 2, "org model hash")?,
        executive: col_id(r, 3, "org executive handler")?,
        applied_at: col_ts(r, 4, "org applied at")?,
        retired_at: col_opt_ts(r, 5, "org retired at")?,
    })
}

macro_rules! org_agent_cols {
    () => {
        "org, agent, agency, handler, def_hash, runtime, status, updated_at"
    };
}

fn org_agent_row(r: &Row) -> R<OrgAgentRow> {
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

impl OrgTx for PgTx<'_> {
    fn org(&mut self, name: &str) -> R<Option<OrgRow>> {
        query_opt(
            self.conn,
            concat!("SELECT ", org_cols!(), " FROM orgs WHERE name = $1"),
            &[&name],
            || format!("read organisation {name}"),
            org_row,
        )
    }

    fn orgs(&mut self) -> R<Vec<OrgRow>> {
        query_rows(
            self.conn,
            concat!("SELECT ", org_cols!(), " FROM orgs ORDER BY name"),
            &[],
            || "list the organisations".to_owned(),
            org_row,
        )
    }

    fn put_org(&mut self, o: &OrgRow) -> R<()> {
        execute(
            self.conn,
            "INSERT INTO orgs (name, model_json, model_hash, executive, applied_at, retired_at)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (name) DO UPDATE SET model_json = EXCLUDED.model_json,
               model_hash = EXCLUDED.model_hash, executive = EXCLUDED.executive,
               applied_at = EXCLUDED.applied_at, retired_at = EXCLUDED.retired_at",
            &[
                &o.name,
                &o.model_json,
                &o.model_hash,
                &o.executive.to_string(),
                &o.applied_at.0,
                &o.retired_at.map(|t| t.0),
            ],
            || format!("record organisation {}", o.name),
        )
        .map(drop)
    }

    /// Every agent ever stood up for `org`, ordered by name.
    fn org_agents(&mut self, org: &str) -> R<Vec<OrgAgentRow>> {
        query_rows(
            self.conn,
            concat!(
                "SELECT ",
                org_agent_cols!(),
                " FROM org_agents WHERE org = $1 ORDER BY agent"
            ),
            &[&org],
            || format!("list the agents of organisation {org}"),
            org_agent_row,
        )
    }

    fn org_agent_by_handler(&mut self, h: HandlerId) -> R<Option<OrgAgentRow>> {
        query_opt(
            self.conn,
            concat!(
                "SELECT ",
                org_agent_cols!(),
                " FROM org_agents WHERE handler = $1"
            ),
            &[&h.to_string()],
            || format!("read the organisation agent of handler {h}"),
            org_agent_row,
        )
    }

    fn put_org_agent(&mut self, a: &OrgAgentRow) -> R<()> {
        execute(
            self.conn,
            "INSERT INTO org_agents (org, agent, agency, handler, def_hash, runtime, status, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
             ON CONFLICT (org, agent) DO UPDATE SET agency = EXCLUDED.agency,
               handler = EXCLUDED.handler, def_hash = EXCLUDED.def_hash,
               runtime = EXCLUDED.runtime, status = EXCLUDED.status,
               updated_at = EXCLUDED.updated_at",
            &[
                &a.org,
                &a.agent,
                &a.agency,
                &a.handler.to_string(),
                &a.def_hash,
                &a.runtime,
                &a.status.as_str(),
                &a.updated_at.0,
            ],
            || format!("record agent {} of organisation {}", a.agent, a.org),
        )
        .map(drop)
    }

    /// Every capability `org` granted, ordered by (holder, key).
    fn org_grants(&mut self, org: &str) -> R<Vec<OrgGrantRow>> {
        query_rows(
            self.conn,
            "SELECT org, holder, key, level, capability FROM org_grants
             WHERE org = $1 ORDER BY holder, key",
            &[&org],
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
        execute(
            self.conn,
            "INSERT INTO org_grants (org, holder, key, level, capability) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (org, holder, key) DO UPDATE SET level = EXCLUDED.level,
               capability = EXCLUDED.capability",
            &[
                &g.org,
                &g.holder,
                &g.key,
                &g.level.as_i64(),
                &g.capability.0,
            ],
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
        execute(
            self.conn,
            "DELETE FROM org_grants WHERE org = $1 AND holder = $2 AND key = $3",
            &[&org, &holder, &key],
            || format!("forget grant {key} to {holder} of organisation {org}"),
        )
        .map(drop)
    }
}
