//! The system handle: the operations no caller asks for — the daemon's
//! scheduler, supervisor, gateway metering, retention, reloads — and the
//! raw store. Only [`crate::ServiceBuilder::build`] makes one, together
//! with its [`Service`]; nothing reachable from a `Service` leads back to
//! it, so an adapter given a `Service` (MCP, REST handlers acting for a
//! caller) can call only operations that check their caller.
//!
//! A `System` is also a `Service` (it derefs to it): whoever holds the
//! system may act for callers too.

use std::ops::Deref;
use std::sync::Arc;

use super::Service;

/// The daemon's handle on a [`Service`], with the caller-less operations.
#[derive(Debug)]
pub struct System {
    svc: Arc<Service>,
}

impl System {
    pub(crate) fn new(svc: Arc<Service>) -> System {
        System { svc }
    }

    /// The caller-checked service, to hand to adapters.
    pub fn service(&self) -> &Arc<Service> {
        &self.svc
    }
}

impl Deref for System {
    type Target = Service;

    fn deref(&self) -> &Service {
        &self.svc
    }
}
