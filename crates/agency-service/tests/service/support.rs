//! A temporary Agency: store, blobs, manual clock, service, and helpers to
//! act as agents of handlers.

use std::path::Path;
use std::sync::Arc;

use agency_core::{HandlerId, Limits, OutcomeId, Principal, Timestamp};
use agency_postgres::PgStore;
use agency_postgres::scratch::{ScratchDb, admin_url};
use agency_service::{
    ManualClock, NewOutcome, Service, ServiceBuilder, ServiceConfig, ServiceError, System,
};
use agency_store::{BlobStore, FsBlobStore, SqliteStore, Store};

pub struct Env {
    pub dir: tempfile::TempDir,
    /// The PostgreSQL database of this environment, when the suite runs on
    /// PostgreSQL (`AGENCY_TEST_STORE=postgres`); dropped with it.
    pub db: Option<Arc<ScratchDb>>,
    /// The blob store the service writes to.
    pub blobs: Arc<dyn BlobStore>,
    /// The system handle (tests act as the daemon too); it derefs to the
    /// caller-checked [`Service`].
    pub svc: Arc<System>,
    pub clock: Arc<ManualClock>,
    pub root: HandlerId,
}

pub const T0: Timestamp = Timestamp(1_800_000_000_000);

impl Env {
    pub fn new() -> Env {
        Env::with_limits(Limits::default())
    }

    pub fn with_limits(limits: Limits) -> Env {
        let cfg = ServiceConfig {
            limits,
            ..ServiceConfig::default()
        };
        Env::with_config(cfg)
    }

    /// An environment with a given service configuration (limits and
    /// retention).
    pub fn with_config(cfg: ServiceConfig) -> Env {
        let dir = tempfile::tempdir().expect("tempdir");
        let clock = Arc::new(ManualClock::new(T0));
        let (store, blobs, db) = open_backend(dir.path(), None);
        let builder = Service::builder(store, blobs.clone(), clock.clone()).config(cfg);
        Env::built(dir, db, blobs, builder, clock)
    }

    /// Build an environment around given (possibly wrapped) parts.
    pub fn assemble(
        dir: tempfile::TempDir,
        store: Arc<dyn Store>,
        blobs: Arc<dyn BlobStore>,
        clock: Arc<ManualClock>,
        limits: Limits,
    ) -> Env {
        let cfg = ServiceConfig {
            limits,
            ..ServiceConfig::default()
        };
        Env::assemble_with(dir, store, blobs, clock, cfg)
    }

    /// An environment whose service is given more settings at
    /// construction (an embedder, a policy, ...).
    pub fn with_builder(settings: impl FnOnce(ServiceBuilder) -> ServiceBuilder) -> Env {
        let dir = tempfile::tempdir().expect("tempdir");
        let clock = Arc::new(ManualClock::new(T0));
        let (store, blobs, db) = open_backend(dir.path(), None);
        let builder = Service::builder(store, blobs.clone(), clock.clone());
        Env::built(dir, db, blobs, settings(builder), clock)
    }

    pub fn assemble_with(
        dir: tempfile::TempDir,
        store: Arc<dyn Store>,
        blobs: Arc<dyn BlobStore>,
        clock: Arc<ManualClock>,
        cfg: ServiceConfig,
    ) -> Env {
        let builder = Service::builder(store, blobs.clone(), clock.clone()).config(cfg);
        Env::built(dir, None, blobs, builder, clock)
    }

    fn built(
        dir: tempfile::TempDir,
        db: Option<Arc<ScratchDb>>,
        blobs: Arc<dyn BlobStore>,
        builder: ServiceBuilder,
        clock: Arc<ManualClock>,
    ) -> Env {
        let svc = Arc::new(builder.build());
        let root = svc.bootstrap().expect("bootstrap");
        Env {
            dir,
            db,
            blobs,
            svc,
            clock,
            root,
        }
    }

    /// Reopen the same files with a fresh service, as after a restart.
    pub fn reopen(self) -> Env {
        let Env {
            dir,
            db,
            svc,
            clock,
            ..
        } = self;
        drop(svc);
        let (store, blobs, db) = open_backend(dir.path(), db);
        let builder =
            Service::builder(store, blobs.clone(), clock.clone()).config(ServiceConfig::default());
        Env::built(dir, db, blobs, builder, clock)
    }

    /// The clock's time plus `ms`.
    pub fn now_plus(&self, ms: i64) -> Timestamp {
        use agency_service::Clock;
        self.clock.now().plus_millis(ms)
    }

    /// A principal for the live agent of `h`, starting one if needed.
    pub fn agent(&self, h: HandlerId) -> Principal {
        // The live agent may come from before a reopen: reuse it, as the
        // store allows only one per handler.
        if let Some(live) = self
            .svc
            .agents_live(Principal::User)
            .unwrap()
            .iter()
            .find(|r| r.handler == h)
        {
            return Principal::agent(h, live.id);
        }
        let a = self.svc.agent_start(h).expect("start agent");
        Principal::agent(h, a)
    }

    /// Create an outcome as `h` under `parents`.
    pub fn outcome(&self, h: HandlerId, title: &str, parents: &[OutcomeId]) -> OutcomeId {
        self.svc
            .outcome_create(
                self.agent(h),
                &NewOutcome {
                    title: title.into(),
                    description: String::new(),
                    parents: parents.to_vec(),
                    priority: 0,
                },
            )
            .expect("create outcome")
    }
}

/// Whether the suite runs on PostgreSQL (`AGENCY_TEST_STORE=postgres`,
/// on the server `AGENCY_TEST_POSTGRES` names) rather than SQLite.
pub fn on_postgres() -> bool {
    std::env::var("AGENCY_TEST_STORE").is_ok_and(|v| v == "postgres")
}

/// A store, its blobs, and the database they live in (PostgreSQL).
pub type Backend = (Arc<dyn Store>, Arc<dyn BlobStore>, Option<Arc<ScratchDb>>);

/// The store and blobs of an environment: SQLite files in `dir`, or a
/// PostgreSQL database of its own (`db`, made on first use and reused
/// when the environment is reopened).
pub fn open_backend(dir: &Path, db: Option<Arc<ScratchDb>>) -> Backend {
    if !on_postgres() {
        let store = SqliteStore::open(&dir.join("agency.db")).expect("open store");
        let blobs = FsBlobStore::open(dir.join("blobs")).expect("open blobs");
        return (Arc::new(store), Arc::new(blobs), None);
    }
    let db = db.unwrap_or_else(|| {
        let admin = admin_url().expect("AGENCY_TEST_STORE=postgres needs a server");
        Arc::new(ScratchDb::create(&admin).expect("create a scratch database"))
    });
    let store = PgStore::open(db.url()).expect("open the PostgreSQL store");
    let blobs = store.blobs();
    (Arc::new(store), Arc::new(blobs), Some(db))
}

/// Assert an error's kind, printing it otherwise.
#[track_caller]
pub fn assert_kind<T: std::fmt::Debug>(r: Result<T, ServiceError>, kind: &str) -> ServiceError {
    match r {
        Err(e) if e.kind() == kind => e,
        other => panic!("expected {kind}, got {other:?}"),
    }
}

/// Cases for a property test: `PROPTEST_CASES` when set (as docs/development.md
/// promises), else `default`, sized for a 2-core machine.
pub fn proptest_cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// An llm stage named `name` reading nothing, its output any object (the
/// pipeline tests drive stages through the service, not a model).
pub fn llm_stage(name: &str) -> agency_org::pipeline::StageModel {
    use agency_org::pipeline::{RetryPolicy, StageKind, StageModel};
    StageModel {
        name: name.to_owned(),
        description: String::new(),
        kind: StageKind::Llm {
            model: None,
            system: format!("You are the {name}."),
            prompt: "{{input}}".to_owned(),
        },
        reads: vec![],
        output_schema: serde_json::json!({"type": "object"}),
        stamped: vec![],
        checks: vec![],
        retry: RetryPolicy::default(),
        budget: None,
        outcomes: None,
        source: agency_org::model::SourceRef {
            file: "test.pipeline".to_owned(),
            line: 1,
        },
    }
}

/// A stage that ended `ok` with `artifact` after one call.
pub fn stage_ok(artifact: serde_json::Value) -> agency_service::pipelines::StageEnd {
    agency_service::pipelines::StageEnd {
        status: agency_core::status::StageStatus::Ok,
        artifact: Some(artifact),
        attempts: 1,
        input_tokens: 1,
        output_tokens: 1,
        cost_micro_usd: 0,
        report: serde_json::json!({}),
        error: None,
        agent: None,
    }
}
