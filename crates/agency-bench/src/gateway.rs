//! Item 9: what the model gateway adds to a streamed model
//! call. The same streamed Anthropic Messages request goes to the
//! scripted model server directly (the baseline) and through the daemon's
//! `/model/NAME/v1/messages` (agent token check, the service's
//! reservation, forwarding with the key, the usage read off the stream,
//! and the usage row written after the answer), interleaved in rounds so
//! that drift on a shared machine hits both alike. Time to first byte is
//! until the first chunk of the answer's body; total until its end.
//!
//! The same again with a large request (about 256 KiB: a system prompt,
//! tool schemas and a long conversation, `stream` as the last field, the
//! size of a coding agent's request late in its run), since the gateway
//! reads every request to find the fields it meters by.

use std::time::{Duration, Instant};

use agency_core::Principal;
use anyhow::{Context, Result, bail};

use crate::Cfg;
use crate::report::{Row, Section};
use crate::util::{Pct, fmt_dur, new_home};

const WARMUP: usize = 50;
const ROUNDS: usize = 10;
const BODY: &str = r#"{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hello"}]}"#;

/// A request of about `kib` KiB: a system prompt, tool schemas and turns
/// of a conversation whose texts have quotes and newlines to escape, with
/// `stream` last.
pub(crate) fn large_body(kib: usize) -> String {
    let text = "The tool said: \"done\".\nNext, read kb://notes and {summarise} [it]. ".repeat(8);
    let tools: Vec<serde_json::Value> = (0..40)
        .map(|i| {
            serde_json::json!({"name": format!("tool_{i}"), "description": text,
                "input_schema": {"type": "object", "properties": {"file": {"type": "string"}, "limit": {"type": "integer"}}}})
        })
        .collect();
    let mut messages = Vec::new();
    let mut size = 0;
    while size < kib << 10 {
        messages
            .push(serde_json::json!({"role": "user", "content": [{"type": "text", "text": text}]}));
        messages.push(
            serde_json::json!({"role": "assistant", "content": [{"type": "text", "text": text}]}),
        );
        size += 2 * text.len() + 80;
    }
    serde_json::json!({"model": "claude-sonnet-4-5", "max_tokens": 64, "system": text,
        "tools": tools, "messages": messages, "stream": true})
    .to_string()
}

/// One streamed call: (time to first byte, total).
pub(crate) async fn call(
    client: &reqwest::Client,
    url: &str,
    key: Option<&str>,
    body: &str,
) -> Result<(Duration, Duration)> {
    let t = Instant::now();
    let mut rq = client
        .post(url)
        .header("content-type", "application/json")
        .header("anthropic-version", "2023-06-01")
        .body(body.to_owned());
    if let Some(k) = key {
        rq = rq.header("x-api-key", k);
    }
    let mut r = rq.send().await.context("failed to send the model call")?;
    if !r.status().is_success() {
        bail!("the model call failed: HTTP {}", r.status());
    }
    let mut first = None;
    let mut bytes = 0;
    while let Some(c) = r.chunk().await.context("failed to read the answer")? {
        first.get_or_insert_with(|| t.elapsed());
        bytes += c.len();
    }
    if bytes == 0 {
        bail!("the model call answered nothing");
    }
    Ok((first.unwrap_or_default(), t.elapsed()))
}

/// Wait until the store holds `want` model calls (settlements commit a
/// moment after the answer ends); fail after 30 s with how many it has.
pub(crate) async fn metered(svc: std::sync::Arc<agency_service::System>, want: i64) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let s = svc.clone();
        let calls = tokio::task::spawn_blocking(move || s.cost_tree(Principal::User, None))
            .await
            .context("failed to join the cost task")??
            .subtree
            .calls;
        if calls == want {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the gateway recorded {calls} model calls of {want}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub async fn run(cfg: Cfg) -> Result<Vec<Section>> {
    let n = cfg.pick(2000, 200);
    let script = agency_testkit::Script::from_json(
        r#"{"scenarios": [], "fallback": {"text": "A short streamed answer of a few words."}}"#,
    )
    .context("failed to parse the benchmark's model script")?;
    let model = agency_testkit::ModelServer::start(script)
        .await
        .context("failed to start the scripted model server")?;
    let dir = tempfile::tempdir().context("failed to create a temporary directory")?;
    let home = new_home(
        &dir.path().join("home"),
        &format!(
            "[models.up]\napi = \"anthropic\"\nbase_url = {:?}\n",
            model.base_url()
        ),
    )?;
    let daemon = agency_daemon::Daemon::start(&home)
        .await
        .context("failed to start the daemon")?;
    let svc = daemon.service().clone();
    let token = tokio::task::spawn_blocking(move || {
        let root = svc
            .root_handler()?
            .context("failed to find the root handler")?;
        anyhow::Ok(svc.token_mint(Principal::User, root, None)?.token)
    })
    .await
    .context("failed to join the setup task")??;
    let client = reqwest::Client::builder()
        .tcp_nodelay(true)
        .build()
        .context("failed to build the HTTP client")?;
    let direct_url = format!("{}/v1/messages", model.base_url());
    let gateway_url = format!("http://{}/model/up/v1/messages", daemon.addr());
    let large = large_body(256);
    for _ in 0..WARMUP {
        call(&client, &direct_url, None, BODY).await?;
        call(&client, &gateway_url, Some(&token), BODY).await?;
        call(&client, &direct_url, None, &large).await?;
        call(&client, &gateway_url, Some(&token), &large).await?;
    }
    let (mut d_first, mut d_total, mut g_first, mut g_total) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut dl_first, mut gl_first) = (Vec::new(), Vec::new());
    let large_n = n / 4;
    for _ in 0..ROUNDS {
        for _ in 0..n / ROUNDS {
            let (f, t) = call(&client, &direct_url, None, BODY).await?;
            d_first.push(f);
            d_total.push(t);
        }
        for _ in 0..n / ROUNDS {
            let (f, t) = call(&client, &gateway_url, Some(&token), BODY).await?;
            g_first.push(f);
            g_total.push(t);
        }
        for _ in 0..large_n / ROUNDS {
            dl_first.push(call(&client, &direct_url, None, &large).await?.0);
        }
        for _ in 0..large_n / ROUNDS {
            gl_first.push(call(&client, &gateway_url, Some(&token), &large).await?.0);
        }
    }
    // Every call through the gateway is metered: check that it was, so the
    // figure is of the whole path and not of a gateway that skipped it.
    let want = (2 * WARMUP + n / ROUNDS * ROUNDS + large_n / ROUNDS * ROUNDS) as i64;
    metered(daemon.service().clone(), want).await?;
    daemon.stop().await.context("failed to stop the daemon")?;
    model.shutdown().await;
    let (df, dt, gf, gt) = (
        Pct::of(&d_first),
        Pct::of(&d_total),
        Pct::of(&g_first),
        Pct::of(&g_total),
    );
    let (dlf, glf) = (Pct::of(&dl_first), Pct::of(&gl_first));
    let mut s = Section::new("9. Model gateway: a streamed call through the daemon vs direct");
    s.rows.push(Row::times(
        "time to first byte p50",
        gf.p50,
        ("direct to the model server p50", df.p50),
    ));
    s.rows.push(Row::times(
        "time to first byte p99",
        gf.p99,
        ("direct p99", df.p99),
    ));
    s.rows.push(Row::times(
        "whole streamed answer p50",
        gt.p50,
        ("direct p50", dt.p50),
    ));
    s.rows.push(Row::times(
        "whole streamed answer p99",
        gt.p99,
        ("direct p99", dt.p99),
    ));
    s.rows.push(Row::times(
        format!("{} KiB request, time to first byte p50", large.len() >> 10),
        glf.p50,
        ("direct p50, same request", dlf.p50),
    ));
    s.rows.push(Row::times(
        format!("{} KiB request, time to first byte p99", large.len() >> 10),
        glf.p99,
        ("direct p99, same request", dlf.p99),
    ));
    s.shows = format!(
        "what reaching the model through Agency costs per call: token check, reservation, a second HTTP hop and the usage tap add {} to the first byte and {} to the whole answer at p50; a real model's own latency (hundreds of ms) dwarfs both. With a {} KiB request the first byte comes {} later than direct at p50 (reading and forwarding the request, and finding its metered fields: `crates/agency-gateway/src/head.rs`).",
        fmt_dur(gf.p50.saturating_sub(df.p50)),
        fmt_dur(gt.p50.saturating_sub(dt.p50)),
        large.len() >> 10,
        fmt_dur(glf.p50.saturating_sub(dlf.p50))
    );
    s.notes.push(format!(
        "{} streamed calls each way after {WARMUP} warm-up calls each ({} with the large request), interleaved in {ROUNDS} rounds; daemon in this process (`Daemon::start`), scripted model server (agency-testkit) on 127.0.0.1, reqwest client with TCP_NODELAY; every gateway call's usage row was checked to be written.",
        gf.n,
        glf.n
    ));
    Ok(vec![s, crate::gateway_cpu::run(cfg).await?])
}
