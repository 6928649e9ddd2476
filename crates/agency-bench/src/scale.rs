//! Item 5: Agency at scale. A store with 1,000,000 outcomes and 100,000
//! handlers (a tenth in `--quick`), populated through the store's `Tx` in
//! large transactions, answers the queries the daemon and agents run most:
//! the work query, an outcome's ancestors at depth 20, a 10,000-node
//! subtree and an inbox read. Each is timed through the service (as the
//! user) against the same query on a small store holding the same fixed
//! structures plus 1,000 outcomes, so the ratio shows how the cost scales
//! with the store. The daemon's resident memory on the big store (a
//! separate `agency serve` process, after answering a few REST requests) is
//! compared with an idle daemon on an empty store; the same daemon then
//! serves the dashboard's pages for item 5b (`dashboard.rs`).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agency_config::Home;
use agency_core::Principal;
use agency_service::System;
use anyhow::{Context, Result, bail};

use crate::Cfg;
use crate::dashboard::{self, Served};
use crate::populate::{Built, Plan, populate};
use crate::report::{Row, Section, ratio};
use crate::util::{Pct, agency_bin, fmt_dur, new_home, rss_kib};

const WORK_HANDLERS: usize = 100;
const CHAIN: usize = 19;
const SUBTREE: usize = 10_000;
/// Time spent sampling one query on one store, at most (after 10 samples).
const BUDGET: Duration = Duration::from_secs(15);

/// p50s of the four queries on one store.
#[derive(Debug, Clone, Copy)]
struct Times {
    work: Pct,
    ancestors: Pct,
    subtree: Pct,
    inbox: Pct,
}

fn time<T>(n: usize, mut f: impl FnMut() -> Result<T>) -> Result<Pct> {
    // Warm the page cache and statement caches first.
    for _ in 0..n.div_ceil(10).min(3) {
        f()?;
    }
    // At most n samples, but stop after BUDGET once there are 10: a query
    // that scales badly must not hold the whole run.
    let started = Instant::now();
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        f()?;
        v.push(t.elapsed());
        if v.len() >= 10 && started.elapsed() > BUDGET {
            break;
        }
    }
    Ok(Pct::of(&v))
}

fn queries(svc: &System, built: &Built, quick: bool) -> Result<Times> {
    let leaf = built.chain_leaf.context("the store has no chain")?;
    let top = built.subtree_root.context("the store has no subtree")?;
    let n = if quick { 100 } else { 500 };
    eprintln!("agency-bench:   query work");
    let work = time(n, || {
        let w = svc.handlers_with_work(None, 500)?;
        if w.len() != WORK_HANDLERS {
            bail!(
                "the work query found {} handlers, expected {WORK_HANDLERS}",
                w.len()
            );
        }
        Ok(())
    })?;
    eprintln!("agency-bench:   query ancestors");
    let ancestors = time(n, || {
        let chains = svc.outcome_ancestors(Principal::User, leaf)?;
        let depth = chains.first().map_or(0, Vec::len);
        if depth != CHAIN + 2 {
            bail!(
                "the ancestors query found a chain of {depth}, expected {}",
                CHAIN + 2
            );
        }
        Ok(())
    })?;
    eprintln!("agency-bench:   query subtree");
    let subtree = time(if quick { 10 } else { 30 }, || {
        let s = svc.outcome_subtree(Principal::User, top, Some(SUBTREE))?;
        if s.outcomes.len() != SUBTREE || s.truncated {
            bail!(
                "the subtree query found {} outcomes, expected {SUBTREE}",
                s.outcomes.len()
            );
        }
        Ok(())
    })?;
    eprintln!("agency-bench:   query inbox");
    let inbox = time(if quick { 50 } else { 200 }, || {
        let m = svc.mail_inbox(Principal::User, Some(50))?;
        if m.len() != 50 || m.iter().any(|m| m.body.is_none()) {
            bail!(
                "the inbox read found {} messages (expected 50 with bodies)",
                m.len()
            );
        }
        Ok(())
    })?;
    svc.flush_read_audit()?;
    Ok(Times {
        work,
        ancestors,
        subtree,
        inbox,
    })
}

/// Populate a store and time the queries on it.
fn store(dir: &Path, plan: Plan, quick: bool) -> Result<(Home, Built, Times, u64)> {
    let home = new_home(dir, "")?;
    let built = populate(&home, &plan)?;
    eprintln!(
        "agency-bench: populated {} outcomes in {:.1} s; timing queries",
        built.outcomes,
        built.took.as_secs_f64()
    );
    let svc = Arc::new(home.open_service().context("failed to open the service")?);
    let times = queries(&svc, &built, quick)?;
    drop(svc);
    let size = ["agency.db", "agency.db-wal"]
        .iter()
        .filter_map(|f| std::fs::metadata(home.dir().join(f)).ok())
        .map(|m| m.len())
        .sum();
    Ok((home, built, times, size))
}

/// Answer a few REST requests on the daemon `d`, then read its VmRSS.
async fn daemon_rss(d: &Served) -> Result<u64> {
    let (client, token) = d.admin()?;
    for _ in 0..20 {
        for path in ["status", "handlers", "outcomes", "inbox", "agents"] {
            let r = client
                .get(format!("http://localhost/v1/{path}"))
                .bearer_auth(&token)
                .send()
                .await
                .with_context(|| format!("failed to GET /v1/{path}"))?;
            if !r.status().is_success() {
                bail!("GET /v1/{path} answered {}", r.status());
            }
            r.bytes().await.context("failed to read a REST reply")?;
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    rss_kib(d.pid)
}

/// Item 5.
pub async fn run(cfg: Cfg) -> Result<Vec<Section>> {
    let quick = cfg.quick;
    let fixed = 1 + CHAIN + SUBTREE;
    let small_plan = Plan {
        handlers: 100,
        work_handlers: WORK_HANDLERS,
        outcomes: fixed + 100 + 1_000,
        chain: CHAIN,
        subtree: SUBTREE,
        user_messages: 100,
        events: true,
    };
    let big_handlers = cfg.pick(100_000, 10_000);
    let big_plan = Plan {
        handlers: big_handlers,
        work_handlers: WORK_HANDLERS,
        outcomes: cfg.pick(1_000_000, 100_000),
        chain: CHAIN,
        subtree: SUBTREE,
        user_messages: big_handlers,
        events: true,
    };
    let dir = tempfile::tempdir().context("failed to create a temporary directory")?;
    let d = dir.path().to_owned();
    let (small_home, small_built, small, small_size) =
        tokio::task::spawn_blocking(move || store(&d.join("small"), small_plan, quick))
            .await
            .context("failed to join the small store's task")??;
    let d = dir.path().to_owned();
    let (big_home, big_built, big, big_size) =
        tokio::task::spawn_blocking(move || store(&d.join("big"), big_plan, quick))
            .await
            .context("failed to join the big store's task")??;
    let bin = agency_bin()?;
    let empty = new_home(&dir.path().join("empty"), "")?;
    let idle = Served::start(&bin, &empty).await?;
    let idle_rss = daemon_rss(&idle).await?;
    idle.stop().await;
    let big_daemon = Served::start(&bin, &big_home).await?;
    let big_rss = daemon_rss(&big_daemon).await?;
    // Item 5b on the same daemon, after its memory was read.
    let big_pages = dashboard::time_pages(&big_daemon, quick).await?;
    let rss_after_pages = rss_kib(big_daemon.pid)?;
    big_daemon.stop().await;
    let small_daemon = Served::start(&bin, &small_home).await?;
    let small_pages = dashboard::time_pages(&small_daemon, quick).await?;
    small_daemon.stop().await;

    let (bo, bh) = (big_built.outcomes, big_built.handlers.len());
    let small_name = format!("{} outcomes", small_built.outcomes);
    let mut s = Section::new(format!("5. Scale: {bo} outcomes, {bh} handlers"));
    let row = |what: &str, b: Pct, sm: Pct| {
        Row::times(
            format!("{what}, p50"),
            b.p50,
            (&format!("same on {small_name}"), sm.p50),
        )
    };
    s.rows.push(row(
        &format!("work query (handlers with work, {WORK_HANDLERS} of them)"),
        big.work,
        small.work,
    ));
    s.rows.push(row(
        &format!("ancestors of an outcome at depth {}", CHAIN + 1),
        big.ancestors,
        small.ancestors,
    ));
    s.rows.push(row(
        &format!("subtree of {SUBTREE} outcomes"),
        big.subtree,
        small.subtree,
    ));
    s.rows.push(row(
        &format!("inbox read (first 50 of {bh} messages, with bodies)"),
        big.inbox,
        small.inbox,
    ));
    s.rows.push(Row::new(
        "daemon resident memory (VmRSS)",
        format!("{:.1} MiB", big_rss as f64 / 1024.0),
        format!(
            "{:.1} MiB (idle daemon, empty store)",
            idle_rss as f64 / 1024.0
        ),
        ratio(big_rss as f64, idle_rss as f64),
    ));
    s.rows.push(Row::new(
        "store size (agency.db + WAL)",
        format!("{:.0} MiB", big_size as f64 / 1048576.0),
        format!("{:.1} MiB ({small_name})", small_size as f64 / 1048576.0),
        ratio(big_size as f64, small_size as f64),
    ));
    let grew: Vec<&str> = [
        ("the work query", big.work, small.work),
        ("ancestors", big.ancestors, small.ancestors),
        ("the subtree", big.subtree, small.subtree),
        ("the inbox read", big.inbox, small.inbox),
    ]
    .iter()
    .filter(|(_, b, sm)| b.p50.as_secs_f64() > 2.0 * sm.p50.as_secs_f64())
    .map(|(n, _, _)| *n)
    .collect();
    s.shows = format!(
        "whether the hot queries grow with the store (each reads the same amount in both stores, so a ratio near 1 means index-driven): {}; memory grows with the store's page cache and the populated rows the REST listings touch.",
        if grew.is_empty() {
            "none grew more than ×2".to_owned()
        } else {
            format!("{} grew more than ×2", grew.join(", "))
        }
    );
    s.notes.push(format!(
        "big store populated in {:.0} s through the store's `Tx` (batches of ~14,000 handlers or 50,000 outcomes per transaction): {bh} handlers under the root, each with a root outcome ({WORK_HANDLERS} open, the rest blocked), state document and audit log; a chain of {CHAIN} outcomes; a {SUBTREE}-node subtree (fan-out 10); the remaining outcomes as completed children of handler roots, each with an `outcome.created` event in the log (dated a day back); one delivered message per handler to the user. Small store: the same fixed structures, 100 handlers, 100 messages.",
        big_built.took.as_secs_f64()
    ));
    s.notes.push(format!(
        "queries through `Service` as the user on a store opened in this process (no daemon), up to 500 samples each or 15 s (at least 10), p99 big/small: work {} / {}, ancestors {} / {}, subtree {} / {}, inbox {} / {}; memory: `agency serve` as its own process after 100 REST requests (status, handlers, outcomes, inbox, agents).",
        fmt_dur(big.work.p99),
        fmt_dur(small.work.p99),
        fmt_dur(big.ancestors.p99),
        fmt_dur(small.ancestors.p99),
        fmt_dur(big.subtree.p99),
        fmt_dur(small.subtree.p99),
        fmt_dur(big.inbox.p99),
        fmt_dur(small.inbox.p99)
    ));
    s.notes.push(format!(
        "the big store's daemon after item 5b's dashboard loads below: {:.1} MiB resident.",
        rss_after_pages as f64 / 1024.0
    ));
    if quick {
        s.notes.push(
            "quick mode: a tenth of the full sizes (100,000 outcomes, 10,000 handlers).".to_owned(),
        );
    }
    let pages = dashboard::section(
        &big_pages,
        &small_pages,
        &format!("{bo} outcomes, {bh} handlers"),
        &small_name,
        quick,
    );
    Ok(vec![s, pages])
}
