//! How a [`Service`] is made: everything it is configured with is given
//! here, once, before its first operation — the limits, the settings the
//! daemon read from `agency.toml`, the embeddings endpoint — and the
//! build hands back the [`System`] handle, the only one there is. This
//! module also wires the layers the service itself cannot name: the
//! outbox is posted by mail.

use std::sync::Arc;

use agency_core::policy::Policy;
use agency_store::{BlobStore, Store};
use tokio::sync::broadcast;

use crate::clock::Clock;
use crate::read_audit::ReadAudit;
use crate::service::settings::{Declared, Embedder, MemoryConfig, ServiceConfig};
use crate::service::{Service, System};

/// The settings of a [`Service`] being made; see [`Service::builder`].
#[derive(Debug)]
pub struct ServiceBuilder {
    store: Arc<dyn Store>,
    blobs: Arc<dyn BlobStore>,
    clock: Arc<dyn Clock>,
    cfg: ServiceConfig,
    policy: Policy,
    declared: Option<Declared>,
    memory: Option<MemoryConfig>,
    embedder: Option<Arc<dyn Embedder>>,
}

impl Service {
    /// Start making a service over `store` and `blobs`; settings not given
    /// keep their defaults (a policy of the documented defaults, nothing
    /// declared — so grants are not checked against a configuration —,
    /// the default `[memory]`, no embedder).
    pub fn builder(
        store: Arc<dyn Store>,
        blobs: Arc<dyn BlobStore>,
        clock: Arc<dyn Clock>,
    ) -> ServiceBuilder {
        ServiceBuilder {
            store,
            blobs,
            clock,
            cfg: ServiceConfig::default(),
            policy: Policy::default(),
            declared: None,
            memory: None,
            embedder: None,
        }
    }
}

impl ServiceBuilder {
    /// Limits, retention and the bounds of an agency's API.
    pub fn config(mut self, cfg: ServiceConfig) -> Self {
        self.cfg = cfg;
        self
    }

    /// The tool-call policy (`policy.toml`).
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// The names the configuration declares.
    pub fn declared(mut self, declared: Declared) -> Self {
        self.declared = Some(declared);
        self
    }

    /// The `[memory]` settings.
    pub fn memory(mut self, memory: MemoryConfig) -> Self {
        self.memory = Some(memory);
        self
    }

    /// The embeddings endpoint of `[memory.embeddings]`.
    pub fn embedder(mut self, embedder: Arc<dyn Embedder>) -> Self {
        self.embedder = Some(embedder);
        self
    }

    /// The service, inside its system handle (see [`System::service`]).
    pub fn build(self) -> System {
        let (events, _) = broadcast::channel(4096);
        let event_seq = Arc::new(tokio::sync::watch::Sender::new(0));
        let read_audit = ReadAudit::start(self.store.clone(), event_seq.clone());
        System::new(Arc::new(Service {
            read_audit,
            events,
            event_seq,
            declared: std::sync::RwLock::new(self.declared.map(Arc::new)),
            policy: std::sync::RwLock::new(Arc::new(self.policy)),
            memory_cfg: std::sync::RwLock::new(self.memory),
            retention: std::sync::RwLock::new(self.cfg.retention.clone()),
            embedder: self.embedder,
            post: crate::mail::post,
            problems: std::sync::Mutex::default(),
            tool_steps_off: std::sync::atomic::AtomicBool::new(false),
            own_events: crate::event_log::own::OwnEvents::default(),
            store: self.store,
            blobs: self.blobs,
            clock: self.clock,
            cfg: self.cfg,
        }))
    }
}
