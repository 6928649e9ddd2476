//! `agency gc`: apply the retention policy now, through the daemon.

use std::process::ExitCode;

use agency_api::GcReport;
use anyhow::Result;

use super::{Ctx, emit, emit_json};
use crate::client::decode;

pub fn run(ctx: &Ctx, dry_run: bool) -> Result<ExitCode> {
    let c = ctx.client()?;
    let v = c.post(c.url(&["gc"]), &serde_json::json!({ "dry_run": dry_run }))?;
    let report: GcReport = decode(v.clone(), "gc report")?;
    if ctx.json {
        emit_json(&v)?;
    } else {
        emit(&render(&report))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The report as lines of text.
pub fn render(r: &GcReport) -> String {
    let verb = if r.dry_run { "would remove" } else { "removed" };
    let mut out = String::new();
    match r.mail_acked_before {
        Some(t) => out.push_str(&format!(
            "mail acknowledged before {t}: {verb} {} messages and {} bodies ({} capabilities revoked); {} bodies kept because something else needs them\n",
            r.messages_removed, r.bodies_removed, r.capabilities_revoked, r.bodies_kept
        )),
        None => out.push_str("mail: kept forever (retention.acked_mail_days = 0)\n"),
    }
    match r.events_before {
        Some(t) => out.push_str(&format!(
            "events that happened before {t}: {verb} {}\n",
            r.events_removed
        )),
        None => out.push_str("events: kept forever (retention.event_days = 0)\n"),
    }
    out.push_str(&format!(
        "blobs no version points at: {verb} {} ({} bytes)\n",
        r.blobs_removed, r.bytes_freed
    ));
    if r.dry_run {
        out.push_str("dry run: nothing was changed\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_renders_counts_and_dry_run() {
        let r = GcReport {
            dry_run: true,
            mail_acked_before: None,
            blobs_removed: 2,
            bytes_freed: 10,
            ..GcReport::default()
        };
        let text = render(&r);
        assert!(text.contains("kept forever"), "{text}");
        assert!(text.contains("would remove 2 (10 bytes)"), "{text}");
        assert!(text.contains("dry run"), "{text}");
    }
}
