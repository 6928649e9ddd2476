//! Applied organisations (`orgs`, `org_agents`, `org_grants`,
//! `handler_standing`): the store side of issue 12 item 5.

use agency_core::{CapabilityId, HandlerId, Timestamp};
use rusqlite::{Connection, Row, params};

use super::convert::*;
use crate::error::StoreError;
use crate::orgs::{OrgAgentRow, OrgAgentStatus, OrgGrantRow, OrgRow};

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

pub(crate) fn org(c: &Connection, name: &str) -> R<Option<OrgRow>> {
    query_opt(
        c,
        &format!("SELECT {ORG_COLS} FROM orgs WHERE name = ?1"),
        [name],
        || format!("read organisation {name}"),
        org_row,
    )
}

pub(crate) fn orgs(c: &Connection) -> R<Vec<OrgRow>> {
    query_rows(
        c,
        &format!("SELECT {ORG_COLS} FROM orgs ORDER BY name"),
        [],
        || "list the organisations".to_owned(),
        org_row,
    )
}

pub(crate) fn put_org(c: &Connection, o: &OrgRow) -> R<()> {
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

/// Every agent ever stood up for `org`, ordered by name.
pub(crate) fn org_agents(c: &Connection, org: &str) -> R<Vec<OrgAgentRow>> {
    query_rows(
        c,
        &format!("SELECT {AGENT_COLS} FROM org_agents WHERE org = ?1 ORDER BY agent"),
        [org],
        || format!("list the agents of organisation {org}"),
        agent_row,
    )
}

pub(crate) fn org_agent_by_handler(c: &Connection, h: HandlerId) -> R<Option<OrgAgentRow>> {
    query_opt(
        c,
        &format!("SELECT {AGENT_COLS} FROM org_agents WHERE handler = ?1"),
        [h.to_string()],
        || format!("read the organisation agent of handler {h}"),
        agent_row,
    )
}

pub(crate) fn put_org_agent(c: &Connection, a: &OrgAgentRow) -> R<()> {
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
pub(crate) fn org_grants(c: &Connection, org: &str) -> R<Vec<OrgGrantRow>> {
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

pub(crate) fn put_org_grant(c: &Connection, g: &OrgGrantRow) -> R<()> {
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

pub(crate) fn delete_org_grant(c: &Connection, org: &str, holder: &str, key: &str) -> R<()> {
    execute(
        c,
        "DELETE FROM org_grants WHERE org = ?1 AND holder = ?2 AND key = ?3",
        params![org, holder, key],
        || format!("forget grant {key} to {holder} of organisation {org}"),
    )
    .map(drop)
}

/// Set (`Some`) or clear (`None`) a handler's standing instructions.
pub(crate) fn set_standing(
    c: &Connection,
    h: HandlerId,
    text: Option<&str>,
    at: Timestamp,
) -> R<()> {
    match text {
        Some(t) => execute(
            c,
            "INSERT INTO handler_standing (handler, text, set_at) VALUES (?1, ?2, ?3)
             ON CONFLICT (handler) DO UPDATE SET text = ?2, set_at = ?3",
            params![h.to_string(), t, at.0],
            || format!("set the standing instructions of handler {h}"),
        ),
        None => execute(
            c,
            "DELETE FROM handler_standing WHERE handler = ?1",
            [h.to_string()],
            || format!("clear the standing instructions of handler {h}"),
        ),
    }
    .map(drop)
}

pub(crate) fn standing(c: &Connection, h: HandlerId) -> R<Option<String>> {
    query_opt(
        c,
        "SELECT text FROM handler_standing WHERE handler = ?1",
        [h.to_string()],
        || format!("read the standing instructions of handler {h}"),
        |r| col(r, 0, "standing instructions"),
    )
}
