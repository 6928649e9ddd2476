//! Following a run while it runs, as Server-Sent Events (user only, like
//! every `/v1` route; the service says who may before a stream starts):
//!
//! - `GET /v1/runs/{agent}/transcript/stream` (`agency transcript RUN
//!   --follow`): one event per transcript line, its data the line as a
//!   JSON event (`{"unparsed": LINE}` for a line that is not JSON), read
//!   from the run directory's `transcript.jsonl` as the runtime writes it
//!   (`agency_supervisor::tail`: opened safely, re-checked each step);
//! - `GET /v1/runs/{agent}/log/stream` (`agency logs RUN --follow`): the
//!   output as it is captured, redacted like the stored log, in pieces
//!   (`RunLogChunk`), read from the capture's bounded buffer at this
//!   follower's own offset.
//!
//! Both end with one `end` event (`FollowEnd`) once the run has ended and
//! its last bytes were sent; a run that had already ended is sent its
//! stored record, then `end`. A failure later than the start ends the
//! stream with one `error` event. A follower costs a bounded amount of
//! memory (one step of reading, the longest line a follower is sent),
//! however slowly it reads: nothing is read before it takes the last.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use agency_core::AgentId;
use agency_service::{RunFollow, Service};
use agency_supervisor::agent_log::OutputPiece;
use agency_supervisor::tail::{TailStep, TranscriptTail};
use agency_supervisor::{LiveRun, LiveRuns};
use axum::Router;
use axum::extract::{Path, State};
use axum::response::sse::{self, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::rest::USER;
use crate::server::AppState;
use agency_http::{Answer, parse, service_error};

/// How often a live transcript is looked at for new lines.
const POLL: Duration = Duration::from_millis(200);
/// How often an idle stream sends a comment (a gone client is noticed).
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// The most output one event carries.
const CHUNK: usize = 64 << 10;

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/v1/runs/{agent}/transcript/stream", get(transcript))
        .route("/v1/runs/{agent}/log/stream", get(log))
}

async fn transcript(State(st): State<Arc<AppState>>, Path(agent): Path<String>) -> Answer {
    let agent: AgentId = parse("agent", &agent)?;
    Ok(start(&st, agent, What::Transcript).await)
}

async fn log(State(st): State<Arc<AppState>>, Path(agent): Path<String>) -> Answer {
    let agent: AgentId = parse("agent", &agent)?;
    Ok(start(&st, agent, What::Log).await)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum What {
    Transcript,
    Log,
}

/// The permission and the run's existence are checked first, so a refusal
/// is a plain error rather than a stream.
async fn start(st: &Arc<AppState>, agent: AgentId, what: What) -> Response {
    let svc = st.svc.service().clone();
    let probe = {
        let svc = svc.clone();
        tokio::task::spawn_blocking(move || svc.run_follow(USER, agent)).await
    };
    match probe {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return service_error(&e),
        Err(_) => {
            return agency_http::error(
                http::StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "failed to start following the run: the worker panicked",
            );
        }
    }
    let follow = Follow {
        svc,
        live: st.live.clone(),
        agent,
        what,
        phase: Phase::Find,
        ready: VecDeque::new(),
    };
    let stream = futures_util::stream::unfold(follow, |mut f| async move {
        let e = f.next().await?;
        Some((Ok::<_, Infallible>(e), f))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

/// Where one follower is.
enum Phase {
    /// Looking for the run among the live ones (or learning it ended).
    Find,
    /// Reading a live run's transcript (`None` while a step runs).
    Transcript(Arc<LiveRun>, Option<TranscriptTail>),
    /// Reading a live run's output from this offset.
    Log(Arc<LiveRun>, u64),
    /// Reading the stored record (the run ended).
    Stored,
    /// Sending the stored transcript's lines from this offset.
    StoredLines(Vec<u8>, usize),
    Done,
}

struct Follow {
    svc: Arc<Service>,
    live: Arc<LiveRuns>,
    agent: AgentId,
    what: What,
    phase: Phase,
    /// Events read and not yet sent (one step's worth at most).
    ready: VecDeque<sse::Event>,
}

impl Follow {
    async fn next(&mut self) -> Option<sse::Event> {
        loop {
            if let Some(e) = self.ready.pop_front() {
                return Some(e);
            }
            let phase = std::mem::replace(&mut self.phase, Phase::Done);
            self.phase = match phase {
                Phase::Done => return None,
                Phase::Find => match self.find().await {
                    Ok(Found::Live(run)) if self.what == What::Transcript => {
                        let tail = run.transcript();
                        Phase::Transcript(run, Some(tail))
                    }
                    Ok(Found::Live(run)) => Phase::Log(run, 0),
                    Ok(Found::Ended) => Phase::Stored,
                    Ok(Found::Attached) => self.end(Some(
                        "this agent is a client attached with a minted token: Agency runs no process for it, so there is no transcript or output to follow",
                    )),
                    Err(why) => self.failed(&why),
                },
                Phase::Transcript(run, tail) => self.transcript_step(run, tail).await,
                Phase::Log(run, at) => self.log_step(run, at).await,
                Phase::Stored => self.stored().await,
                Phase::StoredLines(bytes, at) => self.stored_line(bytes, at),
            };
        }
    }

    /// The live run, once the supervisor has it, or that it ended (then
    /// its record is stored) or is an attached client.
    async fn find(&self) -> Result<Found, String> {
        let mut runs = self.live.changes();
        let mut committed = self.svc.events_committed();
        loop {
            // Marked before looking: a change from now on wakes the wait.
            runs.mark_unchanged();
            committed.mark_unchanged();
            if let Some(run) = self.live.get(self.agent) {
                return Ok(Found::Live(run));
            }
            let (svc, agent) = (self.svc.clone(), self.agent);
            match tokio::task::spawn_blocking(move || svc.run_follow(USER, agent)).await {
                Ok(Ok(RunFollow::Live)) => {}
                Ok(Ok(RunFollow::Ended)) => return Ok(Found::Ended),
                Ok(Ok(RunFollow::Attached)) => return Ok(Found::Attached),
                Ok(Err(e)) => return Err(e.to_string()),
                Err(_) => return Err("the worker panicked".to_owned()),
            }
            // Live in the store and not yet among the supervisor's: a run
            // being started.
            tokio::select! {
                r = runs.changed() => if r.is_err() { tokio::time::sleep(POLL).await },
                r = committed.changed() => if r.is_err() { tokio::time::sleep(POLL).await },
            }
        }
    }

    async fn transcript_step(&mut self, run: Arc<LiveRun>, tail: Option<TranscriptTail>) -> Phase {
        let Some(mut tail) = tail else {
            return Phase::Done;
        };
        // Seen before the read: after the end, one read gets all there is.
        let ended = run.has_ended();
        let stepped = tokio::task::spawn_blocking(move || {
            let step = tail.step();
            (tail, step)
        })
        .await;
        let Ok((mut tail, step)) = stepped else {
            return self.failed("the worker panicked");
        };
        match step {
            TailStep::Lines(lines) if !lines.is_empty() => {
                self.lines(lines.iter().map(String::as_str));
                Phase::Transcript(run, Some(tail))
            }
            TailStep::Refused(why) => self.failed(&why),
            TailStep::Lines(_) | TailStep::Missing if ended => {
                if !tail.opened() {
                    // Never there while it ran: the record says what was
                    // kept (the runtime may have written it at the end).
                    return Phase::Stored;
                }
                if let Some(last) = tail.rest() {
                    self.lines([last.as_str()].into_iter());
                }
                self.end(None)
            }
            TailStep::Lines(_) | TailStep::Missing => {
                tokio::select! {
                    () = tokio::time::sleep(POLL) => {}
                    () = run.ended() => {}
                }
                Phase::Transcript(run, Some(tail))
            }
        }
    }

    async fn log_step(&mut self, run: Arc<LiveRun>, at: u64) -> Phase {
        let Some(out) = run.output() else {
            run.ended().await;
            return Phase::Stored;
        };
        let mut changes = out.changes();
        changes.mark_unchanged();
        let ended = run.has_ended();
        let (piece, closed) = out.read(at, CHUNK);
        match piece {
            OutputPiece::Bytes(b) => {
                let (text, used) = text_of(&b, closed);
                if used > 0 {
                    self.chunk(text);
                    return Phase::Log(run, at + used as u64);
                }
            }
            OutputPiece::Skipped(n) => {
                self.chunk(format!(
                    "\n[agency: {n} bytes of output were cut before this follower read them (it fell behind); the stored log keeps the first and the last part]\n"
                ));
                return Phase::Log(run, at + n);
            }
            OutputPiece::Nothing if closed && ended => return self.end(None),
            OutputPiece::Nothing => {}
        }
        // Nothing new, or only the start of a character: wait for more.
        tokio::select! {
            r = changes.changed() => if r.is_err() { run.ended().await },
            () = run.ended(), if !ended => {}
        }
        Phase::Log(run, at)
    }

    /// The run has ended: its stored record, then the end.
    async fn stored(&mut self) -> Phase {
        let (svc, agent, what) = (self.svc.clone(), self.agent, self.what);
        let read = tokio::task::spawn_blocking(move || match what {
            What::Transcript => svc
                .run_transcript_stored(USER, agent)
                .map(Stored::Transcript),
            What::Log => svc.agent_run_log(USER, agent).map(Stored::Log),
        })
        .await;
        match read {
            Ok(Ok(Stored::Transcript(Some(bytes)))) => Phase::StoredLines(bytes, 0),
            Ok(Ok(Stored::Transcript(None))) => self.end(Some(
                "no transcript was recorded for this run (it was killed before writing one, its transcript was refused, or it is an attached client)",
            )),
            Ok(Ok(Stored::Log(log))) if !log.captured => self.end(Some(
                "no output was kept for this run (reaped after a daemon restart, an attached client, or a run from before logs were kept)",
            )),
            Ok(Ok(Stored::Log(log))) => {
                let mut text = log.text.as_str();
                while !text.is_empty() {
                    let mut cut = text.len().min(CHUNK);
                    while !text.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    self.chunk(text[..cut].to_owned());
                    text = &text[cut..];
                }
                self.end(None)
            }
            Ok(Err(e)) => self.failed(&e.to_string()),
            Err(_) => self.failed("the worker panicked"),
        }
    }

    /// One line of the stored transcript at a time (it may be large).
    fn stored_line(&mut self, bytes: Vec<u8>, at: usize) -> Phase {
        let rest = &bytes[at.min(bytes.len())..];
        if rest.is_empty() {
            return self.end(None);
        }
        let n = rest
            .iter()
            .position(|b| *b == b'\n')
            .map_or(rest.len(), |i| i + 1);
        let line = String::from_utf8_lossy(&rest[..n]);
        self.lines([line.trim_end_matches('\n')].into_iter());
        Phase::StoredLines(bytes, at + n)
    }

    fn lines<'a>(&mut self, lines: impl Iterator<Item = &'a str>) {
        for line in lines {
            if let Some(ev) = agency_service::transcript_event(line) {
                self.ready
                    .push_back(sse::Event::default().data(ev.to_string()));
            }
        }
    }

    fn chunk(&mut self, text: String) {
        let piece = agency_api::RunLogChunk {
            agent: self.agent,
            text,
        };
        self.ready.push_back(
            sse::Event::default().data(serde_json::to_string(&piece).unwrap_or_default()),
        );
    }

    fn end(&mut self, note: Option<&str>) -> Phase {
        let end = agency_api::FollowEnd {
            agent: self.agent,
            note: note.map(str::to_owned),
        };
        self.ready.push_back(
            sse::Event::default()
                .event("end")
                .data(serde_json::to_string(&end).unwrap_or_default()),
        );
        Phase::Done
    }

    fn failed(&mut self, why: &str) -> Phase {
        let what = match self.what {
            What::Transcript => "transcript",
            What::Log => "output",
        };
        let body = serde_json::json!({
            "error": {
                "kind": "failed",
                "message": format!("failed to follow the {what} of agent {}: {why}", self.agent),
            }
        });
        self.ready
            .push_back(sse::Event::default().event("error").data(body.to_string()));
        Phase::Done
    }
}

enum Found {
    Live(Arc<LiveRun>),
    Ended,
    Attached,
}

enum Stored {
    Transcript(Option<Vec<u8>>),
    Log(agency_api::RunLog),
}

/// The text of `bytes` and how many of them it used: a character whose
/// last bytes have not come yet waits for them (unless nothing more comes:
/// `last`); invalid bytes become U+FFFD.
fn text_of(bytes: &[u8], last: bool) -> (String, usize) {
    let mut out = String::with_capacity(bytes.len());
    let mut used = 0;
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        used += chunk.valid().len();
        let bad = chunk.invalid();
        if bad.is_empty() {
            continue;
        }
        let at_end = used + bad.len() == bytes.len();
        if at_end && !last && bad.len() < 4 && bad[0] >= 0xC0 {
            break;
        }
        out.push('\u{FFFD}');
        used += bad.len();
    }
    (out, used)
}

#[cfg(test)]
mod tests {
    use super::text_of;

    #[test]
    fn a_character_split_between_pieces_waits_for_its_end() {
        let s = "é€😀".as_bytes();
        assert_eq!(text_of(&s[..1], false), (String::new(), 0));
        assert_eq!(text_of(&s[..3], false), ("é".to_owned(), 2));
        assert_eq!(text_of(s, false), ("é€😀".to_owned(), s.len()));
        assert_eq!(text_of(&s[..3], true), ("é\u{FFFD}".to_owned(), 3));
        assert_eq!(text_of(b"a\xffb", false), ("a\u{FFFD}b".to_owned(), 3));
    }
}
