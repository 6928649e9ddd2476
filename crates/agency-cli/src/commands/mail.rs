//! `send`, `tell` and `inbox`: the user's mail.

use std::process::ExitCode;

use std::io::Read;

use agency_api::MessageView;
use anyhow::{Context, Result};
use serde_json::{Value, json};

use super::{Ctx, emit, emit_json};
use crate::cli::TextArgs;
use crate::client::{Client, IdKind, decode};
use crate::output::{self, StatusView};

/// The message text from the argument, standard input (`-`) or `--file`.
fn message_text(body: &TextArgs) -> Result<String> {
    match (&body.text, &body.file) {
        (_, Some(path)) => std::fs::read_to_string(path).with_context(|| {
            format!(
                "failed to read the message text from {} (it must be UTF-8 text)",
                path.display()
            )
        }),
        (Some(t), None) if t == "-" => {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text).context(
                "failed to read the message text from standard input (it must be UTF-8 text)",
            )?;
            Ok(text)
        }
        (Some(t), None) => Ok(t.clone()),
        // clap requires one of the two.
        (None, None) => anyhow::bail!("failed to send: give the text, `-` or --file PATH"),
    }
}

/// Send a message to a handler (`None`: the root handler).
pub fn send(
    ctx: &Ctx,
    handler: Option<&str>,
    body: &TextArgs,
    subject: Option<String>,
) -> Result<ExitCode> {
    let text = message_text(body)?;
    let text = text.as_str();
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
    if let Some(hint) = no_agent_hint(&c) {
        eprint!("{hint}");
    }
    Ok(ExitCode::SUCCESS)
}

/// A note for stderr when no agent will ever pick a message up (the
/// daemon runs no agents). Best effort: a failed status call adds nothing.
fn no_agent_hint(c: &Client) -> Option<String> {
    let s: StatusView = decode(c.get(c.url(&["status"])).ok()?, "status").ok()?;
    output::no_runtime_hint(&s)
}

/// `agency inbox --all`: every message delivered to the user (acknowledged
/// ones and replies to outside callers too), at most `limit`.
pub fn inbox_all(ctx: &Ctx, limit: Option<usize>) -> Result<ExitCode> {
    let c = ctx.client()?;
    let mut url = c.url(&["inbox"]);
    url.query_pairs_mut().append_pair("all", "true");
    if let Some(n) = limit {
        url.query_pairs_mut().append_pair("limit", &n.to_string());
    }
    let v = c.get(url)?;
    if ctx.json {
        emit_json(&v)?;
    } else {
        let messages: Vec<MessageView> = decode(v, "inbox")?;
        emit(&output::inbox(&messages))?;
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
