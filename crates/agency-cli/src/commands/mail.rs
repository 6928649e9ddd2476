//! `send`, `tell` and `inbox`: the user's mail.

use std::process::ExitCode;

use agency_service::MessageView;
use anyhow::Result;
use serde_json::{Value, json};

use super::{Ctx, emit, emit_json};
use crate::client::{IdKind, decode};
use crate::output;

/// Send `text` to a handler (`None`: the root handler).
pub fn send(
    ctx: &Ctx,
    handler: Option<&str>,
    text: &str,
    subject: Option<String>,
) -> Result<ExitCode> {
    let c = ctx.client()?;
    let to = match handler {
        Some(h) => c.resolve(IdKind::Handler, h)?,
        None => "root".to_owned(),
    };
    let sent = c.post(
        c.url(&["mail"]),
        &json!({ "to": to, "text": text, "subject": subject }),
    )?;
    if ctx.json {
        emit_json(&sent)?;
    } else {
        let field = |k: &str| {
            sent.get(k)
                .and_then(Value::as_str)
                .unwrap_or("?")
                .to_owned()
        };
        emit(&format!(
            "sent message {} to handler {}\n",
            field("message"),
            field("to")
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Show the inbox; with `ack`, acknowledge exactly the messages shown (not
/// whatever arrived meanwhile).
pub fn inbox(ctx: &Ctx, ack: bool) -> Result<ExitCode> {
    let c = ctx.client()?;
    let v = c.get(c.url(&["inbox"]))?;
    let messages: Vec<MessageView> = decode(v.clone(), "inbox")?;
    if ctx.json {
        emit_json(&v)?;
    } else {
        emit(&output::inbox(&messages))?;
    }
    if ack && !messages.is_empty() {
        let ids: Vec<String> = messages.iter().map(|m| m.id.to_string()).collect();
        let r = c.post(c.url(&["inbox", "ack"]), &json!({ "messages": ids }))?;
        let n = r.get("acked").and_then(Value::as_u64).unwrap_or(0);
        let note = format!(
            "acknowledged {n} message{}\n",
            if n == 1 { "" } else { "s" }
        );
        // Keep stdout one JSON document under --json.
        if ctx.json {
            eprint!("{note}")
        } else {
            emit(&format!("\n{note}"))?
        }
    }
    Ok(ExitCode::SUCCESS)
}
