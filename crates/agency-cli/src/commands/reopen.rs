//! `agency reopen`: the user sets a completed or closed outcome back to open;
//! the service decides and records it.

use std::process::ExitCode;

use agency_api::ReopenReport;
use anyhow::Result;

use super::{Ctx, show};
use crate::client::IdKind;

pub fn reopen(ctx: &Ctx, outcome: &str, rationale: &str) -> Result<ExitCode> {
    let c = ctx.client()?;
    let id = c.resolve(IdKind::Outcome, outcome)?;
    let body = serde_json::json!({ "rationale": rationale });
    let v = c.post(c.url(&["outcomes", &id, "reopen"]), &body)?;
    show(ctx, v, "reopen report", |r: &ReopenReport| {
        let mut text = format!(
            "outcome {} is {} again; handler {} is responsible for it\n",
            r.outcome, r.status, r.responsible
        );
        if r.outcomes_reclaimed > 0 {
            text.push_str(&format!(
                "{} outcomes of retired handlers went back to handler {}\n",
                r.outcomes_reclaimed, r.responsible
            ));
        }
        text
    })?;
    Ok(ExitCode::SUCCESS)
}
