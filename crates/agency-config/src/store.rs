//! `[store]` in `agency.toml`: where the store lives.
//!
//! Without a URL (the default) it is the home's own SQLite database
//! (`agency.db`) and blob directory (`blobs/`): nothing to install. With
//! `url = "postgres://user@host:port/db"` it is a PostgreSQL database that
//! holds the rows and the blobs, and that several daemons may share.
//! `AGENCY_STORE_URL` wins over the file (a password is better there, or
//! in the server's own authentication, than in a file).

use serde::{Deserialize, Serialize};

/// `[store]` as written in the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreSettings {
    /// `postgres://…` or `postgresql://…`; empty: the home's SQLite store.
    pub url: String,
    /// With a PostgreSQL store, how long a daemon's claim on a handler
    /// lasts without renewal: another daemon takes the handler over this
    /// long after its daemon died or stalled.
    pub lease_ms: u64,
    /// How often a daemon renews its leases (and looks for work other
    /// daemons left or delivered); well under `lease_ms`.
    pub heartbeat_ms: u64,
}

impl Default for StoreSettings {
    fn default() -> Self {
        StoreSettings {
            url: String::new(),
            lease_ms: 15_000,
            heartbeat_ms: 5_000,
        }
    }
}

/// Where the store is, once the file and the environment are read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreLocation {
    /// The home's `agency.db` and `blobs/`.
    Sqlite,
    /// A PostgreSQL database, by URL.
    Postgres(String),
}

/// The environment variable that names the store, over the file.
pub const STORE_URL_VAR: &str = "AGENCY_STORE_URL";

fn parse(url: &str, origin: &str) -> Result<StoreLocation, String> {
    let url = url.trim();
    if url.is_empty() {
        return Ok(StoreLocation::Sqlite);
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok(StoreLocation::Postgres(url.to_owned()));
    }
    // Never echo the value: it may hold a password.
    Err(format!(
        "{origin} is not a PostgreSQL URL (postgres://user@host:port/database); \
         leave it empty for the home's SQLite store"
    ))
}

/// Check the file's values (the environment is read when the store opens).
pub fn validate(s: &StoreSettings) -> Result<(), String> {
    parse(&s.url, "store.url")?;
    if !(100..=600_000).contains(&s.heartbeat_ms) {
        return Err(format!(
            "store.heartbeat_ms = {} is not between 100 and 600000",
            s.heartbeat_ms
        ));
    }
    if s.lease_ms < 3 * s.heartbeat_ms || s.lease_ms > 3_600_000 {
        return Err(format!(
            "store.lease_ms = {} must be at least three heartbeats (3 × store.heartbeat_ms = {}) and at most 3600000, so that a live daemon never loses a lease between two renewals",
            s.lease_ms,
            3 * s.heartbeat_ms
        ));
    }
    Ok(())
}

impl StoreSettings {
    /// Where the store is: `AGENCY_STORE_URL` when set and not empty, else
    /// the file's `url`.
    pub fn location(&self) -> Result<StoreLocation, String> {
        match std::env::var(STORE_URL_VAR) {
            Ok(v) if !v.trim().is_empty() => parse(&v, STORE_URL_VAR),
            _ => parse(&self.url, "store.url"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_and_heartbeat_are_checked_together() {
        let with = |lease_ms, heartbeat_ms| StoreSettings {
            lease_ms,
            heartbeat_ms,
            ..StoreSettings::default()
        };
        assert_eq!(validate(&StoreSettings::default()), Ok(()));
        assert_eq!(validate(&with(300, 100)), Ok(()));
        let e = validate(&with(200, 100)).unwrap_err();
        assert!(
            e.contains("store.lease_ms = 200") && e.contains("300"),
            "{e}"
        );
        assert!(
            validate(&with(15_000, 50))
                .unwrap_err()
                .contains("store.heartbeat_ms")
        );
        assert!(validate(&with(4_000_000, 5_000)).is_err());
    }

    #[test]
    fn urls_are_sqlite_postgres_or_refused_without_echoing_them() {
        let cases = [
            ("", Some(StoreLocation::Sqlite)),
            ("  ", Some(StoreLocation::Sqlite)),
            (
                "postgres://a@h/db",
                Some(StoreLocation::Postgres("postgres://a@h/db".into())),
            ),
            (
                "postgresql://h/db",
                Some(StoreLocation::Postgres("postgresql://h/db".into())),
            ),
            ("mysql://u:secret@h/db", None),
            ("/var/lib/agency.db", None),
        ];
        for (url, want) in cases {
            let got = parse(url, "store.url");
            match want {
                Some(w) => assert_eq!(got, Ok(w), "{url}"),
                None => {
                    let e = got.expect_err(url);
                    assert!(e.contains("store.url") && !e.contains("secret"), "{e}");
                }
            }
        }
    }
}
