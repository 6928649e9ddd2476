//! Item 3: durable KB writes. Sixteen threads each write their own KB file
//! (compare-and-set `kb_write` through the service layer, 4 KiB of new
//! content every time) for a fixed time; the floor is the same durable work
//! without Agency: a blob written to a temp file, fsynced, renamed into
//! place and its directory fsynced, then one row inserted in a SQLite WAL
//! database with `synchronous=FULL` behind one writer connection (as the
//! store has), from the same number of threads.
//!
//! The floor is naive on purpose: one blob directory fsync and one WAL
//! commit per write. The store groups them: concurrent writers
//! share one SQLite transaction (one commit, one WAL fsync) and concurrent
//! blob puts one round of directory fsyncs, and still acknowledge a write
//! only once its rows and blob are durable. So the ratio can exceed 1 at
//! equal durability; it says how much of the fsync cost grouping saves
//! after the service's own work is paid.
//!
//! On PostgreSQL the service runs on a home whose store (rows and blobs) is
//! a fresh database on the server, and the floor is the server's own naive
//! per-insert commit: sixteen threads, each with its own connection, each
//! write one `INSERT` of a row carrying the same 4 KiB content (a `bytea`
//! column) and its `COMMIT`, with `synchronous_commit` on (the default),
//! so every write waits for its WAL flush as the service's do.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agency_core::Principal;
use anyhow::{Context, Result};

use crate::Cfg;
use crate::report::{Row, Section, ratio};
use crate::util::new_home_with;

const WRITERS: usize = 16;
const SIZE: usize = 4096;

/// Distinct content for writer `w`, write `i` (new blob every time, so the
/// content-addressed store never skips a write).
fn content(w: usize, i: u64) -> Vec<u8> {
    let head = format!("writer {w} write {i}\n");
    let mut v = head.into_bytes();
    v.resize(SIZE, b'.');
    v
}

/// What one timed run of writers did.
#[derive(Debug, Clone, Copy)]
struct Rate {
    per_sec: f64,
    writes: u64,
    /// The machine's busy CPU time over the writers' window
    /// (`util::machine_busy`): the writers', the server's and the kernel's.
    busy: Duration,
    /// Of it, this process's (`util::self_cpu`).
    own: Duration,
}

impl Rate {
    /// The machine's CPU per write.
    fn busy_per_write(&self) -> Option<Duration> {
        (self.writes > 0).then(|| self.busy / u32::try_from(self.writes).unwrap_or(u32::MAX))
    }

    /// This process's CPU per write.
    fn own_per_write(&self) -> Option<Duration> {
        (self.writes > 0).then(|| self.own / u32::try_from(self.writes).unwrap_or(u32::MAX))
    }
}

/// The clocks of one writing window: wall, the machine's busy CPU and this
/// process's.
struct Window {
    start: Instant,
    busy: Duration,
    own: Duration,
}

impl Window {
    fn open() -> Result<Window> {
        Ok(Window {
            busy: crate::util::machine_busy()?,
            own: crate::util::self_cpu()?,
            start: Instant::now(),
        })
    }

    /// The window's rate after `writes` writes.
    fn close(&self, writes: u64) -> Result<Rate> {
        let took = self.start.elapsed().as_secs_f64();
        Ok(Rate {
            per_sec: writes as f64 / took,
            writes,
            busy: crate::util::machine_busy()?.saturating_sub(self.busy),
            own: crate::util::self_cpu()?.saturating_sub(self.own),
        })
    }
}

/// Writes per second through `Service::kb_write`, the store on SQLite
/// (`store` `None`) or on the PostgreSQL database `store` names; and how
/// many writes were made.
fn service_rate(dir: &Path, secs: Duration, store: Option<&str>) -> Result<Rate> {
    let home = new_home_with(&dir.join("home"), "", store)?;
    let svc = Arc::new(home.open_service().context("failed to open the service")?);
    let root = svc
        .root_handler()?
        .context("failed to find the root handler")?;
    let minted = svc
        .token_mint(Principal::User, root, None)
        .context("failed to mint a token for the root handler")?;
    let who = Principal::agent(root, minted.agent);
    let mut files = Vec::new();
    for w in 0..WRITERS {
        let f = svc
            .kb_create(who, &format!("writer {w}"), &content(w, 0))
            .context("failed to create a writer's KB file")?;
        let c = svc
            .kb_read(who, f)
            .context("failed to read a writer's file")?;
        files.push((f, c.version, c.hash.as_str().to_owned()));
    }
    let done = Arc::new(AtomicU64::new(0));
    let window = Window::open()?;
    let deadline = window.start + secs;
    let handles: Vec<_> = files
        .into_iter()
        .enumerate()
        .map(|(w, (file, mut version, mut hash))| {
            let (svc, done) = (svc.clone(), done.clone());
            std::thread::spawn(move || -> Result<()> {
                let mut i = 1;
                while Instant::now() < deadline {
                    let v = svc
                        .kb_write(who, file, &content(w, i), version, &hash)
                        .with_context(|| format!("failed to write KB file {file}"))?;
                    version = v.version;
                    hash = v.hash.as_str().to_owned();
                    i += 1;
                    done.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            })
        })
        .collect();
    for h in handles {
        h.join()
            .map_err(|_| anyhow::anyhow!("a writer thread panicked"))??;
    }
    let rate = window.close(done.load(Ordering::Relaxed))?;
    svc.flush_read_audit()?;
    Ok(rate)
}

/// The same durability without Agency: blob temp → fsync → rename → fsync
/// dir, then an INSERT committed with WAL + synchronous=FULL.
fn floor_rate(dir: &Path, secs: Duration) -> Result<f64> {
    std::fs::create_dir_all(dir).with_context(|| format!("failed to create {}", dir.display()))?;
    let db = dir.join("floor.db");
    let conn = rusqlite::Connection::open(&db)
        .with_context(|| format!("failed to open {}", db.display()))?;
    conn.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;
         CREATE TABLE versions (file TEXT, version INTEGER, hash TEXT, size INTEGER, at INTEGER,
                                PRIMARY KEY (file, version));",
    )
    .context("failed to set up the floor database")?;
    let conn = Arc::new(Mutex::new(conn));
    let blobs = dir.join("blobs");
    std::fs::create_dir_all(&blobs).context("failed to create the floor's blob directory")?;
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let deadline = start + secs;
    let handles: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (conn, done, blobs) = (conn.clone(), done.clone(), blobs.clone());
            std::thread::spawn(move || -> Result<()> {
                let mut i = 1u64;
                while Instant::now() < deadline {
                    let c = content(w, i);
                    let hash = blake3::hash(&c).to_hex().to_string();
                    put_blob(&blobs, &hash, &c)?;
                    let conn = conn
                        .lock()
                        .map_err(|_| anyhow::anyhow!("the floor's connection lock is poisoned"))?;
                    conn.execute_batch("BEGIN IMMEDIATE")
                        .context("failed to begin a floor transaction")?;
                    conn.execute(
                        "INSERT INTO versions VALUES (?1, ?2, ?3, ?4, ?5)",
                        rusqlite::params![format!("file-{w}"), i as i64, hash, SIZE as i64, 0],
                    )
                    .context("failed to insert a floor row")?;
                    conn.execute_batch("COMMIT")
                        .context("failed to commit a floor transaction")?;
                    drop(conn);
                    i += 1;
                    done.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            })
        })
        .collect();
    for h in handles {
        h.join()
            .map_err(|_| anyhow::anyhow!("a floor writer thread panicked"))??;
    }
    Ok(done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64())
}

/// Write `content` durably as `dir/ab/cdef…` (the blob store's layout).
fn put_blob(dir: &Path, hash: &str, content: &[u8]) -> Result<()> {
    let sub: PathBuf = dir.join(&hash[..2]);
    std::fs::create_dir_all(&sub).context("failed to create a blob directory")?;
    let tmp = sub.join(format!(".tmp-{hash}"));
    let mut f = File::create(&tmp).context("failed to create a blob temp file")?;
    f.write_all(content).context("failed to write a blob")?;
    f.sync_all().context("failed to fsync a blob")?;
    std::fs::rename(&tmp, sub.join(&hash[2..])).context("failed to rename a blob")?;
    File::open(&sub)
        .and_then(|d| d.sync_all())
        .context("failed to fsync a blob directory")?;
    Ok(())
}

/// PostgreSQL's naive per-insert commit: `writers` threads, each with its
/// own connection to `url`, each write `BEGIN`, one `INSERT` of a row
/// with the 4 KiB content, `COMMIT` (synchronous_commit on), into the
/// table `table` (made here).
fn pg_floor_rate(url: &str, table: &str, writers: usize, secs: Duration) -> Result<Rate> {
    let rt = |what: &str| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .with_context(|| format!("failed to build a runtime for {what}"))
    };
    let connect = |rt: &tokio::runtime::Runtime| {
        rt.block_on(async {
            let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
                .await
                .context("failed to connect to the floor's database")?;
            let task = tokio::spawn(conn);
            anyhow::Ok((client, task))
        })
    };
    let setup = rt("the floor's set-up")?;
    let (client, task) = connect(&setup)?;
    setup
        .block_on(client.batch_execute(&format!(
            "CREATE TABLE {table} (file TEXT, version BIGINT, hash TEXT, size BIGINT, content BYTEA NOT NULL,
                                   at BIGINT, PRIMARY KEY (file, version))"
        )))
        .context("failed to create the floor's table")?;
    drop(client);
    let _ = setup.block_on(task);
    let done = Arc::new(AtomicU64::new(0));
    let window = Window::open()?;
    let deadline = window.start + secs;
    let handles: Vec<_> = (0..writers)
        .map(|w| {
            let done = done.clone();
            let (url, table) = (url.to_owned(), table.to_owned());
            std::thread::spawn(move || -> Result<()> {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .context("failed to build a floor writer's runtime")?;
                rt.block_on(async {
                    let (mut client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                        .await
                        .context("failed to connect a floor writer")?;
                    let task = tokio::spawn(conn);
                    let insert = client
                        .prepare(&format!(
                            "INSERT INTO {table} VALUES ($1, $2, $3, $4, $5, $6)"
                        ))
                        .await
                        .context("failed to prepare the floor's insert")?;
                    let file = format!("file-{w}");
                    let mut i = 1u64;
                    while Instant::now() < deadline {
                        let c = content(w, i);
                        let hash = blake3::hash(&c).to_hex().to_string();
                        let (version, size, at) = (i as i64, SIZE as i64, 0i64);
                        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 6] =
                            [&file, &version, &hash, &size, &c, &at];
                        let tx = client
                            .transaction()
                            .await
                            .context("failed to begin a floor transaction")?;
                        tx.execute(&insert, &params)
                            .await
                            .context("failed to insert a floor row")?;
                        tx.commit()
                            .await
                            .context("failed to commit a floor transaction")?;
                        i += 1;
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    drop(client);
                    let _ = task.await;
                    anyhow::Ok(())
                })
            })
        })
        .collect();
    for h in handles {
        h.join()
            .map_err(|_| anyhow::anyhow!("a floor writer thread panicked"))??;
    }
    window.close(done.load(Ordering::Relaxed))
}

/// Committed transactions in the database `url` so far
/// (`pg_stat_database.xact_commit`; a backend reports its own when it
/// ends, so read this after the connections measured are closed).
fn pg_commits(url: &str) -> Result<i64> {
    let url = url.to_owned();
    std::thread::spawn(move || -> Result<i64> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("failed to build a runtime")?;
        rt.block_on(async {
            let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .context("failed to connect to read the commit count")?;
            let task = tokio::spawn(conn);
            // A fresh snapshot of the statistics, not this backend's cached one.
            client
                .batch_execute("SELECT pg_stat_clear_snapshot()")
                .await
                .context("failed to clear the statistics snapshot")?;
            let row = client
                .query_one(
                    "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()",
                    &[],
                )
                .await
                .context("failed to read pg_stat_database")?;
            let n: i64 = row.try_get(0).context("failed to read xact_commit")?;
            drop(client);
            let _ = task.await;
            Ok(n)
        })
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the statistics thread panicked"))?
}

/// The PostgreSQL half of item 3: writes/s of the floor before, the
/// service, and the floor after.
struct PgRun {
    ours: Rate,
    f1: Rate,
    f2: Rate,
    /// The floor with one connection: commits one at a time, as the
    /// service's writers' lock makes them.
    single: Rate,
    /// Committed transactions in the service's database per kb_write.
    commits_per_write: Option<f64>,
    /// The server's version and durability settings.
    server: String,
}

fn pg_run(dir: &Path, secs: Duration) -> Result<PgRun, String> {
    let floors = crate::pg::scratch()?;
    let service = crate::pg::scratch()?;
    let go = || -> Result<PgRun> {
        let f1 = pg_floor_rate(floors.url(), "floor1", WRITERS, secs)?;
        let before = pg_commits(service.url()).ok();
        let ours = service_rate(&dir.join("svc-pg"), secs, Some(service.url()))?;
        let writes = ours.writes;
        // Let the service's backends, closed as its store dropped, report.
        std::thread::sleep(Duration::from_millis(1500));
        let after = pg_commits(service.url()).ok();
        let f2 = pg_floor_rate(floors.url(), "floor2", WRITERS, secs)?;
        let single = pg_floor_rate(floors.url(), "floor_single", 1, secs)?;
        // The set-up's own commits (home, token, the 16 files), from the
        // same set-up without writes on a database of its own.
        let setup = {
            let db = crate::pg::scratch().map_err(anyhow::Error::msg)?;
            let b = pg_commits(db.url()).ok();
            service_rate(&dir.join("svc-pg-setup"), Duration::ZERO, Some(db.url()))?;
            std::thread::sleep(Duration::from_millis(1500));
            let a = pg_commits(db.url()).ok();
            a.zip(b).map(|(a, b)| a - b)
        };
        let commits_per_write = match (before, after, setup) {
            (Some(b), Some(a), Some(setup)) if writes > 0 => {
                Some((a - b - setup) as f64 / writes as f64)
            }
            _ => None,
        };
        Ok(PgRun {
            ours,
            f1,
            f2,
            single,
            commits_per_write,
            server: crate::pg::describe(floors.url()),
        })
    };
    go().map_err(|e| format!("failed: {e:#}"))
}

/// Item 3.
pub fn run(cfg: Cfg) -> Result<Vec<Section>> {
    let secs = Duration::from_secs(cfg.pick(10, 3));
    let dir = tempfile::tempdir().context("failed to create a temporary directory")?;
    // Floor, subject, floor again: the floor reported is the mean of both,
    // so a drift in the disk's speed during the run shows less.
    let f1 = floor_rate(&dir.path().join("f1"), secs)?;
    let ours = service_rate(&dir.path().join("svc"), secs, None)?.per_sec;
    let f2 = floor_rate(&dir.path().join("f2"), secs)?;
    let floor = (f1 + f2) / 2.0;
    // The same on PostgreSQL, after SQLite's (its own floor before and after).
    let pg = pg_run(dir.path(), secs);
    let mut s = Section::new("3. Durable KB writes: 16 concurrent writers, distinct files");
    s.rows.push(Row::new(
        "kb_write through the service, writes/s",
        format!("{ours:.0}"),
        format!("{floor:.0} (blob fsync+rename + SQLite FULL insert; runs {f1:.0} and {f2:.0})"),
        ratio(ours, floor),
    ));
    if let Ok(p) = &pg {
        let pfloor = (p.f1.per_sec + p.f2.per_sec) / 2.0;
        s.rows.push(Row::new(
            "kb_write through the service on PostgreSQL, writes/s",
            format!("{:.0}", p.ours.per_sec),
            format!(
                "{pfloor:.0} (PostgreSQL per-insert commit, 16 connections; runs {:.0} and {:.0})",
                p.f1.per_sec, p.f2.per_sec
            ),
            ratio(p.ours.per_sec, pfloor),
        ));
        s.rows.push(Row::new(
            "kb_write through the service, PostgreSQL against SQLite (same run), writes/s",
            format!("{:.0}", p.ours.per_sec),
            format!("{ours:.0} (the service on SQLite)"),
            ratio(p.ours.per_sec, ours),
        ));
        s.rows.push(Row::new(
            "reference: PostgreSQL per-insert commit, 1 connection, writes/s",
            format!("{:.0}", p.single.per_sec),
            format!("{pfloor:.0} (the same with 16 connections)"),
            ratio(p.single.per_sec, pfloor),
        ));
        let floors = Rate {
            per_sec: pfloor,
            writes: p.f1.writes + p.f2.writes,
            busy: p.f1.busy + p.f2.busy,
            own: p.f1.own + p.f2.own,
        };
        if let (Some(svc), Some(floor), Some(svc_own), Some(floor_own)) = (
            p.ours.busy_per_write(),
            floors.busy_per_write(),
            p.ours.own_per_write(),
            floors.own_per_write(),
        ) {
            let us = |d: Duration| d.as_secs_f64() * 1e6;
            s.rows.push(Row::new(
                "machine CPU per write on PostgreSQL (the writers, the server and the kernel)",
                format!(
                    "{:.0} µs ({:.0} µs of it this process's)",
                    us(svc),
                    us(svc_own)
                ),
                format!(
                    "{:.0} µs (the floor's, 16 connections; {:.0} µs of it this process's)",
                    us(floor),
                    us(floor_own)
                ),
                ratio(us(svc), us(floor)),
            ));
            let cores = crate::util::cores() as f64;
            let needed = svc.as_secs_f64() * pfloor;
            s.rows.push(Row::new(
                "cores the service's writes would keep busy at the floor's rate",
                format!("{needed:.1}"),
                format!("{cores:.0} (this machine's)"),
                ratio(needed, cores),
            ));
        }
    }
    s.shows = match &pg {
        Ok(p) => format!(
            "the durable-write rate of the service, with its permission check, compare-and-set and audit record, against naive per-write durable commits of the same data on the same backend (above 1: the service's batching saves more than its own work costs): ×{} on SQLite (against blob fsyncs + SQLite inserts) and ×{} on PostgreSQL (against PostgreSQL's own per-insert commit).",
            ratio(ours, floor).trim_start_matches('×'),
            ratio(p.ours.per_sec, (p.f1.per_sec + p.f2.per_sec) / 2.0).trim_start_matches('×')
        ),
        Err(_) => "the durable-write rate of the service, with its permission check, compare-and-set and audit record, against naive per-write fsyncs of the same data (above 1: group commit saves more fsync time than the service's own work costs). PostgreSQL: not measured (below).".to_owned(),
    };
    s.notes.push(format!(
        "{WRITERS} threads, {} s each run, 4 KiB of new content per write; the service runs in this process on a fresh home (`Home::open_service`), the writers act as the root handler's agent (`token_mint`). Floor measured before and after the service run.",
        secs.as_secs()
    ));
    s.notes.push(
        "Equal durability, different batching: each floor write pays its own blob directory fsync and its own SQLite commit (the naive floor, unchanged since the first run); the service commits the rows of concurrent writers together (group commit: one transaction, a savepoint per write, one WAL fsync) and lets concurrent blob puts share directory fsyncs. In both, a write is acknowledged only after its blob and rows are fsynced.".to_owned(),
    );
    s.notes.push(
        "Temporary files: the floor creates a named one in the blob's own fan-out directory and renames it; the service writes an unnamed one (`O_TMPFILE`) in the same directory and links it (`crates/agency-store/src/unnamed.rs`; before, named files in one shared `tmp/` directory and a cross-directory rename: 16 writers then spent 30% of their CPU spinning on that directory's lock, ×0.61–0.81 of the floor). Both allocate one inode per write, which on this machine's ext4 (no journal) costs most of the CPU after earlier mass deletions, so the rates of both vary from run to run and the ratio is the figure to read. The service's fan-out directories are spread over the file system's block groups (an ext4 top directory, `crates/agency-store/src/spread.rs`), the floor's are not: with them in one group, as the floor's, the service wrote 2,500–2,700 writes/s (×0.66–×0.81).".to_owned(),
    );
    match &pg {
        Ok(p) => s.notes.push(format!(
            "PostgreSQL: the server at {} ({}); the service on a home whose store (rows and blobs) is a fresh database there, the floor in another, measured before and after the service run, after SQLite's runs. Floor: 16 threads with a connection each, each write `BEGIN`, one `INSERT` of a row (file, version, hash, size, the 4 KiB content as `bytea`, time), `COMMIT`; concurrent commits share WAL flushes (the server's own group commit). The service's writes in one process share transactions on one writer connection (group commit, `crates/agency-postgres/src/group.rs`: a savepoint per write, the advisory lock taken once per batch, one WAL flush per batch), so writers wait for the writer connection, not for the disk: each write's closure makes its statements one round trip after another while it holds that connection (9 per kb_write there, counted in the server's statement log: the token, permission and compare-and-set checks made again (5 reads; the savepoint rides with the first), the version, file, audit and event rows; before it, on connections of their own, the same checks outside the writers' turn and the blob's put), each driven by the writer's own thread (`crates/agency-postgres/src/conn.rs`), as each floor connection is by its own. The blob is stored in a transaction of its own before the rows{}: the blob put before the transaction, the same blob put again inside it (`put_version` in `crates/agency-service/src/render.rs` calls `BlobStore::put`; on PostgreSQL each put is one round trip, `BEGIN`, an upsert and `COMMIT` pipelined on a connection of its own, committed without waiting for the disk, `synchronous_commit = off`, which the rows' durable commit then flushes with it, one write-ahead log; on SQLite's file blob store the second put of a blob it holds only refreshes the file's time, without an fsync), and the batch's commit, shared by its writes. The reference row: the floor's insert on one connection, commits one at a time without the service's work.",
            crate::pg::server(),
            p.server,
            match p.commits_per_write {
                Some(c) => format!(": {c:.2} committed transactions per kb_write in the service's database (`pg_stat_database.xact_commit`, less those of the same set-up without writes, measured on a database of its own), against 1 for the floor"),
                None => String::new(),
            }
        )),
        Err(reason) => s.notes.push(format!("PostgreSQL rows {reason}.")),
    }
    if pg.is_ok() {
        s.notes.push(
            "Machine CPU (PostgreSQL rows): the busy time of all cores from `/proc/stat` (user, nice, system, irq and softirq; idle, iowait and steal left out) over each run's writing window, set-up outside it, divided by the run's writes: the writers' threads, the server's backends and the kernel's work for both, and anything else the machine ran meanwhile. The row after it multiplies the service's CPU per write by the floor's rate: above this machine's cores, the floor's rate is out of reach for the service's work per write on this machine, however its round trips are ordered or overlapped. The service's part left outside this process (the server's) is what its statements cost there; it was more while the store kept 8 idle connections instead of 24 (a backend forked for a connection and ended after one transaction, over and over: 3.6 ms of machine CPU per write, 525 writes/s).".to_owned(),
        );
    }
    Ok(vec![s])
}
