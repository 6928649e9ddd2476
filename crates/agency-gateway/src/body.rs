//! Reading a model request's body at the gateway, bounded in time and in
//! memory per agent.
//!
//! Why: the gateway must see a request whole before it forwards it (it
//! reserves the call's worst case from the request's size and fields), so
//! a body is held in memory while it arrives. Read without a deadline or a
//! cap, one agent's stalled uploads held ~1.8 GiB of the daemon's memory.
//! Now the whole body must arrive within the upstream's
//! `request_timeout_secs` (else 408), and the bytes of the bodies one agent
//! has in flight — being read, or held until the upstream has the request
//! — stay within `agent_request_bytes` (else 413). Both refusals name the
//! setting.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agency_core::AgentId;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use futures_util::StreamExt;

use agency_config::upstreams::Upstream;
use agency_http::error;

/// A model request is a conversation; this only bounds a hostile one.
pub(crate) const MAX_REQUEST_BYTES: usize = 32 << 20;

/// The request bytes each agent has in flight through the gateway.
#[derive(Debug, Default)]
pub struct InFlight {
    by_agent: Mutex<HashMap<AgentId, usize>>,
}

/// Bytes counted against one agent until dropped.
#[derive(Debug)]
pub(crate) struct Held {
    in_flight: Arc<InFlight>,
    agent: AgentId,
    bytes: usize,
}

impl InFlight {
    /// Count `n` more bytes for `agent` if it stays within `cap`; else the
    /// bytes it already has in flight.
    fn take(&self, agent: AgentId, n: usize, cap: usize) -> Result<(), usize> {
        let mut map = self.by_agent.lock().unwrap_or_else(|e| e.into_inner());
        let held = map.entry(agent).or_insert(0);
        if held.saturating_add(n) > cap {
            let was = *held;
            if was == 0 {
                map.remove(&agent);
            }
            return Err(was);
        }
        *held += n;
        Ok(())
    }

    fn give(&self, agent: AgentId, n: usize) {
        let mut map = self.by_agent.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(held) = map.get_mut(&agent) {
            *held = held.saturating_sub(n);
            if *held == 0 {
                map.remove(&agent);
            }
        }
    }

    #[cfg(test)]
    fn of(&self, agent: AgentId) -> usize {
        let map = self.by_agent.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&agent).copied().unwrap_or(0)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.in_flight.give(self.agent, self.bytes);
    }
}

/// Read a request body for `agent` to `name` (`up`): the whole body, or
/// the refusal to send back.
pub(crate) async fn read(
    in_flight: &Arc<InFlight>,
    agent: AgentId,
    name: &str,
    up: &Upstream,
    headers: &HeaderMap,
    body: Body,
) -> Result<(Bytes, Held), Response> {
    let cap = up.agent_request_bytes;
    let mut held = Held {
        in_flight: in_flight.clone(),
        agent,
        bytes: 0,
    };
    let too_large = |have: usize| {
        error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid",
            &format!(
                "failed to forward to model upstream {name}: the request body is over {MAX_REQUEST_BYTES} bytes, or with the {have} bytes of your other requests in flight it is over agent_request_bytes = {cap} of [models.{name}]; send smaller requests, or fewer at once"
            ),
        )
    };
    // A declared length past either bound is refused before any byte is
    // read.
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if let Some(n) = declared {
        if n > MAX_REQUEST_BYTES {
            return Err(too_large(0));
        }
        in_flight.take(agent, n, cap).map_err(too_large)?;
        held.bytes = n;
    }
    let read_all = async {
        let mut out = Vec::with_capacity(declared.unwrap_or(0));
        let mut stream = body.into_data_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| {
                error(
                    StatusCode::BAD_REQUEST,
                    "invalid",
                    &format!(
                        "failed to forward to model upstream {name}: the request body was cut off ({e}); send it again"
                    ),
                )
            })?;
            let total = out.len() + chunk.len();
            if total > MAX_REQUEST_BYTES {
                return Err(too_large(0));
            }
            // Bytes past the declared length (none with a correct
            // Content-Length) are counted as they come.
            if total > held.bytes {
                let more = total - held.bytes;
                in_flight.take(agent, more, cap).map_err(too_large)?;
                held.bytes += more;
            }
            out.extend_from_slice(&chunk);
        }
        Ok(Bytes::from(out))
    };
    let bytes = match tokio::time::timeout(up.request_timeout, read_all).await {
        Ok(Ok(b)) => b,
        Ok(Err(refusal)) => return Err(refusal),
        Err(_) => {
            return Err(error(
                StatusCode::REQUEST_TIMEOUT,
                "timeout",
                &format!(
                    "failed to forward to model upstream {name}: the request body did not arrive within request_timeout_secs = {} of [models.{name}]; send it again, whole",
                    up.request_timeout.as_secs()
                ),
            ));
        }
    };
    // A body shorter than it declared holds only what it is.
    if bytes.len() < held.bytes {
        in_flight.give(agent, held.bytes - bytes.len());
        held.bytes = bytes.len();
    }
    Ok((bytes, held))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_counted_per_agent_and_given_back_on_drop() {
        let f = Arc::new(InFlight::default());
        let a = AgentId(uuid::Uuid::from_u128(1));
        let b = AgentId(uuid::Uuid::from_u128(2));
        assert_eq!(f.take(a, 60, 100), Ok(()));
        assert_eq!(f.take(a, 50, 100), Err(60));
        assert_eq!(f.take(b, 100, 100), Ok(()));
        let h = Held {
            in_flight: f.clone(),
            agent: a,
            bytes: 60,
        };
        drop(h);
        assert_eq!(f.of(a), 0);
        assert_eq!(f.take(a, 100, 100), Ok(()));
    }
}
