//! Talking to an agency from outside: `agency key
//! mint|list|revoke` manage the API keys the user hands to outside
//! parties (REST `/v1/agency/keys`), and `agency ask` / `agency answer`
//! are the user's own way to talk to an agency, through the same route
//! outside parties use (`/v1/agency/messages`, here over the home's
//! socket with the admin token); `agency conversations` is the user's
//! view of every conversation with outside callers (their replies stay
//! out of the user's inbox).

use std::process::ExitCode;

use agency_api::{MintedOrgKey, OrgKeyView, OrgMessageView};
use agency_core::ConversationId;
use agency_core::status::OrgMessageStatus;
use anyhow::Result;
use serde_json::json;

use super::{Ctx, emit, emit_json, show};
use crate::client::{IdKind, decode};
use crate::output::{indent, table};

/// The key alone on stdout (for `> key-file`); what it is, on stderr.
pub fn mint(ctx: &Ctx, agency: &str) -> Result<ExitCode> {
    let c = ctx.client()?;
    let v = c.post(c.url(&["agency", "keys"]), &json!({ "agency": agency }))?;
    let k: MintedOrgKey = decode(v.clone(), "minted API key")?;
    if ctx.json {
        emit_json(&v)?;
    } else {
        emit(&format!("{}\n", k.key))?;
    }
    eprintln!(
        "minted API key {} ({}…) for agency {}; it is shown only once. It may send that agency messages (POST /v1/agency/messages on the daemon's TCP address) and read their replies, nothing else. Revoke it with `agency key revoke {}`",
        k.id, k.prefix, k.agency, k.id
    );
    Ok(ExitCode::SUCCESS)
}

pub fn list(ctx: &Ctx, agency: Option<&str>) -> Result<ExitCode> {
    let c = ctx.client()?;
    let mut url = c.url(&["agency", "keys"]);
    if let Some(a) = agency {
        url.query_pairs_mut().append_pair("agency", a);
    }
    let v = c.get(url)?;
    show(ctx, v, "API key list", |keys: &Vec<OrgKeyView>| {
        if keys.is_empty() {
            return "(no API keys)\n".to_owned();
        }
        let rows = keys
            .iter()
            .map(|k| {
                vec![
                    k.id.to_string(),
                    k.agency.clone(),
                    format!("{}…", k.prefix),
                    crate::output::ago(k.created_at),
                    k.revoked_at.map_or("live".to_owned(), |t| {
                        format!("revoked {}", crate::output::ago(t))
                    }),
                ]
            })
            .collect();
        table(&["ID", "AGENCY", "KEY", "CREATED", "STATUS"], rows)
    })?;
    Ok(ExitCode::SUCCESS)
}

pub fn revoke(ctx: &Ctx, id: &str) -> Result<ExitCode> {
    let c = ctx.client()?;
    let id = &c.resolve(IdKind::OrgKey, id)?;
    let v = c.delete(c.url(&["agency", "keys", id]))?;
    if ctx.json {
        emit_json(&v)?;
    } else if v["revoked"].as_bool().unwrap_or(false) {
        emit(&format!("revoked API key {id}; it stops working at once\n"))?;
    } else {
        emit(&format!("API key {id} was already revoked\n"))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Send `message` to `agency`'s executive handler and wait up to
/// `wait_ms` for its reply (`--wait` is bounded by its value parser).
/// No reply within a wait asked for is a failure (exit 1), so that a
/// script can tell; `--wait 0s` asks for none, and sending is then the
/// whole job.
pub fn ask(
    ctx: &Ctx,
    agency: &str,
    message: &str,
    conversation: Option<&str>,
    wait_ms: i64,
) -> Result<ExitCode> {
    let c = ctx.client()?;
    let mut body = json!({ "agency": agency, "message": message, "wait_ms": wait_ms });
    if let Some(conv) = conversation {
        body["conversation"] = json!(conv);
    }
    let v = c.post(c.url(&["agency", "messages"]), &body)?;
    let m: OrgMessageView = decode(v.clone(), "agency message")?;
    answer_view(ctx, v)?;
    match m.status {
        OrgMessageStatus::Answered => Ok(ExitCode::SUCCESS),
        OrgMessageStatus::Pending if wait_ms == 0 => Ok(ExitCode::SUCCESS),
        OrgMessageStatus::Pending if m.paused => {
            eprintln!(
                "error: failed to get an answer from agency {agency}: it is paused by its budget; the message is kept and is answered once the budget is raised or resumed (`agency answer {}`)",
                m.id
            );
            Ok(ExitCode::FAILURE)
        }
        OrgMessageStatus::Pending => {
            eprintln!(
                "error: failed to get an answer from agency {agency} within {}: the message is delivered and may still be answered; check with `agency answer {}`",
                crate::records::duration(wait_ms),
                m.id
            );
            Ok(ExitCode::FAILURE)
        }
        OrgMessageStatus::Failed => {
            eprintln!("error: agency {agency} will not answer message {}", m.id);
            Ok(ExitCode::FAILURE)
        }
    }
}

/// `agency conversations`: the messages from outside and their replies,
/// newest first, grouped by conversation.
pub fn conversations(ctx: &Ctx, agency: Option<&str>, limit: usize) -> Result<ExitCode> {
    let c = ctx.client()?;
    let mut url = c.url(&["agency", "conversations"]);
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("limit", &limit.to_string());
        if let Some(a) = agency {
            q.append_pair("agency", a);
        }
    }
    let v = c.get(url)?;
    show(ctx, v, "conversations", |l: &Vec<OrgMessageView>| {
        conversations_text(l)
    })?;
    Ok(ExitCode::SUCCESS)
}

fn conversations_text(list: &[OrgMessageView]) -> String {
    if list.is_empty() {
        return "no message from outside yet; `agency ask AGENCY TEXT` sends one as an outside caller would\n".to_owned();
    }
    // Conversations in the order of their newest message; each one's
    // messages oldest first, as it was said.
    let mut order: Vec<ConversationId> = Vec::new();
    for m in list {
        if !order.contains(&m.conversation) {
            order.push(m.conversation);
        }
    }
    let mut out = String::new();
    for (i, conv) in order.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let mut turns: Vec<&OrgMessageView> =
            list.iter().filter(|m| m.conversation == *conv).collect();
        turns.reverse();
        out.push_str(&format!(
            "conversation {conv} with agency {}\n",
            crate::safe_text::line(&turns[0].agency)
        ));
        for m in turns {
            out.push_str(&format!(
                "  {} message {} ({})\n{}",
                m.created_at,
                m.id,
                state(m),
                indent(m.text.as_deref().unwrap_or(""))
            ));
            if let Some(r) = &m.reply {
                out.push_str(&format!("  answered:\n{}", indent(r)));
            }
        }
    }
    out
}

fn state(m: &OrgMessageView) -> &'static str {
    match (m.status, m.paused) {
        (OrgMessageStatus::Pending, true) => "pending; the agency is paused by its budget",
        (OrgMessageStatus::Pending, false) => "pending",
        (OrgMessageStatus::Answered, _) => "answered",
        (_, _) => "not answered",
    }
}

/// Where a message sent with `ask` stands, with the reply once it came
/// (a message not answered yet is a state, not a failure: exit 0).
pub fn answer(ctx: &Ctx, id: &str) -> Result<ExitCode> {
    let c = ctx.client()?;
    let id = c.resolve(IdKind::OrgMessage, id)?;
    let v = c.get(c.url(&["agency", "messages", &id]))?;
    answer_view(ctx, v)?;
    Ok(ExitCode::SUCCESS)
}

fn answer_view(ctx: &Ctx, v: serde_json::Value) -> Result<()> {
    show(ctx, v, "agency message", |m: &OrgMessageView| render(m))
}

fn render(m: &OrgMessageView) -> String {
    let head = table(
        &[],
        vec![
            vec!["message".into(), m.id.to_string()],
            vec!["agency".into(), m.agency.clone()],
            vec!["conversation".into(), m.conversation.to_string()],
        ],
    );
    match (&m.reply, m.status) {
        (Some(r), _) => format!("{head}\n{}", indent(r)),
        (None, OrgMessageStatus::Pending) if m.paused => format!(
            "{head}\nno answer yet: agency {} is paused by its budget, so nothing answers until its budget is raised or resumed (`agency handlers` shows which; `agency budget set HANDLER …` or `agency resume HANDLER`); then check with `agency answer {}`\n",
            m.agency, m.id
        ),
        (None, OrgMessageStatus::Pending) => format!(
            "{head}\nno answer yet: check with `agency answer {}`; continue the conversation with --conversation {}\n",
            m.id, m.conversation
        ),
        (None, _) => format!("{head}\nit will not be answered\n"),
    }
}
