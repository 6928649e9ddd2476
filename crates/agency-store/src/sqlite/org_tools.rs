//! The tools of applied organisations (`org_tools`).

use rusqlite::{Row, params};

use super::SqliteTx;
use super::convert::*;
use crate::org_tools::OrgToolRow;
use crate::tx::OrgToolTx;

const COLS: &str = "name, org, def_json, def_hash, updated_at";

fn row(r: &Row<'_>) -> R<OrgToolRow> {
    Ok(OrgToolRow {
        name: col(r, 0, "org tool name")?,
        org: col(r, 1, "org tool organisation")?,
        def_json: col(r, 2, "org tool definition")?,
        def_hash: col(r, 3, "org tool definition hash")?,
        updated_at: col_ts(r, 4, "org tool updated at")?,
    })
}

impl OrgToolTx for SqliteTx<'_> {
    fn org_tool(&mut self, name: &str) -> R<Option<OrgToolRow>> {
        let c = self.conn;
        query_opt(
            c,
            &format!("SELECT {COLS} FROM org_tools WHERE name = ?1"),
            [name],
            || format!("read org tool {name}"),
            row,
        )
    }

    fn org_tools(&mut self, org: Option<&str>) -> R<Vec<OrgToolRow>> {
        let c = self.conn;
        query_rows(
            c,
            &format!("SELECT {COLS} FROM org_tools WHERE ?1 IS NULL OR org = ?1 ORDER BY name"),
            [org],
            || match org {
                Some(o) => format!("list the tools of organisation {o}"),
                None => "list the org tools".to_owned(),
            },
            row,
        )
    }

    fn put_org_tool(&mut self, t: &OrgToolRow) -> R<()> {
        let c = self.conn;
        execute(
            c,
            "INSERT INTO org_tools (name, org, def_json, def_hash, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (name) DO UPDATE SET org = ?2, def_json = ?3, def_hash = ?4,
               updated_at = ?5",
            params![t.name, t.org, t.def_json, t.def_hash, t.updated_at.0],
            || format!("store org tool {} of organisation {}", t.name, t.org),
        )
        .map(drop)
    }

    fn delete_org_tool(&mut self, name: &str) -> R<()> {
        let c = self.conn;
        execute(c, "DELETE FROM org_tools WHERE name = ?1", [name], || {
            format!("delete org tool {name}")
        })
        .map(drop)
    }
}
