//! `agency approvals [--all]`, `agency approve <id> [--always]` and
//! `agency deny <id> --reason …`: the user's side of the approval gates
//! (REST `/v1/approvals…`). A request is a tool call an agent wanted to
//! make that the policy (`policy.toml`) or an `each_use` capability says
//! to ask about; approving lets the same call of the same handler run
//! once (every time with `--always`).

use std::fmt::Write as _;
use std::process::ExitCode;

use agency_api::Approval;
use anyhow::Result;
use serde_json::json;

use super::{Ctx, show};

pub fn list(ctx: &Ctx, all: bool) -> Result<ExitCode> {
    let c = ctx.client()?;
    let mut url = c.url(&["approvals"]);
    if all {
        url.set_query(Some("all=true"));
    }
    let v = c.get(url)?;
    show(ctx, v, "approval requests", |rows: &Vec<Approval>| {
        render_list(rows, all)
    })?;
    Ok(ExitCode::SUCCESS)
}

pub fn approve(ctx: &Ctx, id: &str, always: bool) -> Result<ExitCode> {
    let c = ctx.client()?;
    let v = c.post(
        c.url(&["approvals", id.trim_start_matches('#'), "approve"]),
        &json!({ "always": always }),
    )?;
    show(ctx, v, "approval request", |a: &Approval| {
        let how = if a.always {
            "every identical call of this handler may now run"
        } else {
            "the agent's next identical call runs once"
        };
        format!(
            "approved request {} ({} for handler {}): {how}\n",
            a.id, a.tool, a.handler
        )
    })?;
    Ok(ExitCode::SUCCESS)
}

pub fn deny(ctx: &Ctx, id: &str, reason: &str) -> Result<ExitCode> {
    let c = ctx.client()?;
    let v = c.post(
        c.url(&["approvals", id.trim_start_matches('#'), "deny"]),
        &json!({ "reason": reason }),
    )?;
    show(ctx, v, "approval request", |a: &Approval| {
        format!(
            "denied request {} ({} for handler {}); the agent is told why when it calls again\n",
            a.id, a.tool, a.handler
        )
    })?;
    Ok(ExitCode::SUCCESS)
}

/// One block per request: id, status, who, tool, why, the exact arguments.
pub(crate) fn render_list(rows: &[Approval], all: bool) -> String {
    if rows.is_empty() {
        return if all {
            "no approval requests\n".to_owned()
        } else {
            "no pending approval requests\n".to_owned()
        };
    }
    let mut out = String::new();
    use crate::output::layout;
    let l = layout::get();
    // Ids shown short and unique among those listed (`--wide`: whole).
    let mut heads: Vec<Vec<String>> = rows
        .iter()
        .map(|a| {
            vec![format!(
                "#{} {}{} {} — handler {} agent {}",
                a.id,
                a.status.as_str(),
                if a.always { " (always)" } else { "" },
                a.tool,
                a.handler,
                a.agent
            )]
        })
        .collect();
    if !l.wide {
        layout::shorten_ids(&mut heads);
    }
    // Prose wraps at spaces; the arguments are never cut nor broken inside
    // a value: the user decides on the exact call. Too wide for one line,
    // they are shown as indented JSON, one member a line.
    let prose = |label: &str, text: &str| -> String {
        let line = format!("  {label}: {}", crate::safe_text::line(text));
        if l.wide {
            return format!("{line}\n");
        }
        layout::break_at_spaces(&line, l.width)
            .into_iter()
            .map(|part| format!("{part}\n"))
            .collect()
    };
    for (a, head) in rows.iter().zip(heads) {
        let _ = writeln!(out, "{}", head[0]);
        out.push_str(&prose("why", &a.reason));
        let args = format!("  args: {}", crate::safe_text::line(&a.args));
        match serde_json::from_str::<serde_json::Value>(&a.args) {
            Ok(v) if !l.wide && layout::width(&args) > l.width => {
                out.push_str("  args:\n");
                let pretty = serde_json::to_string_pretty(&v).unwrap_or_default();
                for line in pretty.lines() {
                    let _ = writeln!(out, "    {}", crate::safe_text::line(line));
                }
            }
            _ => {
                let _ = writeln!(out, "{args}");
            }
        }
        if let Some(r) = &a.deny_reason {
            out.push_str(&prose("denied", r));
        }
    }
    if !all {
        out.push_str("approve with `agency approve ID [--always]`, refuse with `agency deny ID --reason …`\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use agency_core::policy::ApprovalId;
    use agency_core::status::ApprovalStatus;
    use agency_core::{AgentId, HandlerId, Timestamp};

    use super::*;

    #[test]
    fn list_rendering() {
        let h: HandlerId = "0b0c0d0e-0000-4000-8000-000000000001".parse().unwrap();
        let agent: AgentId = "1a2b3c4d-0000-4000-8000-000000000002".parse().unwrap();
        let row = Approval {
            id: ApprovalId(7),
            handler: h,
            agent,
            tool: "bash".into(),
            args_hash: "ab".into(),
            args: r#"{"command":"rm -rf /tmp/x"}"#.into(),
            reason: "rm removes /tmp/x, outside the workspace".into(),
            status: ApprovalStatus::Pending,
            always: false,
            created_at: Timestamp(0),
            decided_at: None,
            decided_by: None,
            deny_reason: None,
            consumed_at: None,
        };
        insta::assert_snapshot!(render_list(std::slice::from_ref(&row), false), @r#"
        #7 pending bash — handler 0b0c0d0e agent 1a2b3c4d
          why: rm removes /tmp/x, outside the workspace
          args: {"command":"rm -rf /tmp/x"}
        approve with `agency approve ID [--always]`, refuse with `agency deny ID --reason …`
        "#);
        insta::assert_snapshot!(render_list(&[], true), @"no approval requests");
        // Arguments too wide for a line: members on lines of their own,
        // no value broken or cut.
        let long = Approval {
            args: format!(
                r#"{{"command":"rm -rf /tmp/{}","timeout_ms":600000}}"#,
                "x".repeat(70)
            ),
            ..row
        };
        insta::assert_snapshot!(render_list(&[long], true), @r#"
        #7 pending bash — handler 0b0c0d0e agent 1a2b3c4d
          why: rm removes /tmp/x, outside the workspace
          args:
            {
              "command": "rm -rf /tmp/xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
              "timeout_ms": 600000
            }
        "#);
    }
}
