//! The Agency home (`$AGENCY_HOME`, default `~/.agency`): configuration,
//! store, blobs, the admin token (mode 0600) and, while a daemon runs, the
//! address file the CLI reads.
//!
//! ```text
//! agency.toml    configuration (commented template written by init)
//! agency.db      the SQLite store (+ -wal, -shm)
//! blobs/         content-addressed KB contents
//! admin.token    the user's bearer token for the REST API (0600)
//! daemon.json    {"addr": "127.0.0.1:PORT", "pid": N} while serving
//! daemon.sock    the REST API (`/v1`), a Unix socket (0600) while serving
//! daemon.lock    held (flock) by the running daemon
//! ```

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::net::SocketAddr;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agency_core::HandlerId;
use agency_postgres::PgStore;
use agency_service::{Service, ServiceBuilder, ServiceConfig, System, SystemClock};
use agency_store::{BlobStore, FsBlobStore, SqliteStore, Store};
use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::error::ConfigError;
use crate::store::StoreLocation;
use crate::template::TEMPLATE;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Home {
    dir: PathBuf,
}

/// What `init` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InitReport {
    pub home: PathBuf,
    /// False when the home existed already (nothing was overwritten).
    pub created: bool,
    pub root_handler: HandlerId,
}

/// Written by a serving daemon for the CLI to find it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonInfo {
    pub addr: SocketAddr,
    pub pid: u32,
}

impl Home {
    pub fn new(dir: impl Into<PathBuf>) -> Home {
        Home { dir: dir.into() }
    }

    /// `explicit`, else `$AGENCY_HOME`, else `$HOME/.agency`.
    pub fn resolve(explicit: Option<PathBuf>) -> Result<Home, ConfigError> {
        if let Some(d) = explicit {
            return Ok(Home::new(d));
        }
        if let Some(d) = std::env::var_os("AGENCY_HOME").filter(|d| !d.is_empty()) {
            return Ok(Home::new(d));
        }
        let home = std::env::var_os("HOME")
            .filter(|d| !d.is_empty())
            .ok_or(ConfigError::NoHomeDir)?;
        Ok(Home::new(PathBuf::from(home).join(".agency")))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn config_path(&self) -> PathBuf {
        self.dir.join("agency.toml")
    }
    pub fn db_path(&self) -> PathBuf {
        self.dir.join("agency.db")
    }
    pub fn blobs_dir(&self) -> PathBuf {
        self.dir.join("blobs")
    }
    pub fn admin_token_path(&self) -> PathBuf {
        self.dir.join("admin.token")
    }
    pub fn daemon_info_path(&self) -> PathBuf {
        self.dir.join("daemon.json")
    }
    /// The Unix socket that serves `/v1`. The admin API is reachable only
    /// here: a file in a home only its owner can write, so the CLI cannot
    /// send the admin token to a stranger's listener (a stale `daemon.json`
    /// naming a port someone else now holds).
    pub fn admin_socket_path(&self) -> PathBuf {
        self.dir.join("daemon.sock")
    }

    /// The admin socket, checked before the admin token is sent through
    /// it: `None` when there is none (no daemon); an error when the home
    /// or the socket could have been put there by another user (the home
    /// writable by group or others, the socket not a socket or not owned
    /// by the home's owner).
    pub fn checked_admin_socket(&self) -> Result<Option<PathBuf>, ConfigError> {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let path = self.admin_socket_path();
        let dir = fs::metadata(&self.dir).map_err(|e| ConfigError::io("inspect", &self.dir, e))?;
        if dir.mode() & 0o022 != 0 {
            return Err(ConfigError::Invalid {
                path: self.dir.clone(),
                message: "the Agency home is writable by other users, so its daemon socket cannot be trusted; run `chmod 700` on it".to_owned(),
            });
        }
        let meta = match fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(ConfigError::io("inspect", &path, e)),
        };
        if !meta.file_type().is_socket() || meta.uid() != dir.uid() {
            return Err(ConfigError::Invalid {
                path,
                message: "this is not the home daemon's socket (not a socket, or owned by another user); stop whatever made it and remove it".to_owned(),
            });
        }
        Ok(Some(path))
    }

    /// Whether a daemon holds this home's lock (is running, or still
    /// stopping). Taking the lock to find out releases it at once.
    pub fn daemon_holds_lock(&self) -> bool {
        let Ok(f) = File::options().write(true).open(self.lock_path()) else {
            return false;
        };
        f.try_lock().is_err()
    }

    /// Held (flock) by the running daemon.
    pub fn lock_path(&self) -> PathBuf {
        self.dir.join("daemon.lock")
    }

    /// Whether `init` has run here.
    pub fn exists(&self) -> bool {
        self.config_path().is_file() && self.admin_token_path().is_file()
    }

    /// Create the home: directory (0700), commented configuration, admin
    /// token (0600), store with the root handler. Existing files are kept,
    /// so running it twice is harmless.
    pub fn init(&self) -> Result<InitReport, ConfigError> {
        let created = !self.exists();
        fs::create_dir_all(&self.dir)
            .map_err(|e| ConfigError::io("create Agency home", &self.dir, e))?;
        fs::set_permissions(&self.dir, fs::Permissions::from_mode(0o700))
            .map_err(|e| ConfigError::io("restrict permissions of", &self.dir, e))?;
        write_new(&self.config_path(), TEMPLATE.as_bytes(), 0o644)?;
        let token = format!(
            "agency_admin_{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        write_new(
            &self.admin_token_path(),
            format!("{token}\n").as_bytes(),
            0o600,
        )?;
        let svc = self.open_service()?;
        let root_handler = svc.bootstrap()?;
        Ok(InitReport {
            home: self.dir.clone(),
            created,
            root_handler,
        })
    }

    /// `agency init` on a new home: pin a TCP port that is free now in
    /// `[server] port` of the template it wrote, so that every start of the
    /// daemon listens where agents and outside callers last found it.
    /// Chosen below the kernel's ephemeral range, where no outgoing
    /// connection of any program can take it meanwhile. Returns the port;
    /// 0 (the file unchanged) when none was found free.
    pub fn pin_free_port(&self) -> Result<u16, ConfigError> {
        let path = self.config_path();
        let text = fs::read_to_string(&path).map_err(|e| ConfigError::io("read", &path, e))?;
        let Some(port) = free_port() else {
            return Ok(0);
        };
        let pinned = text.replacen("\nport = 0\n", &format!("\nport = {port}\n"), 1);
        if pinned == text {
            return Ok(0);
        }
        let tmp = self.dir.join("agency.toml.tmp");
        fs::write(&tmp, pinned).map_err(|e| ConfigError::io("write", &tmp, e))?;
        fs::rename(&tmp, &path).map_err(|e| ConfigError::io("write", &path, e))?;
        Ok(port)
    }

    /// Read the configuration; a missing home is a clear error.
    pub fn config(&self) -> Result<Config, ConfigError> {
        if !self.exists() {
            return Err(ConfigError::NoHome(self.dir.clone()));
        }
        Config::load(&self.config_path())
    }

    /// The admin token (refused if the file is readable by others).
    pub fn admin_token(&self) -> Result<String, ConfigError> {
        let path = self.admin_token_path();
        if !path.is_file() {
            return Err(ConfigError::NoHome(self.dir.clone()));
        }
        let meta = fs::metadata(&path).map_err(|e| ConfigError::io("read", &path, e))?;
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(ConfigError::Invalid {
                path,
                message: "the admin token is readable by other users; run `chmod 600` on it"
                    .to_owned(),
            });
        }
        let text = fs::read_to_string(&path).map_err(|e| ConfigError::io("read", &path, e))?;
        Ok(text.trim().to_owned())
    }

    /// The running daemon's address, if `daemon.json` exists (it may be
    /// stale after a crash: callers confirm by connecting).
    pub fn daemon_info(&self) -> Result<Option<DaemonInfo>, ConfigError> {
        let path = self.daemon_info_path();
        match fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| ConfigError::Invalid {
                    path,
                    message: e.to_string(),
                }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(ConfigError::io("read", &path, e)),
        }
    }

    /// Open the store and blobs of this home as a service.
    pub fn open_service(&self) -> Result<System, ConfigError> {
        Ok(self.service_builder()?.build())
    }

    /// The service of this home, configured from its agency.toml, for the
    /// caller to add the settings it read (the daemon: policy, memory,
    /// declared names, embedder) before building it.
    pub fn service_builder(&self) -> Result<ServiceBuilder, ConfigError> {
        let cfg = Config::load(&self.config_path())?;
        let (store, blobs) = self.open_store(&cfg)?;
        Ok(
            Service::builder(store, blobs, Arc::new(SystemClock)).config(ServiceConfig {
                limits: cfg.limits(),
                retention: cfg.retention(),
                org_api: cfg.agency_api.service_limits(),
                watch: cfg.watch.service(),
            }),
        )
    }

    /// The store and blob store `[store]` (or `AGENCY_STORE_URL`) names:
    /// this home's SQLite database and blob directory, or a PostgreSQL
    /// database holding both.
    pub fn open_store(&self, cfg: &Config) -> Result<StoreParts, ConfigError> {
        let location = cfg
            .store
            .location()
            .map_err(|message| ConfigError::Invalid {
                path: self.config_path(),
                message,
            })?;
        Ok(match location {
            StoreLocation::Sqlite => (
                Arc::new(SqliteStore::open(&self.db_path())?),
                Arc::new(FsBlobStore::open(self.blobs_dir())?),
            ),
            StoreLocation::Postgres(url) => {
                let store = PgStore::open(&url)?;
                let blobs = store.blobs();
                (Arc::new(store), Arc::new(blobs))
            }
        })
    }

    /// Written by the daemon once it listens.
    pub fn write_daemon_info(&self, info: &DaemonInfo) -> Result<(), ConfigError> {
        let path = self.daemon_info_path();
        let tmp = self.dir.join("daemon.json.tmp");
        let text = serde_json::to_string(info).map_err(|e| ConfigError::Invalid {
            path: path.clone(),
            message: e.to_string(),
        })?;
        fs::write(&tmp, text).map_err(|e| ConfigError::io("write", &tmp, e))?;
        fs::rename(&tmp, &path).map_err(|e| ConfigError::io("write", &path, e))
    }

    /// Removed by the daemon as it stops.
    pub fn remove_daemon_info(&self) {
        let _ = fs::remove_file(self.daemon_info_path());
        let _ = fs::remove_file(self.admin_socket_path());
    }
}

/// A store and the blob store beside it.
pub type StoreParts = (Arc<dyn Store>, Arc<dyn BlobStore>);

/// A port of 127.0.0.1 that is free now, outside the kernel's ephemeral
/// range (`ip_local_port_range`; 32768–60999 when unreadable), picked at
/// random so that homes made at once do not pick the same.
fn free_port() -> Option<u16> {
    let (low, high) = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|t| {
            let mut it = t.split_whitespace().map(str::parse::<u32>);
            Some((it.next()?.ok()?, it.next()?.ok()?))
        })
        .unwrap_or((32768, 60999));
    // Above the well-known and most registered services' ports.
    let below = 20_000..low.min(65_536);
    let above = high.saturating_add(1).max(20_000)..65_536;
    let (nb, na) = (below.len() as u128, above.len() as u128);
    if nb + na == 0 {
        return None;
    }
    for _ in 0..64 {
        let r = uuid::Uuid::new_v4().as_u128() % (nb + na);
        let candidate = if r < nb {
            u128::from(below.start) + r
        } else {
            u128::from(above.start) + (r - nb)
        };
        let port = u16::try_from(candidate).ok()?;
        if std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, port)).is_ok() {
            return Some(port);
        }
    }
    None
}

/// Create a file with `content` unless it exists.
fn write_new(path: &Path, content: &[u8], mode: u32) -> Result<(), ConfigError> {
    match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
    {
        Ok(mut f) => {
            f.write_all(content)
                .map_err(|e| ConfigError::io("write", path, e))?;
            f.sync_all().map_err(|e| ConfigError::io("fsync", path, e))
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(ConfigError::io("create", path, e)),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn init_is_idempotent_and_private() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path().join("h"));
        assert!(matches!(home.config(), Err(ConfigError::NoHome(_))));
        let first = home.init().unwrap();
        assert!(first.created);
        let token = home.admin_token().unwrap();
        assert!(token.starts_with("agency_admin_"));
        let mode = fs::metadata(home.admin_token_path())
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
        let second = home.init().unwrap();
        assert!(!second.created);
        assert_eq!(second.root_handler, first.root_handler);
        assert_eq!(home.admin_token().unwrap(), token);
        fs::set_permissions(home.admin_token_path(), fs::Permissions::from_mode(0o644)).unwrap();
        assert!(home.admin_token().is_err());
    }
}
