//! `agency memory search|show|delete|status|compactions|undo`
//! a handler's memory as the user sees it, over REST
//! `/v1/memory/{handler}/…`. Memory texts are agent-written: they reach
//! the terminal only through the table's and `indent`'s escaping.

use std::process::ExitCode;

use anyhow::Result;
use serde_json::Value;

use super::{Ctx, emit, emit_json};
use crate::client::IdKind;
use crate::output::{indent, table};

pub fn search(
    ctx: &Ctx,
    handler: &str,
    words: &str,
    limit: usize,
    kind: Option<&str>,
    tag: Option<&str>,
    all: bool,
) -> Result<ExitCode> {
    let c = ctx.client()?;
    let h = c.resolve(IdKind::Handler, handler)?;
    let mut url = c.url(&["memory", &h, "search"]);
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("q", words)
            .append_pair("limit", &limit.to_string());
        if let Some(k) = kind {
            q.append_pair("kind", k);
        }
        if let Some(t) = tag {
            q.append_pair("tag", t);
        }
        if all {
            q.append_pair("all", "true");
        }
    }
    let v = c.get(url)?;
    if ctx.json {
        emit_json(&v)?;
        return Ok(ExitCode::SUCCESS);
    }
    let hits = v.as_array().cloned().unwrap_or_default();
    if hits.is_empty() {
        emit("(no memory matches)\n")?;
        return Ok(ExitCode::SUCCESS);
    }
    let rows = hits
        .iter()
        .map(|m| {
            vec![
                s(&m["id"]),
                format!("{:.3}", m["score"].as_f64().unwrap_or_default()),
                s(&m["kind"]),
                s(&m["state"]),
                tags(&m["tags"]),
                ago(&m["created_at"]),
                first_line(&s(&m["text"])),
            ]
        })
        .collect();
    emit(&table(
        &["ID", "SCORE", "KIND", "STATE", "TAGS", "STORED", "TEXT"],
        rows,
    ))?;
    Ok(ExitCode::SUCCESS)
}

pub fn show(ctx: &Ctx, handler: &str, id: &str) -> Result<ExitCode> {
    let (c, h) = (ctx.client()?, handler_id(ctx, handler)?);
    let id = c.resolve(IdKind::Memory, id)?;
    let v = c.get(c.url(&["memory", &h, &id]))?;
    if ctx.json {
        emit_json(&v)?;
    } else {
        emit(&memory_text(&v))?;
    }
    Ok(ExitCode::SUCCESS)
}

pub fn delete(ctx: &Ctx, handler: &str, id: &str) -> Result<ExitCode> {
    let (c, h) = (ctx.client()?, handler_id(ctx, handler)?);
    let id = c.resolve(IdKind::Memory, id)?;
    let v = c.delete(c.url(&["memory", &h, &id]))?;
    if ctx.json {
        emit_json(&v)?;
    } else {
        emit(&format!(
            "forgot memory {id} of handler {h}: no longer searched or recalled (kept as history: `agency memory search --all`)\n"
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}

pub fn status(ctx: &Ctx, handler: &str) -> Result<ExitCode> {
    let (c, h) = (ctx.client()?, handler_id(ctx, handler)?);
    let v = c.get(c.url(&["memory", &h, "status"]))?;
    if ctx.json {
        emit_json(&v)?;
        return Ok(ExitCode::SUCCESS);
    }
    let n = &v["counts"];
    let mut out = crate::output::layout::wrap(
        &format!(
            "handler {h}: {} live memories ({} bytes), {} condensed, {} forgotten (limit {}; condense after {})",
            n["live"],
            n["live_bytes"],
            n["condensed"],
            n["forgotten"],
            v["max_per_handler"],
            v["condense_after"]
        ),
        0,
    );
    match v["embeddings_model"].as_str() {
        Some(m) => out.push_str(&format!(
            "embeddings: {m}, {} live memories embedded\n",
            v["embedded_live"]
        )),
        None => out.push_str("embeddings: not configured (full-text search only)\n"),
    }
    if let Some(k) = v["open_compaction"].as_object() {
        out.push_str(&format!(
            "condensation requested at {} (compaction {}), not done yet\n",
            when(&k["requested_at"]),
            s(&k["id"])
        ));
    }
    let changes = v["last_changes"].as_array().cloned().unwrap_or_default();
    if !changes.is_empty() {
        out.push_str("last changes:\n");
        let rows = changes
            .iter()
            .map(|c| vec![ago(&c["at"]), s(&c["change"]), s(&c["memory"])])
            .collect();
        out.push_str(&indent(&table(&[], rows)));
    }
    emit(&out)?;
    Ok(ExitCode::SUCCESS)
}

pub fn compactions(ctx: &Ctx, handler: &str) -> Result<ExitCode> {
    let (c, h) = (ctx.client()?, handler_id(ctx, handler)?);
    let v = c.get(c.url(&["memory", &h, "compactions"]))?;
    if ctx.json {
        emit_json(&v)?;
        return Ok(ExitCode::SUCCESS);
    }
    let list = v.as_array().cloned().unwrap_or_default();
    if list.is_empty() {
        emit("(no condensations)\n")?;
        return Ok(ExitCode::SUCCESS);
    }
    let rows = list
        .iter()
        .map(|k| {
            vec![
                s(&k["id"]),
                s(&k["status"]),
                ago(&k["requested_at"]),
                s(&k["summary"]),
                k["condensed"].as_array().map_or(0, Vec::len).to_string(),
            ]
        })
        .collect();
    emit(&table(
        &["ID", "STATUS", "REQUESTED", "SUMMARY", "CONDENSED"],
        rows,
    ))?;
    Ok(ExitCode::SUCCESS)
}

pub fn undo(ctx: &Ctx, handler: &str, compaction: &str) -> Result<ExitCode> {
    let (c, h) = (ctx.client()?, handler_id(ctx, handler)?);
    let id = c.resolve(IdKind::MemoryCompaction, compaction)?;
    let v = c.post(
        c.url(&["memory", &h, "compactions", &id, "undo"]),
        &serde_json::json!({}),
    )?;
    if ctx.json {
        emit_json(&v)?;
    } else {
        let n = v["condensed"].as_array().map_or(0, Vec::len);
        emit(&format!(
            "undid compaction {id}: its summary {} is forgotten, {n} memories are live again\n",
            s(&v["summary"])
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn handler_id(ctx: &Ctx, handler: &str) -> Result<String> {
    ctx.client()?.resolve(IdKind::Handler, handler)
}

fn memory_text(m: &Value) -> String {
    let mut out = format!(
        "memory {} of handler {}: {} {}, stored {}{}\n",
        s(&m["id"]),
        s(&m["handler"]),
        s(&m["state"]),
        s(&m["kind"]),
        when(&m["created_at"]),
        match m["tags"].as_array() {
            Some(t) if !t.is_empty() => format!(", tags {}", tags(&m["tags"])),
            _ => String::new(),
        }
    );
    if let Some(into) = m["condensed_into"].as_str() {
        out.push_str(&format!("condensed into memory {into}\n"));
    }
    out.push_str(&indent(&s(&m["text"])));
    out
}

/// A time (milliseconds since the epoch) as RFC 3339.
fn when(v: &Value) -> String {
    v.as_i64()
        .map_or_else(|| s(v), |ms| agency_core::Timestamp(ms).to_rfc3339())
}

/// A time (milliseconds since the epoch) for a table: "3m ago" (RFC 3339
/// with `--wide`).
fn ago(v: &Value) -> String {
    v.as_i64()
        .map_or_else(|| s(v), |ms| crate::output::ago(agency_core::Timestamp(ms)))
}

/// A JSON value as a plain cell: strings unquoted, null empty.
fn s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn tags(v: &Value) -> String {
    v.as_array()
        .map(|t| t.iter().map(s).collect::<Vec<_>>().join(","))
        .unwrap_or_default()
}

/// The first line of a memory, cut at 80 characters, for a table.
fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    let cut: String = line.chars().take(80).collect();
    if cut.len() < line.len() || text.lines().nth(1).is_some() {
        format!("{cut}…")
    } else {
        cut
    }
}
