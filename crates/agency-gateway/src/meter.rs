//! What the gateway charges a metered call (every call is
//! charged for what the provider bills): the worst case it reserves before
//! forwarding ([`plan`]) and what it settles once the answer has ended
//! ([`Meter`]).
//!
//! The reservation is the input (estimated from the body's size) plus the
//! output cap times `n`, the number of answers asked for; a call without a
//! cap reserves its upstream's `reserve_output_tokens`, so parallel calls
//! cannot spend past a budget before any of them settled. A model without
//! a price (not in the table, no `default_price` on its upstream) is
//! *unpriced*: its calls are refused under a budget that limits cost.
//!
//! The settlement is the answer's final usage when it was read; otherwise
//! — a stream cut before its last event, the agent gone, an answer that
//! could not be read, a request that left but whose answer never came —
//! the provider may have billed up to the cap, so the call is charged at
//! its reservation (the input as the provider reported it when it did,
//! the output at the full cap) and marked estimated, never at the
//! partial counts seen.

use std::sync::Arc;

use agency_service::{ModelCallRequest, ModelCallResult, ModelReservation, TokenUsage};
use serde_json::Value;

use crate::metering::Metering;
use crate::usage::{Seen, UsageTap};
use agency_config::models::Price;
use agency_config::upstreams::{Models, Upstream};

/// The reservation of one call from its request's metered fields (`head`),
/// or the reason the request is refused (400).
pub(crate) fn plan(
    models: &Models,
    name: &str,
    upstream: &Upstream,
    head: &Value,
    body_len: usize,
) -> Result<(ModelCallRequest, Option<Price>), String> {
    let model = head["model"].as_str().unwrap_or_default().to_owned();
    let stream = head["stream"].as_bool().unwrap_or(false);
    // The answer's cap: a whole number of tokens, the larger of the two
    // fields if both are given. Anything else (a fraction, a string, a
    // negative number) would reserve nothing while an upstream might still
    // read it as a cap.
    let mut cap = None;
    for field in ["max_tokens", "max_completion_tokens"] {
        if head[field].is_null() {
            continue;
        }
        match head[field].as_u64().and_then(|n| i64::try_from(n).ok()) {
            Some(n) => cap = Some(cap.unwrap_or(0).max(n)),
            None => {
                return Err(format!(
                    "failed to forward to model upstream {name}: {field} must be a whole number of tokens (0 or more)"
                ));
            }
        }
    }
    // `n` answers are `n` times the output (the input is billed once).
    let n = if head["n"].is_null() {
        1
    } else {
        match head["n"].as_u64().and_then(|n| i64::try_from(n).ok()) {
            Some(n) if n >= 1 => n,
            _ => {
                return Err(format!(
                    "failed to forward to model upstream {name}: n must be a whole number of answers, 1 or more"
                ));
            }
        }
    };
    let output = cap
        .unwrap_or(upstream.reserve_output_tokens)
        .saturating_mul(n);
    // The input's tokens are estimated from its size (about four bytes a
    // token).
    let input_estimate = i64::try_from(body_len / 4).unwrap_or(i64::MAX);
    let price = models.price(upstream, &model);
    let worst_cost_micro_usd = price.map_or(0, |p| {
        p.cost_micro_usd(&TokenUsage {
            input_tokens: input_estimate,
            output_tokens: output,
            ..TokenUsage::default()
        })
    });
    Ok((
        ModelCallRequest {
            upstream: name.to_owned(),
            api: upstream.api.as_str().to_owned(),
            model,
            stream,
            max_tokens: output,
            input_estimate,
            worst_cost_micro_usd,
            priced: price.is_some(),
        },
        price,
    ))
}

/// How far a metered call got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Not sent: nothing can have been billed.
    NotSent,
    /// The request may have reached the upstream; no answer yet.
    Sending,
    /// The upstream answered with this status.
    Answered(i64),
}

/// One metered call in flight; settled exactly once, when dropped.
pub(crate) struct Meter {
    metering: Arc<Metering>,
    price: Option<Price>,
    reservation: Option<ModelReservation>,
    pub(crate) phase: Phase,
    pub(crate) tap: Option<UsageTap>,
}

impl Meter {
    pub(crate) fn new(metering: Arc<Metering>, price: Option<Price>, r: ModelReservation) -> Meter {
        Meter {
            metering,
            price,
            reservation: Some(r),
            phase: Phase::NotSent,
            tap: None,
        }
    }
}

/// What a call is charged: its status, usage and whether the usage is
/// the reservation rather than the answer's.
pub(crate) fn charge(
    phase: Phase,
    seen: Seen,
    request: &ModelCallRequest,
) -> (i64, TokenUsage, bool) {
    match phase {
        Phase::NotSent => (0, TokenUsage::default(), false),
        // The answer's own count; an error answer is not billed.
        Phase::Answered(status) if seen.complete || !(200..300).contains(&status) => {
            (status, seen.usage, false)
        }
        Phase::Sending | Phase::Answered(_) => {
            let status = match phase {
                Phase::Answered(s) => s,
                _ => 0,
            };
            let mut usage = seen.usage;
            if !seen.input_known {
                usage.input_tokens = usage.input_tokens.max(request.input_estimate);
            }
            usage.output_tokens = usage.output_tokens.max(request.max_tokens);
            (status, usage, true)
        }
    }
}

impl Drop for Meter {
    fn drop(&mut self) {
        let Some(reservation) = self.reservation.take() else {
            return;
        };
        let seen = self.tap.take().map(UsageTap::finish).unwrap_or_default();
        let (status, usage, estimated) = charge(self.phase, seen, reservation.request());
        let result = ModelCallResult {
            status,
            usage,
            cost_micro_usd: self.price.map_or(0, |p| p.cost_micro_usd(&usage)),
            estimated,
        };
        self.metering.settle(reservation, result);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> ModelCallRequest {
        ModelCallRequest {
            upstream: "u".into(),
            api: "anthropic".into(),
            model: "m".into(),
            stream: true,
            max_tokens: 1000,
            input_estimate: 50,
            worst_cost_micro_usd: 0,
            priced: true,
        }
    }

    #[test]
    fn only_a_complete_or_refused_answer_is_charged_what_it_said() {
        let r = request();
        let partial = Seen {
            usage: TokenUsage {
                input_tokens: 40,
                output_tokens: 950,
                cache_read_tokens: 7,
                ..TokenUsage::default()
            },
            input_known: true,
            complete: false,
        };
        let whole = Seen {
            complete: true,
            ..partial
        };
        assert_eq!(
            charge(Phase::Answered(200), whole, &r),
            (200, whole.usage, false)
        );
        // Cut: the input as reported, the output at the cap.
        let (_, u, est) = charge(Phase::Answered(200), partial, &r);
        assert!(est);
        assert_eq!(
            (u.input_tokens, u.cache_read_tokens, u.output_tokens),
            (40, 7, 1000)
        );
        // Nothing read: the whole reservation.
        let (s, u, est) = charge(Phase::Sending, Seen::default(), &r);
        assert!(est);
        assert_eq!((s, u.input_tokens, u.output_tokens), (0, 50, 1000));
        // Not sent, or refused by the upstream: nothing billed.
        assert_eq!(charge(Phase::NotSent, Seen::default(), &r).1.total(), 0);
        assert_eq!(
            charge(Phase::Answered(429), Seen::default(), &r).1.total(),
            0
        );
    }
}
