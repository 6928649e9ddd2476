//! Item 5b: the web dashboard on item 5's stores. The daemon (`agency
//! serve`, a process of its own) serves it on its loopback listener; the
//! bench logs in as the user does (a one-time URL from
//! `POST /v1/dashboard/login` on the admin socket, redeemed for the session
//! cookie) and loads the first page (Needs you) and the Organisation page
//! as a browser does: the page holds no data, so showing it takes the HTML,
//! its three assets (in parallel; the dashboard sends `no-store`, so a
//! browser fetches them every time), the session's CSRF token, then the
//! page's JSON view. Each is timed on the big store against the same on
//! the small store, in the same run.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::{Duration, Instant};

use agency_config::Home;
use anyhow::{Context, Result, bail};

use crate::report::{Row, Section};
use crate::util::{Pct, fmt_dur};

/// The goal: each page shows its data within this at p95.
const GOAL_P95: Duration = Duration::from_millis(300);
/// Time spent sampling one page on one store, at most (after 10 samples).
const BUDGET: Duration = Duration::from_secs(30);

/// `agency serve` on a home, as its own process; killed on drop.
pub struct Served {
    child: tokio::process::Child,
    pub pid: u32,
    pub addr: SocketAddr,
    home: Home,
}

impl Served {
    /// Start the daemon on `home` and wait until it answers.
    pub async fn start(bin: &std::path::Path, home: &Home) -> Result<Served> {
        let child = tokio::process::Command::new(bin)
            .arg("serve")
            .env("AGENCY_HOME", home.dir())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("failed to start agency serve")?;
        let pid = child.id().context("failed to read the daemon's pid")?;
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            // The pid tells this daemon's file from one a killed daemon left.
            if let Ok(Some(info)) = home.daemon_info()
                && info.pid == pid
            {
                return Ok(Served {
                    child,
                    pid,
                    addr: info.addr,
                    home: home.clone(),
                });
            }
            if Instant::now() > deadline {
                bail!("agency serve did not start within 120 s");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A client of the admin API (the home's Unix socket) and the token.
    pub fn admin(&self) -> Result<(reqwest::Client, String)> {
        let token = self
            .home
            .admin_token()
            .context("failed to read the admin token")?;
        let client = reqwest::Client::builder()
            .unix_socket(self.home.admin_socket_path())
            .build()
            .context("failed to build the REST client")?;
        Ok((client, token))
    }

    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// The dashboard's timings on one store.
#[derive(Debug, Clone, Copy)]
pub struct PageTimes {
    /// Needs you: the page with its data.
    needs: Pct,
    /// Organisation: the page with its data.
    org: Pct,
    /// The JSON views alone.
    needs_data: Pct,
    org_data: Pct,
    /// The cheapest route behind the session (`api/session`).
    floor: Pct,
    /// Cards on the Organisation page, and whether it said more exist.
    cards: usize,
    truncated: bool,
    org_bytes: usize,
}

/// A logged-in browser: its HTTP client, the cookie, the listener.
struct Browser {
    http: reqwest::Client,
    cookie: String,
    base: String,
}

impl Browser {
    async fn login(served: &Served) -> Result<Browser> {
        let (admin, token) = served.admin()?;
        let r = admin
            .post("http://localhost/v1/dashboard/login")
            .bearer_auth(&token)
            .send()
            .await
            .context("failed to ask for a dashboard login URL")?;
        if !r.status().is_success() {
            bail!("POST /v1/dashboard/login answered {}", r.status());
        }
        let login: serde_json::Value = r
            .json()
            .await
            .context("failed to read the dashboard login URL")?;
        let url = login["url"]
            .as_str()
            .context("the dashboard login answer has no URL")?;
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .build()
            .context("failed to build the dashboard client")?;
        let r = http
            .get(url)
            .send()
            .await
            .context("failed to open the dashboard login URL")?;
        let cookie = r
            .headers()
            .get(reqwest::header::SET_COOKIE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(str::to_owned)
            .with_context(|| {
                format!(
                    "the dashboard login URL answered {} without a session cookie",
                    r.status()
                )
            })?;
        Ok(Browser {
            http,
            cookie,
            base: format!("http://{}", served.addr),
        })
    }

    async fn get(&self, path: &str) -> Result<impl AsRef<[u8]> + use<>> {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .header(reqwest::header::COOKIE, &self.cookie)
            .send()
            .await
            .with_context(|| format!("failed to GET {path}"))?;
        if !r.status().is_success() {
            bail!("GET {path} answered {}", r.status());
        }
        r.bytes()
            .await
            .with_context(|| format!("failed to read the answer of GET {path}"))
    }

    /// What a browser fetches before the page shows `view`'s data.
    async fn page(&self, view: &str) -> Result<impl AsRef<[u8]> + use<>> {
        self.get("/dashboard/").await?;
        let (a, b, c) = tokio::join!(
            self.get("/dashboard/assets/app.css"),
            self.get("/dashboard/assets/app.js"),
            self.get("/dashboard/assets/pages.js"),
        );
        a?;
        b?;
        c?;
        self.get("/dashboard/api/session").await?;
        self.get(&format!("/dashboard/api/{view}")).await
    }
}

/// Up to `n` samples of `f` (after two to warm up), stopping after
/// [`BUDGET`] once there are 10.
async fn sample<F, Fut>(n: usize, mut f: F) -> Result<Pct>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<()>>,
{
    for _ in 0..2 {
        f().await?;
    }
    let started = Instant::now();
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        f().await?;
        v.push(t.elapsed());
        if v.len() >= 10 && started.elapsed() > BUDGET {
            break;
        }
    }
    Ok(Pct::of(&v))
}

/// Time the pages on the daemon `served`.
pub async fn time_pages(served: &Served, quick: bool) -> Result<PageTimes> {
    let browser = Browser::login(served).await?;
    let b = &browser;
    let n = if quick { 20 } else { 50 };
    eprintln!("agency-bench:   dashboard pages");
    let needs = sample(n, || async move { b.page("needs-you").await.map(drop) }).await?;
    let org = sample(n, || async move { b.page("org").await.map(drop) }).await?;
    let needs_data = sample(n, || async move {
        b.get("/dashboard/api/needs-you").await.map(drop)
    })
    .await?;
    let org_data = sample(
        n,
        || async move { b.get("/dashboard/api/org").await.map(drop) },
    )
    .await?;
    let floor = sample(n, || async move {
        b.get("/dashboard/api/session").await.map(drop)
    })
    .await?;
    let body = b.get("/dashboard/api/org").await?;
    let v: serde_json::Value =
        serde_json::from_slice(body.as_ref()).context("failed to parse the Organisation view")?;
    let cards = v["cards"].as_array().map_or(0, Vec::len);
    if cards == 0 {
        bail!("the Organisation view shows no handler: {v:.200}");
    }
    let needs_body = b.get("/dashboard/api/needs-you").await?;
    let nv: serde_json::Value = serde_json::from_slice(needs_body.as_ref())
        .context("failed to parse the Needs you view")?;
    if !nv["approvals"].is_array() {
        bail!("the Needs you view has no approvals list");
    }
    Ok(PageTimes {
        needs,
        org,
        needs_data,
        org_data,
        floor,
        cards,
        truncated: v["truncated"].as_bool().unwrap_or(false),
        org_bytes: body.as_ref().len(),
    })
}

/// The section of item 5b.
pub fn section(
    big: &PageTimes,
    small: &PageTimes,
    big_name: &str,
    small_name: &str,
    quick: bool,
) -> Section {
    let mut s = Section::new(format!(
        "5b. Dashboard pages on the scale store ({big_name})"
    ));
    let on_small = format!("same on {small_name}");
    let rows = [
        (
            "Needs you (first page), showing its data, p50",
            big.needs.p50,
            small.needs.p50,
        ),
        (
            "Needs you (first page), showing its data, p95",
            big.needs.p95,
            small.needs.p95,
        ),
        (
            "Organisation page, showing its data, p50",
            big.org.p50,
            small.org.p50,
        ),
        (
            "Organisation page, showing its data, p95",
            big.org.p95,
            small.org.p95,
        ),
        (
            "… of which its view (GET /dashboard/api/org alone), p95",
            big.org_data.p95,
            small.org_data.p95,
        ),
        (
            "… Needs you's view (GET /dashboard/api/needs-you alone), p95",
            big.needs_data.p95,
            small.needs_data.p95,
        ),
        (
            "floor: the cheapest dashboard route (GET /dashboard/api/session), p50",
            big.floor.p50,
            small.floor.p50,
        ),
    ];
    for (what, b, sm) in rows {
        s.rows.push(Row::times(what, b, (&on_small, sm)));
    }
    let verdict = |p: Duration| if p < GOAL_P95 { "meets" } else { "misses" };
    s.shows = format!(
        "how long the user waits for the dashboard to show data on a large organisation: Needs you {} the goal of p95 under 300 ms ({}), the Organisation page {} it ({}); the ratios say how much of that the store's size adds.",
        verdict(big.needs.p95),
        fmt_dur(big.needs.p95),
        verdict(big.org.p95),
        fmt_dur(big.org.p95),
    );
    s.notes.push(format!(
        "\"showing its data\": what a browser fetches before the page shows anything — GET /dashboard/ (the HTML, which holds no data), its three assets in parallel (app.css, app.js, pages.js; every answer is `no-store`, so a browser fetches them each time), GET /dashboard/api/session (the CSRF token, read before the first view), then the page's JSON view (api/needs-you or api/org) — over keep-alive connections with the session cookie, from this process to `agency serve` (its own process, idle, no agents), after two loads to warm up; up to {} loads per page or 30 s. Parsing the JSON and drawing the page in a browser are not included. The live stream the page opens beside its data is not waited for.",
        if quick { 20 } else { 50 }
    ));
    s.notes.push(format!(
        "the Organisation view on the big store lists {} handler cards{} ({} KiB of JSON); p50 of the views alone, big/small: needs-you {} / {}, org {} / {}. Both stores hold one logged event per filler outcome (dated a day back), as a store that grew through the service would.",
        big.cards,
        if big.truncated { " (truncated: more exist)" } else { "" },
        big.org_bytes / 1024,
        fmt_dur(big.needs_data.p50),
        fmt_dur(small.needs_data.p50),
        fmt_dur(big.org_data.p50),
        fmt_dur(small.org_data.p50),
    ));
    if quick {
        s.notes
            .push("quick mode: item 5's quick stores, 20 loads per page.".to_owned());
    }
    s
}
