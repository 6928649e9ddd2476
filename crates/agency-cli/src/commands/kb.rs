//! The Knowledge Base: `kb ls`, `kb cat`, `kb put`, `kb log`, and `fsck`.

use agency_api::FileText;
use std::process::ExitCode;

use agency_api::FileInfo;
use agency_api::{FsckReport, VersionInfo};
use anyhow::{Context, Result};
use serde_json::Value;

use super::{Ctx, emit, emit_json, show};
use crate::client::{IdKind, decode};
use crate::output;

/// Files per request; the daemon caps pages at its own maximum anyway.
const PAGE: usize = 1000;

pub fn ls(ctx: &Ctx) -> Result<ExitCode> {
    let c = ctx.client()?;
    // Page through by id until an empty page: a short page does not prove
    // the end, since the daemon may cap pages below what we asked.
    let mut all: Vec<Value> = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let mut url = c.url(&["kb"]);
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("limit", &PAGE.to_string());
            if let Some(a) = &after {
                q.append_pair("after", a);
            }
        }
        let page: Vec<Value> = decode(c.get(url)?, "KB file list")?;
        let Some(last) = page.last() else { break };
        let next = last.get("id").and_then(Value::as_str).map(str::to_owned);
        if next.is_none() || next == after {
            anyhow::bail!(
                "failed to list KB files: the daemon's page does not advance past {after:?}"
            );
        }
        after = next;
        all.extend(page);
    }
    if ctx.json {
        emit_json(&all)?;
    } else {
        let files: Vec<FileInfo> = decode(Value::Array(all), "KB file list")?;
        emit(&output::kb_files(&files))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Print the content exactly as stored (no newline added), so
/// `agency kb cat X > f` round-trips text files. On a terminal, control
/// characters are made visible instead: an agent may have written them to
/// attack the terminal (`safe_text`).
pub fn cat(ctx: &Ctx, id: &str, version: Option<i64>) -> Result<ExitCode> {
    let c = ctx.client()?;
    let id = c.resolve(IdKind::File, id)?;
    let mut url = c.url(&["kb", &id]);
    if let Some(v) = version {
        url.query_pairs_mut().append_pair("version", &v.to_string());
    }
    let v = c.get(url)?;
    if ctx.json {
        emit_json(&v)?;
        return Ok(ExitCode::SUCCESS);
    }
    let f: FileText = decode(v, "KB file")?;
    if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        emit(&crate::safe_text::block(&f.text))?;
        return Ok(ExitCode::SUCCESS);
    }
    if f.binary {
        // Exact bytes, so `agency kb cat X > f` round-trips binary files too.
        super::write_stdout(&f.bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    emit(&f.text)?;
    Ok(ExitCode::SUCCESS)
}

/// The most `kb put` reads before the daemon's own limit
/// (`limits.max_file_bytes`, 8 MiB by default) can refuse it: a bound on
/// this process's memory, not the KB's limit.
const PUT_READ_MAX: u64 = 256 * 1024 * 1024;

/// Put a local file or standard input into the KB: a new document, or a
/// new version of `to` based on its latest version (compare-and-set).
pub fn put(
    ctx: &Ctx,
    source: &str,
    description: Option<&str>,
    to: Option<&str>,
) -> Result<ExitCode> {
    let what = if source == "-" {
        "standard input".to_owned()
    } else {
        source.to_owned()
    };
    let content = read_source(source, &what)?;
    let c = ctx.client()?;
    let failed = || format!("failed to put {what} into the KB");
    let v = match (description, to) {
        (Some(d), None) => c
            .post(
                c.url(&["kb"]),
                &serde_json::json!({ "description": d, "content": content }),
            )
            .with_context(failed)?,
        (None, Some(to)) => {
            let id = c.resolve(IdKind::File, to)?;
            let latest: FileText = decode(c.get(c.url(&["kb", &id]))?, "KB file")?;
            c.post(
                c.url(&["kb", &id]),
                &serde_json::json!({
                    "content": content,
                    "base_version": latest.meta.version,
                    "base_hash": latest.meta.hash.to_string(),
                }),
            )
            .with_context(failed)?
        }
        // clap requires exactly one of the two.
        _ => {
            anyhow::bail!("failed to put {what} into the KB: give --description TEXT or --to FILE")
        }
    };
    if ctx.json {
        emit_json(&v)?;
        return Ok(ExitCode::SUCCESS);
    }
    let id = v
        .get("id")
        .or_else(|| v.get("file"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let version = v.get("version").and_then(Value::as_i64).unwrap_or_default();
    emit(&format!(
        "KB file {id} version {version} ({} bytes from {what})\n",
        content.len()
    ))?;
    Ok(ExitCode::SUCCESS)
}

/// The text to put: a regular file or standard input, UTF-8, bounded.
fn read_source(source: &str, what: &str) -> Result<String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    if source == "-" {
        std::io::stdin()
            .take(PUT_READ_MAX + 1)
            .read_to_end(&mut bytes)
            .with_context(|| format!("failed to read {what}"))?;
    } else {
        let meta = std::fs::metadata(source)
            .with_context(|| format!("failed to read {what}: check the path"))?;
        if !meta.is_file() {
            anyhow::bail!(
                "failed to read {what}: it is not a regular file; give a file, or `-` for standard input"
            );
        }
        std::fs::File::open(source)
            .and_then(|f| f.take(PUT_READ_MAX + 1).read_to_end(&mut bytes))
            .with_context(|| format!("failed to read {what}"))?;
    }
    if bytes.len() as u64 > PUT_READ_MAX {
        anyhow::bail!(
            "failed to put {what} into the KB: it is larger than {} MiB; the KB takes files up to limits.max_file_bytes in agency.toml",
            PUT_READ_MAX / 1024 / 1024
        );
    }
    String::from_utf8(bytes).map_err(|_| {
        anyhow::anyhow!(
            "failed to put {what} into the KB: it is not UTF-8 text (the KB holds text, as agents read and write it over MCP)"
        )
    })
}

pub fn log(ctx: &Ctx, id: &str) -> Result<ExitCode> {
    let c = ctx.client()?;
    let id = c.resolve(IdKind::File, id)?;
    // Page through by version until an empty page: a file may have more
    // versions than the daemon gives in one page (the kill -9 suite's files
    // pass 1,000), and `kb log` shows them all.
    let mut all: Vec<Value> = Vec::new();
    let mut after: Option<i64> = None;
    loop {
        let mut url = c.url(&["kb", &id, "history"]);
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("limit", &PAGE.to_string());
            if let Some(a) = after {
                q.append_pair("after", &a.to_string());
            }
        }
        let page: Vec<Value> = decode(c.get(url)?, "version history")?;
        let Some(last) = page.last() else { break };
        let next = last.get("version").and_then(Value::as_i64);
        if next.is_none() || next <= after {
            anyhow::bail!(
                "failed to list the versions of KB file {id}: the daemon's page does not advance past version {after:?}"
            );
        }
        after = next;
        all.extend(page);
    }
    show(
        ctx,
        Value::Array(all),
        "version history",
        |l: &Vec<VersionInfo>| output::kb_log(l),
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Exit 1 when a version's content is missing or corrupt; unreferenced
/// blobs are harmless and do not fail the check.
pub fn fsck(ctx: &Ctx) -> Result<ExitCode> {
    let c = ctx.client()?;
    let v = c.post(c.url(&["fsck"]), &serde_json::json!({}))?;
    let report: FsckReport = decode(v.clone(), "fsck report")?;
    if ctx.json {
        emit_json(&v)?;
    } else {
        emit(&output::fsck(&report))?;
    }
    Ok(if report.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
