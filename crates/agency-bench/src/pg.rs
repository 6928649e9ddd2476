//! PostgreSQL for the items that report both store backends (1, 3 and 4):
//! a throwaway database per run on the server `AGENCY_TEST_POSTGRES` names
//! (by default the local one, see `agency_postgres::scratch`), a home's
//! `[store]` section pointing at it, and the line an item prints instead of
//! its PostgreSQL rows when there is no server to reach.

use agency_postgres::scratch::{ScratchDb, admin_url};

/// The server the scratch databases are made on, for messages: `host:port`,
/// never a password.
pub fn server() -> String {
    let Some(url) = admin_url() else {
        return "(none: AGENCY_TEST_POSTGRES=off)".to_owned();
    };
    let Ok(config) = url.parse::<tokio_postgres::Config>() else {
        return "(an unparsable AGENCY_TEST_POSTGRES)".to_owned();
    };
    let host = config
        .get_hosts()
        .first()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(h) => h.clone(),
            tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
        })
        .unwrap_or_else(|| "localhost".into());
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!("{host}:{port}")
}

/// A fresh database on the server, or why the PostgreSQL rows are not
/// measured (the item goes on with its SQLite rows).
pub fn scratch() -> Result<ScratchDb, String> {
    let Some(admin) = admin_url() else {
        return Err("not measured: no PostgreSQL server (AGENCY_TEST_POSTGRES=off)".to_owned());
    };
    ScratchDb::create(&admin).map_err(|e| {
        // The URL may carry a password: name the server by host and port.
        let why = e.to_string().replace(&admin, &server());
        format!("not measured: no PostgreSQL server at {} ({why})", server())
    })
}

/// The `agency.toml` lines that put a home's store in the database `url`.
pub fn store_config(url: &str) -> String {
    format!("[store]\nurl = {url:?}\n")
}

/// The server's version (`SHOW server_version`) and its durability
/// settings, for the notes; empty when it cannot be read. Runs on a thread
/// of its own, so it may be called from async code.
pub fn describe(url: &str) -> String {
    let url = url.to_owned();
    let run = move || -> Result<String, String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        rt.block_on(async {
            let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .map_err(|e| e.to_string())?;
            let task = tokio::spawn(conn);
            let mut parts = Vec::new();
            for name in [
                "server_version",
                "synchronous_commit",
                "fsync",
                "wal_sync_method",
                "commit_delay",
            ] {
                let row = client
                    .query_one(&format!("SHOW {name}"), &[])
                    .await
                    .map_err(|e| e.to_string())?;
                let v: String = row.try_get(0).map_err(|e| e.to_string())?;
                parts.push(format!("{name} {v}"));
            }
            drop(client);
            let _ = task.await;
            Ok(parts.join(", "))
        })
    };
    std::thread::spawn(run)
        .join()
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default()
}
