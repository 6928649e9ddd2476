//! `agency keep-warm <handler> [<duration>|off|default]`: how long a
//! handler's agent stays warm after its work is done
//! (REST `GET`/`POST`/`DELETE /v1/handlers/{id}/keep-warm`).

use std::process::ExitCode;

use anyhow::Result;
use serde_json::{Value, json};

use super::Ctx;
use crate::client::IdKind;

pub fn run(ctx: &Ctx, handler: &str, setting: Option<&str>) -> Result<ExitCode> {
    let c = ctx.client()?;
    let id = c.resolve(IdKind::Handler, handler)?;
    let url = c.url(&["handlers", &id, "keep-warm"]);
    let v = match setting {
        None => c.get(url)?,
        Some(s) => c.post(url, &json!({ "keep_warm": s }))?,
    };
    if ctx.json {
        super::emit_json(&v)?;
    } else {
        super::emit(&format!("{}\n", text(&v)))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `handler H: keeps warm 5m (set by the user)`, or `exits when its work
/// is done (default)`.
fn text(v: &Value) -> String {
    let h = v["handler"].as_str().unwrap_or_default();
    let ms = v["effective_ms"].as_u64().unwrap_or(0);
    let source = match v["source"].as_str().unwrap_or_default() {
        "user" => "set by the user".to_owned(),
        "org" => "its organisation's memory.keepWarm".to_owned(),
        other => format!("the {other}"),
    };
    if ms == 0 {
        format!("handler {h}: its agent exits when its work is done ({source})")
    } else {
        format!(
            "handler {h}: its agent stays warm {} after its work is done ({source})",
            human(ms)
        )
    }
}

fn human(ms: u64) -> String {
    match ms {
        ms if ms % 3_600_000 == 0 => format!("{} h", ms / 3_600_000),
        ms if ms % 60_000 == 0 => format!("{} min", ms / 60_000),
        ms if ms % 1000 == 0 => format!("{} s", ms / 1000),
        ms => format!("{ms} ms"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_says_how_long_and_why() {
        let v = json!({"handler": "h1", "effective_ms": 300000, "source": "executive default"});
        assert_eq!(
            text(&v),
            "handler h1: its agent stays warm 5 min after its work is done (the executive default)"
        );
        let v = json!({"handler": "h1", "effective_ms": 0, "source": "user"});
        assert_eq!(
            text(&v),
            "handler h1: its agent exits when its work is done (set by the user)"
        );
        assert_eq!(human(1500), "1500 ms");
        assert_eq!(human(90_000), "90 s");
    }
}
