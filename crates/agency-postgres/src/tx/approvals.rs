//! [`ApprovalTx`] on PostgreSQL: approval requests and `each_use`
//! capability marks (`approvals`, `capability_approval`).

use agency_core::policy::ApprovalId;
use agency_core::{CapabilityId, HandlerId};
use agency_store::StoreError;
use agency_store::model::{ApprovalRow, ApprovalStatus};
use agency_store::tx::ApprovalTx;
use agency_store::tx::R;
use tokio_postgres::Row;

use crate::PgTx;
use crate::convert::*;

macro_rules! approval_cols {
    () => {
        "id, handler, agent, tool, args_hash, args, reason, status, always, created_at,
     decided_at, decided_by, deny_reason, consumed_at"
    };
}

fn row(r: &Row) -> R<ApprovalRow> {
    let status: String = col(r, 7, "approval status")?;
    Ok(ApprovalRow {
        id: ApprovalId(col(r, 0, "approval id")?),
        handler: col_id(r, 1, "approval handler")?,
        agent: col_id(r, 2, "approval agent")?,
        tool: col(r, 3, "approval tool")?,
        args_hash: col(r, 4, "approval args hash")?,
        args: col(r, 5, "approval args")?,
        reason: col(r, 6, "approval reason")?,
        status: ApprovalStatus::parse(&status)
            .ok_or_else(|| StoreError::corrupt("approval status", status))?,
        always: col(r, 8, "approval always")?,
        created_at: col_ts(r, 9, "approval created_at")?,
        decided_at: col_opt_ts(r, 10, "approval decided_at")?,
        decided_by: col(r, 11, "approval decided_by")?,
        deny_reason: col(r, 12, "approval deny reason")?,
        consumed_at: col_opt_ts(r, 13, "approval consumed_at")?,
    })
}

impl ApprovalTx for PgTx<'_> {
    /// Insert a request (its `id` is ignored) and return its id.
    fn insert_approval(&mut self, a: &ApprovalRow) -> R<ApprovalId> {
        query_value(
            self.conn,
            "INSERT INTO approvals (handler, agent, tool, args_hash, args, reason, status, always,
                                    created_at, decided_at, decided_by, deny_reason, consumed_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING id",
            &[
                &a.handler.to_string(),
                &a.agent.to_string(),
                &a.tool,
                &a.args_hash,
                &a.args,
                &a.reason,
                &a.status.as_str(),
                &flag(a.always),
                &a.created_at.0,
                &a.decided_at.map(|t| t.0),
                &a.decided_by,
                &a.deny_reason,
                &a.consumed_at.map(|t| t.0),
            ],
            || {
                format!(
                    "insert an approval request for tool {} of handler {}",
                    a.tool, a.handler
                )
            },
        )
        .map(ApprovalId)
    }

    fn approval(&mut self, id: ApprovalId) -> R<Option<ApprovalRow>> {
        query_opt(
            self.conn,
            concat!("SELECT ", approval_cols!(), " FROM approvals WHERE id = $1"),
            &[&id.0],
            || format!("read approval {id}"),
            row,
        )
    }

    /// The pending, approved and denied requests bound to (handler, tool, hash),
    /// oldest first.
    fn approvals_bound(
        &mut self,
        handler: HandlerId,
        tool: &str,
        args_hash: &str,
    ) -> R<Vec<ApprovalRow>> {
        query_rows(
            self.conn,
            concat!(
                "SELECT ",
                approval_cols!(),
                " FROM approvals
                 WHERE handler = $1 AND tool = $2 AND args_hash = $3
                   AND status IN ('pending', 'approved', 'denied')
                 ORDER BY id"
            ),
            &[&handler.to_string(), &tool, &args_hash],
            || format!("read the approvals of tool {tool} for handler {handler}"),
            row,
        )
    }

    /// Overwrite the decision columns of a request, but only if it is still in
    /// status `from` (returns whether it was).
    fn update_approval(&mut self, a: &ApprovalRow, from: ApprovalStatus) -> R<bool> {
        let n = execute(
            self.conn,
            "UPDATE approvals SET status = $2, always = $3, decided_at = $4, decided_by = $5,
                                  deny_reason = $6, consumed_at = $7
             WHERE id = $1 AND status = $8",
            &[
                &a.id.0,
                &a.status.as_str(),
                &flag(a.always),
                &a.decided_at.map(|t| t.0),
                &a.decided_by,
                &a.deny_reason,
                &a.consumed_at.map(|t| t.0),
                &from.as_str(),
            ],
            || format!("update approval {}", a.id),
        )?;
        Ok(n == 1)
    }

    /// Requests, newest first: only pending ones unless `all`, of one handler
    /// if given, at most `limit`.
    fn approvals_list(
        &mut self,
        all: bool,
        handler: Option<HandlerId>,
        limit_rows: usize,
    ) -> R<Vec<ApprovalRow>> {
        query_rows(
            self.conn,
            concat!(
                "SELECT ",
                approval_cols!(),
                " FROM approvals
                 WHERE ($1::BOOLEAN OR status = 'pending') AND ($2::TEXT IS NULL OR handler = $2)
                 ORDER BY id DESC LIMIT $3"
            ),
            &[&all, &opt_text(handler), &limit(limit_rows)],
            || "list approval requests".to_string(),
            row,
        )
    }

    fn set_capability_approval(&mut self, cap: CapabilityId, mode: &str) -> R<()> {
        execute(
            self.conn,
            "INSERT INTO capability_approval (capability, mode) VALUES ($1, $2)
             ON CONFLICT (capability) DO UPDATE SET mode = EXCLUDED.mode",
            &[&cap.0, &mode],
            || format!("mark capability {} as approval {mode}", cap.0),
        )
        .map(drop)
    }

    fn capability_approval(&mut self, cap: CapabilityId) -> R<Option<String>> {
        query_opt(
            self.conn,
            "SELECT mode FROM capability_approval WHERE capability = $1",
            &[&cap.0],
            || format!("read the approval mode of capability {}", cap.0),
            |r| col(r, 0, "capability approval mode"),
        )
    }
}
