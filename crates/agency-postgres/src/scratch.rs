//! Scratch databases for tests and benchmarks: each run makes its own
//! database on a PostgreSQL server and drops it when done, so runs never
//! see each other's rows and leave nothing behind.
//!
//! The server comes from `AGENCY_TEST_POSTGRES` (a URL of a database to
//! connect to for `CREATE DATABASE`), by default the local server's `test`
//! database; `AGENCY_TEST_POSTGRES=off` says there is none.

use agency_store::StoreError;

use crate::conn::Conn;
use crate::convert::Ctx;

/// The server tests run against unless told otherwise.
pub const DEFAULT_ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// The URL of the server's administrative database, or `None` when the
/// environment says there is no server (`AGENCY_TEST_POSTGRES=off`).
pub fn admin_url() -> Option<String> {
    match std::env::var("AGENCY_TEST_POSTGRES") {
        Ok(v) if v == "off" => None,
        Ok(v) if !v.is_empty() => Some(v),
        _ => Some(DEFAULT_ADMIN_URL.to_owned()),
    }
}

/// A database made for one test, dropped (with any connection still open
/// to it) when this is dropped.
#[derive(Debug)]
pub struct ScratchDb {
    admin: String,
    name: String,
    url: String,
}

/// `url` with its database name replaced by `name`.
fn with_database(url: &str, name: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("postgres", url));
    let (authority, tail) = rest.split_once('/').unwrap_or((rest, ""));
    let query = tail.split_once('?').map(|(_, q)| q);
    match query {
        Some(q) => format!("{scheme}://{authority}/{name}?{q}"),
        None => format!("{scheme}://{authority}/{name}"),
    }
}

fn admin(url: &str, sql: &str) -> Result<(), StoreError> {
    let op = || format!("run `{sql}` on the PostgreSQL server at {url}");
    let config: tokio_postgres::Config = url
        .parse()
        .map_err(|e| StoreError::backend(op(), format!("not a PostgreSQL URL: {e}")))?;
    let mut conn = Conn::connect(&config).map_err(|e| StoreError::backend(op(), e.to_string()))?;
    conn.batch(sql).ctx(op)
}

impl ScratchDb {
    /// Create a fresh, empty database on the server `admin_url` reaches.
    pub fn create(admin_url: &str) -> Result<ScratchDb, StoreError> {
        let name = format!("agency_t_{}", uuid::Uuid::new_v4().simple());
        admin(admin_url, &format!("CREATE DATABASE {name}"))?;
        Ok(ScratchDb {
            admin: admin_url.to_owned(),
            url: with_database(admin_url, &name),
            name,
        })
    }

    /// The URL of the scratch database.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for ScratchDb {
    fn drop(&mut self) {
        // Best effort: a database left behind costs disk, not correctness.
        let _ = admin(
            &self.admin,
            &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn the_database_name_is_replaced_and_options_kept() {
        let cases = [
            ("postgres://u@h:5432/test", "postgres://u@h:5432/x"),
            (
                "postgres://u@h/test?sslmode=disable",
                "postgres://u@h/x?sslmode=disable",
            ),
            ("postgresql://h", "postgresql://h/x"),
        ];
        for (url, want) in cases {
            assert_eq!(with_database(url, "x"), want, "{url}");
        }
    }
}
