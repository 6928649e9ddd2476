//! A stand-in for seed 002's weather API (`GET /current?location=…` →
//! `{"temp": number, "conditions": string}`) on 127.0.0.1, for the
//! WeatherAgency's end-to-end test and `agency demo --org`. It records
//! every request's path and query so that a test can assert what reached
//! it (or that nothing did).

use std::collections::BTreeMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::Router;
use axum::extract::{Query, State};
use axum::http::{StatusCode, Uri};
use axum::routing::get;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// The weather each known city has; any other location is a 404.
const CITIES: &[(&str, f64, &str)] = &[
    ("new york", 12.5, "light rain"),
    ("paris", 17.0, "sunny"),
    ("tokyo", 21.0, "cloudy"),
];

/// A running weather server. Dropping it stops the server.
#[derive(Debug)]
pub struct WeatherServer {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<String>>>,
    _stop: oneshot::Sender<()>,
}

impl WeatherServer {
    /// Starts on 127.0.0.1 at a free port.
    pub async fn start() -> io::Result<WeatherServer> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let app = Router::new()
            .route("/current", get(current))
            .fallback(
                |uri: Uri, State(seen): State<Arc<Mutex<Vec<String>>>>| async move {
                    record(&seen, &uri);
                    (
                        StatusCode::NOT_FOUND,
                        Json(json!({"error": "no such endpoint"})),
                    )
                },
            )
            .with_state(seen.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
        });
        Ok(WeatherServer {
            addr,
            seen,
            _stop: stop,
        })
    }

    /// `http://127.0.0.1:PORT`, the tool's base URL.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request's path and query, in arrival order.
    pub fn requests(&self) -> Vec<String> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

fn record(seen: &Mutex<Vec<String>>, uri: &Uri) {
    if let Ok(mut s) = seen.lock() {
        s.push(
            uri.path_and_query()
                .map_or_else(|| uri.path().to_owned(), |p| p.to_string()),
        );
    }
}

async fn current(
    State(seen): State<Arc<Mutex<Vec<String>>>>,
    uri: Uri,
    Query(q): Query<BTreeMap<String, String>>,
) -> (StatusCode, Json<Value>) {
    record(&seen, &uri);
    let Some(location) = q.get("location") else {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "the location query parameter is required"})),
        );
    };
    let wanted = location.trim().to_lowercase();
    match CITIES.iter().find(|(c, _, _)| *c == wanted) {
        Some((_, temp, conditions)) => (
            StatusCode::OK,
            Json(json!({"temp": temp, "conditions": conditions, "location": location})),
        ),
        None => (
            StatusCode::NOT_FOUND,
            Json(json!({"error": format!("no weather known for {location}")})),
        ),
    }
}
