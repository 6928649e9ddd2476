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
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreSettings {
    /// `postgres://…` or `postgresql://…`; empty: the home's SQLite store.
    pub url: String,
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

/// Check the file's value (the environment is read when the store opens).
pub fn validate(s: &StoreSettings) -> Result<(), String> {
    parse(&s.url, "store.url").map(drop)
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
