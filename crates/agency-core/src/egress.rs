//! Egress patterns: which network destinations an `egress:PATTERN`
//! capability lets a handler's agents reach through the daemon's forward
//! proxy (seed 003: deny by default, allowlists).
//!
//! A pattern is a host and an optional port:
//!
//! - `api.github.com` — exactly that host name;
//! - `*.github.com` — any host *below* `github.com` (`api.github.com`,
//!   `a.b.github.com`), not `github.com` itself: grant both when both are
//!   meant, so that a wildcard never silently includes the apex;
//! - `127.0.0.1`, `[::1]` — an IP address, taken as written;
//! - `:PORT` after any of them — that port only. **No port means ports 80
//!   and 443** (plain HTTP and HTTPS), the two a web API or a package
//!   registry is reached on; any other port must be named.
//!
//! Names are lowercased and one trailing dot (`example.com.`, the same DNS
//! name) is dropped; internationalised names must be written in punycode
//! (`xn--…`), which is compared as written. A scheme, path, user name,
//! whitespace, a lone `*`, a wildcard inside a name and an IPv6 address
//! without brackets are refused with a message saying what to write.
//! A name whose last label is numeric (`127.1`, `0x7f.1`) is refused: the
//! resolver would read it as an IPv4 address the pattern does not show.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};

use crate::validate::InvalidInput;

/// The ports a pattern without a port allows.
pub const DEFAULT_PORTS: [u16; 2] = [80, 443];

/// The longest host name DNS allows (without the trailing dot).
const MAX_NAME: usize = 253;
const MAX_LABEL: usize = 63;

/// The host part of a pattern.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum HostPattern {
    /// Exactly this (lowercase, no trailing dot) host name.
    Name(String),
    /// Any host name strictly below this domain (`*.domain`).
    Subdomains(String),
    /// This IP address.
    Ip(IpAddr),
}

/// A parsed `egress:` capability key.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct EgressPattern {
    pub host: HostPattern,
    /// `None`: [`DEFAULT_PORTS`].
    pub port: Option<u16>,
}

/// A destination's host: a name or an address.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Host {
    Name(String),
    Ip(IpAddr),
}

/// Where an agent asked the proxy to connect.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct EgressTarget {
    pub host: Host,
    pub port: u16,
}

fn bad(what: &str, s: &str, why: &str) -> InvalidInput {
    InvalidInput(format!("failed to parse {what} {s:?}: {why}"))
}

/// Refuse what is not a bare host (and port): whitespace, a scheme, a path,
/// credentials.
fn check_bare(what: &str, s: &str) -> Result<(), InvalidInput> {
    if s.is_empty() {
        return Err(bad(
            what,
            s,
            "it is empty; write a host, e.g. api.github.com",
        ));
    }
    if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad(
            what,
            s,
            "whitespace and control characters are not allowed",
        ));
    }
    if s.contains("://") {
        return Err(bad(
            what,
            s,
            "write the host without a scheme, e.g. api.github.com or api.github.com:8443",
        ));
    }
    if s.contains(['/', '?', '#']) {
        return Err(bad(what, s, "write the host only, without a path"));
    }
    if s.contains('@') {
        return Err(bad(what, s, "a user name or password is not allowed"));
    }
    Ok(())
}

/// Split `host[:port]` / `[v6][:port]`; the host keeps its brackets.
fn split_port<'a>(what: &str, s: &'a str) -> Result<(&'a str, Option<u16>), InvalidInput> {
    let (host, port) = if s.starts_with('[') {
        let end = s
            .find(']')
            .ok_or_else(|| bad(what, s, "an IPv6 address needs its closing bracket"))?;
        let (h, rest) = s.split_at(end + 1);
        match rest {
            "" => (h, None),
            r => match r.strip_prefix(':') {
                Some(p) => (h, Some(p)),
                None => return Err(bad(what, s, "expected :PORT after the IPv6 address")),
            },
        }
    } else {
        match s.split_once(':') {
            None => (s, None),
            Some((h, p)) if !p.contains(':') => (h, Some(p)),
            Some(_) => {
                return Err(bad(
                    what,
                    s,
                    "write an IPv6 address in brackets, e.g. [2001:db8::1]:443",
                ));
            }
        }
    };
    let port = match port {
        None => None,
        Some(p) => Some(parse_port(what, s, p)?),
    };
    Ok((host, port))
}

fn parse_port(what: &str, s: &str, p: &str) -> Result<u16, InvalidInput> {
    let n = (!p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()))
        .then(|| p.parse::<u16>().ok())
        .flatten()
        .filter(|n| *n != 0);
    n.ok_or_else(|| bad(what, s, "the port must be a number from 1 to 65535"))
}

/// Parse a host: `[v6]`, an IPv4 address, or a host name (lowercased, one
/// trailing dot dropped).
fn parse_host(what: &str, s: &str, h: &str) -> Result<Host, InvalidInput> {
    if let Some(inner) = h.strip_prefix('[') {
        let inner = inner.strip_suffix(']').unwrap_or(inner);
        return inner
            .parse::<Ipv6Addr>()
            .map(|a| Host::Ip(IpAddr::V6(a)))
            .map_err(|_| {
                bad(
                    what,
                    s,
                    "not a valid IPv6 address (zone ids are not allowed)",
                )
            });
    }
    if let Ok(a) = h.parse::<Ipv4Addr>() {
        return Ok(Host::Ip(IpAddr::V4(a)));
    }
    parse_name(what, s, h).map(Host::Name)
}

fn parse_name(what: &str, s: &str, h: &str) -> Result<String, InvalidInput> {
    if !h.is_ascii() {
        return Err(bad(
            what,
            s,
            "write an internationalised host name in punycode (xn--…)",
        ));
    }
    if h.contains('*') {
        return Err(bad(
            what,
            s,
            "a wildcard is allowed only as the whole first label, e.g. *.github.com",
        ));
    }
    let name = h.strip_suffix('.').unwrap_or(h).to_ascii_lowercase();
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(bad(what, s, "a host name has 1 to 253 characters"));
    }
    for label in name.split('.') {
        let ok = !label.is_empty()
            && label.len() <= MAX_LABEL
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !ok {
            return Err(bad(
                what,
                s,
                "each dot-separated label has 1 to 63 letters, digits, '-' or '_', and does not start or end with '-'",
            ));
        }
    }
    let last = name.rsplit('.').next().unwrap_or_default();
    let hex = last
        .strip_prefix("0x")
        .is_some_and(|d| d.bytes().all(|b| b.is_ascii_hexdigit()));
    if last.bytes().all(|b| b.is_ascii_digit()) || hex {
        return Err(bad(
            what,
            s,
            "not a valid IPv4 address (write all four decimal parts, e.g. 127.0.0.1)",
        ));
    }
    Ok(name)
}

impl EgressPattern {
    /// Parse and normalise a pattern (see the module documentation).
    pub fn parse(s: &str) -> Result<EgressPattern, InvalidInput> {
        const WHAT: &str = "egress pattern";
        check_bare(WHAT, s)?;
        let (h, port) = split_port(WHAT, s)?;
        if h == "*" || h == "*." {
            return Err(bad(
                WHAT,
                s,
                "a pattern for every host is not allowed; name the hosts, e.g. *.github.com",
            ));
        }
        let host = match h.strip_prefix("*.") {
            Some(domain) => match parse_host(WHAT, s, domain)? {
                Host::Name(d) => HostPattern::Subdomains(d),
                Host::Ip(_) => {
                    return Err(bad(
                        WHAT,
                        s,
                        "a wildcard needs a domain name, not an address",
                    ));
                }
            },
            None => match parse_host(WHAT, s, h)? {
                Host::Name(n) => HostPattern::Name(n),
                Host::Ip(a) => HostPattern::Ip(a),
            },
        };
        Ok(EgressPattern { host, port })
    }

    /// Whether a connection to `t` is one this pattern allows.
    pub fn matches(&self, t: &EgressTarget) -> bool {
        let port_ok = match self.port {
            None => DEFAULT_PORTS.contains(&t.port),
            Some(p) => p == t.port,
        };
        port_ok
            && match (&self.host, &t.host) {
                (HostPattern::Name(a), Host::Name(b)) => a == b,
                (HostPattern::Subdomains(d), Host::Name(b)) => is_below(b, d),
                (HostPattern::Ip(a), Host::Ip(b)) => a == b,
                _ => false,
            }
    }

    /// Whether every destination `other` allows, this one allows too: a
    /// holder of `*.github.com` may grant `api.github.com` (a restriction,
    /// like granting a lower level), never the reverse.
    pub fn covers(&self, other: &EgressPattern) -> bool {
        let ports_ok = match (self.port, other.port) {
            (None, None) => true,
            (None, Some(p)) => DEFAULT_PORTS.contains(&p),
            (Some(a), Some(b)) => a == b,
            (Some(_), None) => false,
        };
        ports_ok
            && match (&self.host, &other.host) {
                (HostPattern::Name(a), HostPattern::Name(b)) => a == b,
                (HostPattern::Subdomains(d), HostPattern::Name(b)) => is_below(b, d),
                (HostPattern::Subdomains(d), HostPattern::Subdomains(e)) => {
                    e == d || is_below(e, d)
                }
                (HostPattern::Ip(a), HostPattern::Ip(b)) => a == b,
                _ => false,
            }
    }

    /// An address pattern is taken as written; a name pattern is checked
    /// against what the name resolves to (no local addresses).
    pub fn is_address(&self) -> bool {
        matches!(self.host, HostPattern::Ip(_))
    }

    /// The pattern that allows exactly `t` (for messages: "ask for …").
    pub fn exact(t: &EgressTarget) -> EgressPattern {
        let host = match &t.host {
            Host::Name(n) => HostPattern::Name(n.clone()),
            Host::Ip(a) => HostPattern::Ip(*a),
        };
        let port = (!DEFAULT_PORTS.contains(&t.port)).then_some(t.port);
        EgressPattern { host, port }
    }
}

/// `name` is a strict subdomain of `domain`.
fn is_below(name: &str, domain: &str) -> bool {
    name.strip_suffix(domain)
        .is_some_and(|head| head.len() > 1 && head.ends_with('.'))
}

impl EgressTarget {
    /// A destination from its host (a name, an IPv4 address, or an IPv6
    /// address with or without brackets) and port.
    pub fn new(host: &str, port: u16) -> Result<EgressTarget, InvalidInput> {
        const WHAT: &str = "destination host";
        check_bare(WHAT, host)?;
        if port == 0 {
            return Err(bad(WHAT, host, "port 0 is not a destination"));
        }
        let host = match host.parse::<Ipv6Addr>() {
            Ok(a) => Host::Ip(IpAddr::V6(a)),
            Err(_) => parse_host(WHAT, host, host)?,
        };
        Ok(EgressTarget { host, port })
    }

    /// A destination written `host:port` (a `CONNECT` request's target).
    pub fn parse_authority(s: &str) -> Result<EgressTarget, InvalidInput> {
        const WHAT: &str = "destination";
        check_bare(WHAT, s)?;
        let (h, port) = split_port(WHAT, s)?;
        let port = port.ok_or_else(|| bad(WHAT, s, "write it as HOST:PORT"))?;
        if h.contains('*') {
            return Err(bad(WHAT, s, "a destination is one host, not a pattern"));
        }
        Ok(EgressTarget {
            host: parse_host(WHAT, s, h)?,
            port,
        })
    }

    /// The host as a resolver or socket takes it (no brackets).
    pub fn host_str(&self) -> String {
        match &self.host {
            Host::Name(n) => n.clone(),
            Host::Ip(a) => a.to_string(),
        }
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostPattern::Name(n) => f.write_str(n),
            HostPattern::Subdomains(d) => write!(f, "*.{d}"),
            HostPattern::Ip(IpAddr::V6(a)) => write!(f, "[{a}]"),
            HostPattern::Ip(a) => write!(f, "{a}"),
        }
    }
}

impl fmt::Display for EgressPattern {
    /// The canonical form, as stored in the capability's key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.port {
            None => write!(f, "{}", self.host),
            Some(p) => write!(f, "{}:{p}", self.host),
        }
    }
}

impl fmt::Display for EgressTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            Host::Name(n) => write!(f, "{n}:{}", self.port),
            Host::Ip(IpAddr::V6(a)) => write!(f, "[{a}]:{}", self.port),
            Host::Ip(a) => write!(f, "{a}:{}", self.port),
        }
    }
}

/// Whether `ip` is an address a host-name grant must not lead to: loopback,
/// unspecified, private (RFC 1918, unique local), shared (CGNAT),
/// link-local, multicast and broadcast, and IPv6 forms that embed such an
/// IPv4 address (mapped, compatible, NAT64). A name that resolves there is
/// DNS pointing into the machine or its network (rebinding), not the
/// public service the grant named.
pub fn is_local_address(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => is_local_v4(a),
        IpAddr::V6(a) => {
            let s = a.segments();
            let embedded = if let Some(v4) = a.to_ipv4_mapped() {
                Some(v4)
            } else if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] || s[..6] == [0; 6] {
                // NAT64 (64:ff9b::/96) and the deprecated IPv4-compatible
                // form (::a.b.c.d) carry an IPv4 address in the last 32 bits.
                let [.., a, b, c, d] = a.octets();
                Some(Ipv4Addr::new(a, b, c, d))
            } else {
                None
            };
            a.is_loopback()
                || a.is_unspecified()
                || a.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80
                || (s[0] & 0xffc0) == 0xfec0
                || embedded.is_some_and(is_local_v4)
        }
    }
}

fn is_local_v4(a: Ipv4Addr) -> bool {
    let [o0, o1, ..] = a.octets();
    a.is_loopback()
        || a.is_private()
        || a.is_link_local()
        || a.is_unspecified()
        || a.is_broadcast()
        || a.is_multicast()
        || o0 == 0
        || (o0 == 100 && (o1 & 0xc0) == 64)
}

#[cfg(test)]
#[path = "egress_tests.rs"]
mod tests;
