//! How often an agency API key may post a message: one token
//! bucket per key, in the daemon's memory. A key starts with `burst`
//! tokens, each message takes one, and they come back at
//! `messages_per_minute`. In memory because a rate needs no durability: a
//! restart refills every bucket, which costs at most one burst. (The cap
//! on a key's pending messages, which must hold under parallel requests,
//! is counted in the store instead.)
//!
//! Buckets are keyed by the BLAKE3 of the secret, so the map holds no
//! secret; only keys the guard accepted reach it, and full buckets (keys
//! quiet long enough to be back at `burst`) are dropped when the map
//! grows, so it stays small.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Past this many buckets, full ones are dropped (they would start full
/// again anyway).
const PRUNE_ABOVE: usize = 4096;

/// The buckets of every key.
#[derive(Debug)]
pub(crate) struct KeyRateLimiter {
    per_minute: u32,
    burst: u32,
    buckets: Mutex<HashMap<blake3::Hash, Bucket>>,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// A refused message: the limit and when a token comes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RateRefusal {
    pub per_minute: u32,
    pub burst: u32,
    /// Whole seconds until a message would be taken (at least 1).
    pub retry_after_secs: u64,
}

impl KeyRateLimiter {
    pub(crate) fn new(per_minute: u32, burst: u32) -> KeyRateLimiter {
        KeyRateLimiter {
            per_minute: per_minute.max(1),
            burst: burst.max(1),
            buckets: Mutex::default(),
        }
    }

    fn per_sec(&self) -> f64 {
        f64::from(self.per_minute) / 60.0
    }

    /// Take a token for the key `secret` at `now`, or say when one comes.
    pub(crate) fn take(&self, secret: &str, now: Instant) -> Result<(), RateRefusal> {
        let burst = f64::from(self.burst);
        let per_sec = self.per_sec();
        let refill = |b: &Bucket| {
            let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
            (b.tokens + elapsed * per_sec).min(burst)
        };
        // A poisoned lock only means a panic elsewhere mid-update of plain
        // numbers: the map is still usable.
        let mut map = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() > PRUNE_ABOVE {
            map.retain(|_, b| refill(b) < burst);
        }
        let bucket = map
            .entry(blake3::hash(secret.as_bytes()))
            .or_insert(Bucket {
                tokens: burst,
                at: now,
            });
        let tokens = refill(bucket);
        if tokens >= 1.0 {
            *bucket = Bucket {
                tokens: tokens - 1.0,
                at: now,
            };
            return Ok(());
        }
        *bucket = Bucket { tokens, at: now };
        let wait = Duration::from_secs_f64((1.0 - tokens) / per_sec);
        // Rounded up: a client that waits what it is told is not refused.
        let retry_after_secs = (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1);
        Err(RateRefusal {
            per_minute: self.per_minute,
            burst: self.burst,
            retry_after_secs,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_the_rate_per_key() {
        let l = KeyRateLimiter::new(6, 3); // one token every 10 s
        let t0 = Instant::now();
        for _ in 0..3 {
            l.take("agk_a", t0).unwrap();
        }
        let r = l.take("agk_a", t0).unwrap_err();
        assert_eq!((r.per_minute, r.burst), (6, 3));
        assert_eq!(r.retry_after_secs, 10);
        // Another key has its own bucket.
        l.take("agk_b", t0).unwrap();
        // 4 s later a refusal says 6 s; after 10 s one token is back.
        assert_eq!(
            l.take("agk_a", t0 + Duration::from_secs(4))
                .unwrap_err()
                .retry_after_secs,
            6
        );
        l.take("agk_a", t0 + Duration::from_secs(10)).unwrap();
        assert!(l.take("agk_a", t0 + Duration::from_secs(10)).is_err());
        // A long quiet spell refills to the burst, not beyond.
        let later = t0 + Duration::from_secs(3600);
        for _ in 0..3 {
            l.take("agk_a", later).unwrap();
        }
        assert!(l.take("agk_a", later).is_err());
    }

    #[test]
    fn full_buckets_are_pruned_when_the_map_grows() {
        let l = KeyRateLimiter::new(60, 1);
        let t0 = Instant::now();
        for i in 0..=PRUNE_ABOVE {
            l.take(&format!("agk_{i}"), t0).unwrap();
        }
        // A minute on, every bucket is full again and is dropped.
        l.take("agk_new", t0 + Duration::from_secs(60)).unwrap();
        assert_eq!(l.buckets.lock().unwrap().len(), 1);
    }
}
