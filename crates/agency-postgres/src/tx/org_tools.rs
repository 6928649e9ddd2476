//! [`OrgToolTx`] on PostgreSQL: the tools of applied organisations
//! (`org_tools`).

use agency_store::org_tools::OrgToolRow;
use agency_store::tx::OrgToolTx;
use agency_store::tx::R;
use tokio_postgres::Row;

use crate::PgTx;
use crate::convert::*;

macro_rules! org_tool_cols {
    () => {
        "name, org, def_json, def_hash, updated_at"
    };
}

fn row(r: &Row) -> R<OrgToolRow> {
    Ok(OrgToolRow {
        name: col(r, 0, "org tool name")?,
        org: col(r, 1, "org tool organisation")?,
        def_json: col(r, 2, "org tool definition")?,
        def_hash: col(r, 3, "org tool definition hash")?,
        updated_at: col_ts(r, 4, "org tool updated at")?,
    })
}

impl OrgToolTx for PgTx<'_> {
    fn org_tool(&mut self, name: &str) -> R<Option<OrgToolRow>> {
        query_opt(
            self.conn,
            concat!(
                "SELECT ",
                org_tool_cols!(),
                " FROM org_tools WHERE name = $1"
            ),
            &[&name],
            || format!("read org tool {name}"),
            row,
        )
    }

    fn org_tools(&mut self, org: Option<&str>) -> R<Vec<OrgToolRow>> {
        query_rows(
            self.conn,
            concat!(
                "SELECT ",
                org_tool_cols!(),
                " FROM org_tools WHERE $1::TEXT IS NULL OR org = $1 ORDER BY name"
            ),
            &[&org],
            || match org {
                Some(o) => format!("list the tools of organisation {o}"),
                None => "list the org tools".to_owned(),
            },
            row,
        )
    }

    fn put_org_tool(&mut self, t: &OrgToolRow) -> R<()> {
        execute(
            self.conn,
            "INSERT INTO org_tools (name, org, def_json, def_hash, updated_at)
             VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (name) DO UPDATE SET org = EXCLUDED.org, def_json = EXCLUDED.def_json,
               def_hash = EXCLUDED.def_hash, updated_at = EXCLUDED.updated_at",
            &[&t.name, &t.org, &t.def_json, &t.def_hash, &t.updated_at.0],
            || format!("store org tool {} of organisation {}", t.name, t.org),
        )
        .map(drop)
    }

    fn delete_org_tool(&mut self, name: &str) -> R<()> {
        execute(
            self.conn,
            "DELETE FROM org_tools WHERE name = $1",
            &[&name],
            || format!("delete org tool {name}"),
        )
        .map(drop)
    }
}
