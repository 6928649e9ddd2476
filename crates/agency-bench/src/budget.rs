//! Item 10: what budgets cost per tool call. The same Agency
//! MCP tool call (`kb_read` of 4 KiB, through the real daemon) is made by
//! the agent of a handler three levels below the root, once with a budget
//! on that handler and on each of its 3 ancestors (every kind of limit
//! set, none reached) and once with no budget anywhere, in interleaved
//! rounds on one session so that drift hits both alike. Every tool call
//! is charged to the ledger either way (the running totals of the handler
//! and its ancestors are kept even without budgets); the difference is
//! the check of each budget on the chain.

use std::sync::Arc;
use std::time::Instant;

use agency_core::{HandlerId, OutcomeId, Principal};
use agency_service::{BudgetLimits, NewOutcome, System};
use anyhow::{Context, Result, bail};

use crate::Cfg;
use crate::latency::{Mcp, four_kib};
use crate::report::{Row, Section};
use crate::util::{Pct, fmt_dur, new_home};

const WARMUP: usize = 200;
const ROUNDS: usize = 10;

/// Every kind of limit, far from reached.
const LIMITS: BudgetLimits = BudgetLimits {
    tokens: Some(1_000_000_000),
    micro_usd: Some(1_000_000_000_000),
    calls: Some(1_000_000_000),
    tool_calls: Some(1_000_000_000),
    spawns: Some(1_000_000_000),
    live_agents: Some(1_000_000),
    handlers: Some(1_000_000),
    depth: Some(1_000),
    wall_clock_ms: Some(1_000_000_000_000),
};

/// Root → a → b → d, each delegating as its own agent; returns the chain
/// (nearest the root first), a token for d's agent, and a 4 KiB file d
/// created.
fn organisation(svc: &System) -> Result<(Vec<HandlerId>, String, String)> {
    let root = svc
        .root_handler()?
        .context("failed to find the root handler")?;
    let mut chain = vec![root];
    let mut parent: OutcomeId = root.root();
    let mut who = Principal::agent(root, svc.token_mint(Principal::User, root, None)?.agent);
    for level in 1..=3 {
        let o = svc.outcome_create(
            who,
            &NewOutcome {
                title: format!("level {level}"),
                parents: vec![parent],
                ..Default::default()
            },
        )?;
        let h = svc.delegate(who, o, &[])?.handler;
        chain.push(h);
        parent = o;
        if level < 3 {
            who = Principal::agent(h, svc.token_mint(Principal::User, h, None)?.agent);
        }
    }
    let d = *chain.last().context("the chain is empty")?;
    let minted = svc.token_mint(Principal::User, d, None)?;
    let file = svc.kb_create(
        Principal::agent(d, minted.agent),
        "benchmark file, 4 KiB",
        &four_kib(),
    )?;
    Ok((chain, minted.token, file.to_string()))
}

fn set_all(svc: &System, chain: &[HandlerId], limits: BudgetLimits) -> Result<()> {
    for h in chain {
        svc.budget_set(Principal::User, *h, limits)?;
    }
    Ok(())
}

pub async fn run(cfg: Cfg) -> Result<Vec<Section>> {
    let n = cfg.pick(5000, 500);
    let dir = tempfile::tempdir().context("failed to create a temporary directory")?;
    let home = new_home(&dir.path().join("home"), "")?;
    let daemon = agency_daemon::Daemon::start(&home)
        .await
        .context("failed to start the daemon")?;
    let svc: Arc<System> = daemon.service().clone();
    let s2 = svc.clone();
    let (chain, token, file) = tokio::task::spawn_blocking(move || organisation(&s2))
        .await
        .context("failed to join the setup task")??;
    let mcp = Mcp::connect(&format!("http://{}/mcp", daemon.addr()), Some(&token)).await?;
    let toggle = |limits: BudgetLimits| {
        let (svc, chain) = (svc.clone(), chain.clone());
        async move {
            tokio::task::spawn_blocking(move || set_all(&svc, &chain, limits))
                .await
                .context("failed to join the budget task")?
        }
    };
    for i in 0..WARMUP {
        toggle(if i % 2 == 0 {
            LIMITS
        } else {
            BudgetLimits::default()
        })
        .await?;
        mcp.kb_read(&file).await?;
    }
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        toggle(LIMITS).await?;
        for _ in 0..n / ROUNDS {
            let t = Instant::now();
            mcp.kb_read(&file).await?;
            with.push(t.elapsed());
        }
        toggle(BudgetLimits::default()).await?;
        for _ in 0..n / ROUNDS {
            let t = Instant::now();
            mcp.kb_read(&file).await?;
            without.push(t.elapsed());
        }
    }
    mcp.close().await;
    // Every call made under the budgets was charged: the ledger of the
    // topmost handler counts them (a figure of a path that skipped the
    // charge would be wrong). Calls under no tool-call limit are not
    // counted: they take the read-only check.
    let s2 = svc.clone();
    let root = chain[0];
    let counted = tokio::task::spawn_blocking(move || s2.budget_show(Principal::User, Some(root)))
        .await
        .context("failed to join the check task")??
        .spent
        .tool_calls;
    let want = ((n / ROUNDS) * ROUNDS) as i64;
    if counted < want {
        bail!("the ledger counted {counted} tool calls of at least {want}");
    }
    daemon.stop().await.context("failed to stop the daemon")?;
    let (w, wo) = (Pct::of(&with), Pct::of(&without));
    let mut s = Section::new(
        "10. Budget check per tool call: kb_read with budgets on the handler and 3 ancestors vs none",
    );
    s.rows.push(Row::times(
        "kb_read with 4 budgets p50",
        w.p50,
        ("no budget p50", wo.p50),
    ));
    s.rows.push(Row::times(
        "kb_read with 4 budgets p99",
        w.p99,
        ("no budget p99", wo.p99),
    ));
    s.shows = format!(
        "what four budgets (every kind of limit) add to an Agency tool call: {} at p50, the check and the durable write of the running totals; with no tool-call or wall-clock limit on the chain a call only reads the budgets and writes nothing.",
        fmt_dur(w.p50.saturating_sub(wo.p50))
    );
    s.notes.push(format!(
        "{} calls each way after {WARMUP} warm-up calls, interleaved in {ROUNDS} rounds (budgets set on root, a, b and d before a round with budgets, removed before one without); the caller is d's agent, three levels below the root; daemon in this process (`Daemon::start`), rmcp streamable-HTTP client, one session.",
        w.n
    ));
    Ok(vec![s])
}
