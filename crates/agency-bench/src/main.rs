//! `agency-bench`: measures Agency against baselines taken in the same run
//! and writes `BENCHMARKS.md`. Every figure is reported next to its
//! baseline and as a ratio, because absolute times on a shared, noisy
//! machine mean little; a measure that cannot run is reported as "not
//! measured" with the reason, never with an invented number.
//!
//! ```text
//! cargo run --release -p agency-bench -- [--quick] [--out BENCHMARKS.md] [--only 1,3]
//! ```
//!
//! Items 1, 3 and 4 also report their figures with the store on
//! PostgreSQL, in a scratch database made per run on the server
//! `AGENCY_TEST_POSTGRES` names (the local one by default; `off`: none),
//! and say "not measured" for those rows when no server answers.
//!
//! `AGENCY_BENCH_LOG` (a tracing filter such as
//! `agency_supervisor=debug`) prints the in-process daemon's
//! diagnostics to stderr, e.g. where each spawn's time goes.
//!
//! The binary doubles as the tiny agent program of the scheduling
//! benchmark (`agency-bench __stamp DIR`, see [`sched::stamp`]): that mode is
//! checked before anything else so the process does as little as possible
//! between exec and recording its start time. It is also the bare model
//! relay of item 9b (`agency-bench __relay UPSTREAM`, see [`relay`]).

mod agents;
mod budget;
mod daemons;
mod dashboard;
mod gateway;
mod gateway_cpu;
mod growth;
mod jsonrpc;
mod latency;
mod learning;
mod memory;
mod pg;
mod pipelines;
mod populate;
mod relay;
mod report;
mod retriever;
mod sandbox;
mod scale;
mod sched;
mod util;
mod warm;
mod watching;
mod writes;

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Parser;

use crate::report::Section;

#[derive(Debug, Parser)]
#[command(about = "Benchmarks of Agency, each against a baseline measured in the same run")]
struct Args {
    /// Smaller sizes and fewer samples (about a tenth); the report says so.
    #[arg(long)]
    quick: bool,
    /// Where to write the report (overwritten).
    #[arg(long, default_value = "BENCHMARKS.md")]
    out: PathBuf,
    /// Run only these items (comma separated, 1-16); the others keep their
    /// sections from the report already at --out (or are listed as not
    /// measured when it has none).
    #[arg(long, value_delimiter = ',')]
    only: Vec<u8>,
}

/// Sizes and sample counts of one run.
#[derive(Debug, Clone, Copy)]
pub struct Cfg {
    pub quick: bool,
}

impl Cfg {
    /// `full` normally, `quick` with `--quick`.
    pub fn pick<T>(&self, full: T, quick: T) -> T {
        if self.quick { quick } else { full }
    }
}

fn main() -> Result<()> {
    let mut argv = std::env::args_os().skip(1);
    match argv.next() {
        Some(a) if a == "__stamp" => return sched::stamp(argv.next()),
        Some(a) if a == "__relay" => return relay::serve(argv.next()),
        _ => {}
    }
    let args = Args::parse();
    // Each item chooses its homes' stores itself (SQLite, and PostgreSQL
    // for the rows that say so); the variable would move them all.
    if std::env::var(agency_config::store::STORE_URL_VAR).is_ok_and(|v| !v.trim().is_empty()) {
        anyhow::bail!(
            "{} is set: unset it; the bench puts each home's store where its rows say (SQLite, or a scratch PostgreSQL database on the server AGENCY_TEST_POSTGRES names)",
            agency_config::store::STORE_URL_VAR
        );
    }
    // Diagnostics of the in-process daemon, e.g. where a spawn's time goes:
    // AGENCY_BENCH_LOG=agency_supervisor=debug (stderr).
    if let Ok(filter) = std::env::var("AGENCY_BENCH_LOG") {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .init();
    }
    let cfg = Cfg { quick: args.quick };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("failed to build the tokio runtime")?;
    let started = Instant::now();
    let want = |n: u8| args.only.is_empty() || args.only.contains(&n);
    let mut sections: Vec<Section> = Vec::new();
    type Item = (u8, &'static str, fn(Cfg) -> Result<Vec<Section>>);
    let items: [Item; 16] = [
        (1, "1. MCP tool-call latency", |c| {
            util::block(latency::agency_vs_echo(c))
        }),
        (2, "2. Peer: official Python MCP SDK", |c| {
            util::block(latency::python_peer(c))
        }),
        (3, "3. Durable KB writes", writes::run),
        (4, "4. Scheduling latency", |c| util::block(sched::run(c))),
        (5, "5. Scale", |c| util::block(scale::run(c))),
        (6, "6. Many agents", |c| util::block(agents::run(c))),
        (7, "7. Storage per event", growth::run),
        (8, "8. Spawn with sandbox vs bare spawn", |c| {
            util::block(sandbox::run_item(c))
        }),
        (9, "9. Model gateway overhead", |c| {
            util::block(gateway::run(c))
        }),
        (10, "10. Budget check per tool call", |c| {
            util::block(budget::run(c))
        }),
        (
            11,
            "11. Warm agents: delivery to first model request",
            |c| util::block(warm::run(c)),
        ),
        (12, "12. Memory search", memory::run),
        (13, "13. Watching live runs", |c| {
            util::block(watching::run(c))
        }),
        (14, "14. Pipelines", |c| util::block(pipelines::run(c))),
        (15, "15. Learning loop", |c| util::block(learning::run(c))),
        (16, "16. Several daemons on one PostgreSQL store", |c| {
            util::block(daemons::run(c))
        }),
    ];
    // With --only, the other items' sections of the report already at
    // --out are kept as they are (rerunning some items updates just those).
    let earlier = if args.only.is_empty() {
        None
    } else {
        std::fs::read_to_string(&args.out)
            .ok()
            .map(|t| report::Earlier::parse(&t))
    };
    let _guard = rt.enter();
    for (n, title, f) in items {
        if !want(n) {
            match earlier.as_ref().and_then(|e| e.item(n)) {
                Some(text) => sections.push(Section {
                    kept: Some(text),
                    ..Section::new(title)
                }),
                None => sections.push(Section::not_measured(
                    title,
                    "not selected in this run (--only)",
                )),
            }
            continue;
        }
        eprintln!("agency-bench: running {title}");
        let t = Instant::now();
        match f(cfg) {
            Ok(mut s) => {
                if let Some(last) = s.last_mut() {
                    last.took = Some(t.elapsed());
                }
                sections.extend(s);
            }
            Err(e) => {
                eprintln!("agency-bench: {title} failed: {e:#}");
                sections.push(Section::not_measured(title, &format!("failed: {e:#}")));
            }
        }
    }
    let text = report::render(
        &sections,
        cfg,
        started.elapsed(),
        &args.only,
        earlier.as_ref(),
    )?;
    std::fs::write(&args.out, text)
        .with_context(|| format!("failed to write the report {}", args.out.display()))?;
    eprintln!(
        "agency-bench: wrote {} in {:.0} s",
        args.out.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
