//! `agency model set <handler> <NAME>`, `agency model clear <handler>` and
//! `agency model show <handler>`: the `[models.NAME]` upstream a handler's
//! agents use (inherited by its underlings that have none of their own;
//! REST `GET`/`POST /v1/models/{handler}`).

use std::process::ExitCode;

use anyhow::Result;
use serde_json::{Value, json};

use super::Ctx;
use crate::client::IdKind;

pub fn set(ctx: &Ctx, handler: &str, upstream: Option<&str>) -> Result<ExitCode> {
    let c = ctx.client()?;
    let id = c.resolve(IdKind::Handler, handler)?;
    let v = c.post(c.url(&["models", &id]), &json!({ "upstream": upstream }))?;
    answer(ctx, &v)
}

pub fn show(ctx: &Ctx, handler: &str) -> Result<ExitCode> {
    let c = ctx.client()?;
    let id = c.resolve(IdKind::Handler, handler)?;
    let v = c.get(c.url(&["models", &id]))?;
    answer(ctx, &v)
}

fn answer(ctx: &Ctx, v: &Value) -> Result<ExitCode> {
    if ctx.json {
        super::emit_json(v)?;
    } else {
        super::emit(&format!("{}\n", text(v)))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `handler H: model upstream NAME (own | inherited from B)`, or the
/// runtime's when none is set on the way up.
fn text(v: &Value) -> String {
    let h = v["handler"].as_str().unwrap_or_default();
    match (v["effective"].as_str(), v["own"].as_str()) {
        (Some(e), Some(_)) => format!("handler {h}: model upstream {e} (set on it)"),
        (Some(e), None) => format!(
            "handler {h}: model upstream {e} (inherited from handler {})",
            v["set_on"].as_str().unwrap_or_default()
        ),
        (None, _) => format!("handler {h}: the runtime's model upstream (none set)"),
    }
}
