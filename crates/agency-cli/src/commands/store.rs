//! `agency store migrate --to URL`: copy this home's SQLite store into an
//! empty PostgreSQL database and check the copy. Runs without the daemon
//! (and refuses while it runs, so nothing is written after the snapshot).

use std::process::ExitCode;

use agency_postgres::{CopyReport, PgStore};
use agency_store::{FsBlobStore, FsckReport, SqliteStore, fsck};
use anyhow::{Context, Result, bail};
use serde_json::json;

use super::{Ctx, emit, emit_json};
use crate::cli::StoreCommand;

pub fn run(ctx: &Ctx, c: StoreCommand) -> Result<ExitCode> {
    match c {
        StoreCommand::Migrate(a) => migrate(ctx, &a.to),
    }
}

fn migrate(ctx: &Ctx, url: &str) -> Result<ExitCode> {
    let home = &ctx.home;
    if !home.exists() {
        return Err(agency_config::ConfigError::NoHome(home.dir().to_owned()).into());
    }
    if home.daemon_holds_lock() {
        bail!(
            "failed to copy the store of {}: its daemon is running; stop it (`agency stop`) so that nothing is written after the copy",
            home.dir().display()
        );
    }
    let db = home.db_path();
    if !db.is_file() {
        bail!(
            "failed to copy the store of {}: it has no SQLite store ({} is missing)",
            home.dir().display(),
            db.display()
        );
    }
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        bail!(
            "failed to copy the store: --to must be a PostgreSQL URL (postgres://user@host:port/database)"
        );
    }
    let src = SqliteStore::open(&db).with_context(|| format!("failed to open {}", db.display()))?;
    let src_blobs = FsBlobStore::open(home.blobs_dir())
        .with_context(|| format!("failed to open {}", home.blobs_dir().display()))?;
    let dst = PgStore::open(url).context("failed to open the PostgreSQL store")?;
    let report = dst.copy_from_sqlite(&src, &src_blobs)?;
    let check = fsck(&dst, &dst.blobs()).context("failed to check the copy")?;
    if ctx.json {
        emit_json(&json!({
            "database": dst.target(),
            "tables": report.tables.iter().map(|(t, n)| json!({"table": t, "rows": n})).collect::<Vec<_>>(),
            "rows": report.rows(),
            "blobs": report.blobs,
            "blob_bytes": report.blob_bytes,
            "fsck_clean": check.is_clean(),
            "fsck_problems": check.problems.len(),
        }))?;
    } else {
        emit(&render(dst.target(), &report, &check))?;
    }
    Ok(if check.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn render(target: &str, r: &CopyReport, check: &FsckReport) -> String {
    let tables = r.tables.iter().filter(|(_, n)| *n > 0).count();
    let mut out = format!(
        "copied {} rows of {tables} tables and {} blobs ({} bytes) into {target}\n",
        r.rows(),
        r.blobs,
        r.blob_bytes
    );
    if check.is_clean() {
        out.push_str(&format!(
            "fsck: clean ({} versions, {} blobs checked)\n",
            check.versions_checked, check.blobs_checked
        ));
        out.push_str("next: set `[store] url` in agency.toml (or AGENCY_STORE_URL) to the database's URL, then `agency serve`; the SQLite store is unchanged\n");
    } else {
        out.push_str(&format!(
            "fsck: {} problems in the copy; run `agency fsck` against it for details\n",
            check.problems.len()
        ));
    }
    out
}
