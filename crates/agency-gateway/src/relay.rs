//! Relaying an answer's body: the chunks the upstream has already sent
//! go to the agent in one write, never held back for chunks still to come.
//!
//! Why: the HTTP client hands the body over one chunk of its framing at a
//! time (a streamed answer is a chunk per server-sent event), through a
//! channel that holds one chunk, and the server half writes each chunk it
//! is given in a system call of its own. An answer of a dozen events that
//! arrived in one read from the upstream left the daemon in a dozen writes,
//! each a trip through the kernel's network stack, the largest part of the
//! relay's CPU per call. [`Coalesce`] gathers the chunks that are ready:
//! when the next one is not, it yields to the runtime a few times (so the
//! client's connection task, woken by the last take, can decode what it
//! has already read) and then sends what it has. A chunk that has to wait
//! for the network is never delayed by more than those few turns of the
//! runtime, microseconds.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures_util::Stream;

/// Bytes gathered into one chunk at most: a chunk this large is sent
/// without looking for more.
pub(crate) const MAX_CHUNK: usize = 64 << 10;

/// Turns of the runtime a chunk waits for the next one at most. One is
/// not enough when the client's connection task runs on another worker:
/// measured on the scripted model server's answers (a dozen events in one
/// read), 1 yield left 9 writes per answer, 4 left 3.
const YIELDS: u32 = 4;

/// A body stream whose ready chunks are joined (see the module's doc).
pub(crate) struct Coalesce<S, E> {
    inner: S,
    /// Gathered, not yet sent.
    held: BytesMut,
    /// A single chunk taken as is while nothing else was held (no copy
    /// when it turns out to be alone).
    first: Option<Bytes>,
    /// The yield of this turn, once it began; done: `Some` finished one.
    yielded: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    /// Yields this turn made.
    waited: u32,
    /// The inner stream ended (`None`) or failed: sent after `held`.
    end: Option<Option<E>>,
    /// Whether the failure waited a turn (see `poll_next`).
    failing: bool,
}

impl<S, E> Coalesce<S, E> {
    pub(crate) fn new(inner: S) -> Self {
        Coalesce {
            inner,
            held: BytesMut::new(),
            first: None,
            yielded: None,
            waited: 0,
            end: None,
            failing: false,
        }
    }

    fn len(&self) -> usize {
        self.first.as_ref().map_or(0, Bytes::len) + self.held.len()
    }

    fn hold(&mut self, chunk: Bytes) {
        if self.first.is_none() && self.held.is_empty() {
            self.first = Some(chunk);
            return;
        }
        if let Some(first) = self.first.take() {
            self.held.extend_from_slice(&first);
        }
        self.held.extend_from_slice(&chunk);
    }

    fn take(&mut self) -> Option<Bytes> {
        if let Some(first) = self.first.take() {
            return Some(first);
        }
        (!self.held.is_empty()).then(|| self.held.split().freeze())
    }
}

impl<S, E> Stream for Coalesce<S, E>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: Unpin,
{
    type Item = Result<Bytes, E>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if this.end.is_some() {
                if let Some(chunk) = this.take() {
                    return Poll::Ready(Some(Ok(chunk)));
                }
                // A failure waits one turn: the server half sends what it
                // holds (the head, the last bytes) when the body is not
                // ready, and drops it unsent when the body fails at once.
                if matches!(this.end, Some(Some(_))) && !this.failing {
                    this.failing = true;
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                return Poll::Ready(this.end.as_mut().and_then(Option::take).map(Err));
            }
            match Pin::new(&mut this.inner).poll_next(cx) {
                Poll::Ready(Some(Ok(chunk))) => {
                    this.yielded = None;
                    this.waited = 0;
                    this.hold(chunk);
                    if this.len() >= MAX_CHUNK {
                        return Poll::Ready(this.take().map(Ok));
                    }
                }
                Poll::Ready(Some(Err(e))) => this.end = Some(Some(e)),
                Poll::Ready(None) => this.end = Some(None),
                Poll::Pending if this.len() == 0 => return Poll::Pending,
                Poll::Pending if this.waited < YIELDS => {
                    // The runtime's yield, not a bare self-wake: a task
                    // that wakes itself runs again before the task it just
                    // woke (the client's connection) gets its turn.
                    let y = this
                        .yielded
                        .get_or_insert_with(|| Box::pin(tokio::task::yield_now()));
                    if y.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    this.yielded = None;
                    this.waited += 1;
                }
                Poll::Pending => {
                    this.waited = 0;
                    return Poll::Ready(this.take().map(Ok));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;
    use futures_util::stream;

    fn chunks(parts: &[&str]) -> Vec<Result<Bytes, String>> {
        parts
            .iter()
            .map(|p| Ok(Bytes::copy_from_slice(p.as_bytes())))
            .collect()
    }

    #[tokio::test]
    async fn ready_chunks_leave_as_one() {
        let out: Vec<_> = Coalesce::new(stream::iter(chunks(&["a", "bc", "", "d"])))
            .collect()
            .await;
        assert_eq!(out, vec![Ok(Bytes::from_static(b"abcd"))]);
    }

    #[tokio::test]
    async fn an_error_follows_the_bytes_before_it() {
        let mut parts = chunks(&["ab", "c"]);
        parts.push(Err("cut".to_owned()));
        parts.extend(chunks(&["never"]));
        let out: Vec<_> = Coalesce::new(stream::iter(parts)).collect().await;
        assert_eq!(
            out,
            vec![Ok(Bytes::from_static(b"abc")), Err("cut".to_owned())]
        );
    }

    /// The server half sends what it buffered only when the body is not
    /// ready: a failure ready at once would lose the bytes before it.
    #[test]
    fn a_failure_is_not_ready_in_the_turn_of_the_bytes_before_it() {
        let parts = vec![Ok(Bytes::from_static(b"ab")), Err("cut".to_owned())];
        let mut relay = Coalesce::new(stream::iter(parts));
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut poll = || Pin::new(&mut relay).poll_next(&mut cx);
        assert_eq!(poll(), Poll::Ready(Some(Ok(Bytes::from_static(b"ab")))));
        assert_eq!(poll(), Poll::Pending);
        assert_eq!(poll(), Poll::Ready(Some(Err("cut".to_owned()))));
        assert_eq!(poll(), Poll::Ready(None));
    }

    #[tokio::test]
    async fn a_large_answer_is_cut_at_the_chunk_limit() {
        let big = "x".repeat(MAX_CHUNK / 2 + 1);
        let out: Vec<_> = Coalesce::new(stream::iter(chunks(&[&big, &big, "y"])))
            .collect()
            .await;
        let lens: Vec<usize> = out.iter().map(|c| c.as_ref().unwrap().len()).collect();
        assert_eq!(lens, vec![2 * big.len(), 1]);
    }

    /// A chunk that must wait for the network does not hold back the
    /// ones already there: they are sent after one yield.
    #[tokio::test]
    async fn a_waiting_chunk_does_not_hold_back_the_ready_ones() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Result<Bytes, String>>();
        tx.send(Ok(Bytes::from_static(b"ab"))).unwrap();
        tx.send(Ok(Bytes::from_static(b"c"))).unwrap();
        let mut relay = Coalesce::new(stream::poll_fn(move |cx| rx.poll_recv(cx)));
        let first = tokio::time::timeout(std::time::Duration::from_secs(5), relay.next())
            .await
            .expect("the ready chunks were held back");
        assert_eq!(first, Some(Ok(Bytes::from_static(b"abc"))));
        tx.send(Ok(Bytes::from_static(b"d"))).unwrap();
        drop(tx);
        assert_eq!(relay.next().await, Some(Ok(Bytes::from_static(b"d"))));
        assert_eq!(relay.next().await, None);
    }
}
