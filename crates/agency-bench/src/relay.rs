//! A bare model relay, the floor of item 9b: `agency-bench __relay
//! UPSTREAM` listens on 127.0.0.1:0, prints its URL on stdout, and
//! forwards every `POST /model/NAME/PATH` to `UPSTREAM/PATH` with the HTTP
//! stack the daemon's gateway is built on (axum's server with TCP_NODELAY,
//! reqwest's client without redirects, a multi-threaded tokio runtime):
//! the request read whole, the answer's head copied and its body streamed
//! back. What it leaves out is what the gateway adds: the token check, the
//! metered fields, the reservation and the settlement, the usage tap.

use std::time::Duration;

use anyhow::{Context, Result};
use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::serve::ListenerExt;

/// The largest request the relay reads (the gateway's default cap is of
/// the same order).
const MAX_BODY: usize = 64 << 20;

#[derive(Clone)]
struct Upstream {
    root: String,
    client: reqwest::Client,
}

/// Run the relay until killed.
pub fn serve(upstream: Option<std::ffi::OsString>) -> Result<()> {
    let root = upstream
        .context("usage: agency-bench __relay UPSTREAM_URL")?
        .into_string()
        .map_err(|_| anyhow::anyhow!("failed to read the upstream URL: not UTF-8"))?;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(10))
        .build()
        .context("failed to build the relay's HTTP client")?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("failed to build the relay's runtime")?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .context("failed to bind the relay to 127.0.0.1:0")?;
        let addr = listener
            .local_addr()
            .context("failed to read the relay's address")?;
        println!("http://{addr}");
        let app = Router::new()
            .route("/model/{name}/{*path}", post(forward))
            .with_state(Upstream {
                root: root.trim_end_matches('/').to_owned(),
                client,
            });
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        axum::serve(listener, app)
            .await
            .context("failed to serve the relay")
    })
}

async fn forward(
    State(up): State<Upstream>,
    Path((_name, path)): Path<(String, String)>,
    req: Request,
) -> Response {
    let (parts, body) = req.into_parts();
    let Ok(body) = axum::body::to_bytes(body, MAX_BODY).await else {
        return (StatusCode::BAD_REQUEST, "failed to read the request").into_response();
    };
    let mut rq = up.client.post(format!("{}/{path}", up.root)).body(body);
    for name in [header::CONTENT_TYPE.as_str(), "anthropic-version"] {
        if let Some(v) = parts.headers.get(name) {
            rq = rq.header(name, v);
        }
    }
    let answer = match rq.send().await {
        Ok(a) => a,
        Err(e) => return (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let mut out = Response::builder().status(answer.status());
    for (k, v) in answer.headers() {
        if k != header::CONTENT_LENGTH && k != header::TRANSFER_ENCODING && k != header::CONNECTION
        {
            out = out.header(k, v);
        }
    }
    out.body(Body::from_stream(answer.bytes_stream()))
        .unwrap_or_else(|e| (StatusCode::BAD_GATEWAY, e.to_string()).into_response())
}
