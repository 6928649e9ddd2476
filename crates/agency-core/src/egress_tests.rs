//! Tables and properties for egress patterns: parsing, matching, covering
//! and the local-address rule.

#![allow(clippy::unwrap_used)]

use proptest::prelude::*;

use super::*;

fn pat(s: &str) -> EgressPattern {
    EgressPattern::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn target(s: &str) -> EgressTarget {
    EgressTarget::parse_authority(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

#[test]
fn patterns_are_normalised() {
    for (input, canonical) in [
        ("api.github.com", "api.github.com"),
        ("API.GitHub.COM", "api.github.com"),
        ("example.com.", "example.com"),
        ("*.Example.com", "*.example.com"),
        ("*.example.com.", "*.example.com"),
        ("example.com:8443", "example.com:8443"),
        ("127.0.0.1", "127.0.0.1"),
        ("127.0.0.1:5432", "127.0.0.1:5432"),
        ("[::1]", "[::1]"),
        ("[::1]:8080", "[::1]:8080"),
        ("[2001:DB8:0:0::1]:443", "[2001:db8::1]:443"),
        ("xn--bcher-kva.example", "xn--bcher-kva.example"),
        ("_dmarc.example.com", "_dmarc.example.com"),
        ("localhost", "localhost"),
        ("*.com", "*.com"),
    ] {
        assert_eq!(pat(input).to_string(), canonical, "{input}");
        // The canonical form is a fixed point.
        assert_eq!(pat(canonical).to_string(), canonical, "{canonical}");
    }
}

#[test]
fn bad_patterns_say_what_to_write() {
    for (input, hint) in [
        ("", "empty"),
        ("https://api.github.com", "without a scheme"),
        ("api.github.com/repos", "without a path"),
        ("api.github.com?x", "without a path"),
        ("user:pw@api.github.com", "user name"),
        ("api.github.com ", "whitespace"),
        (" api.github.com", "whitespace"),
        ("api .github.com", "whitespace"),
        ("a\tb", "whitespace"),
        ("*", "every host"),
        ("*.", "every host"),
        ("*:443", "every host"),
        ("api.*.com", "first label"),
        ("*.*.com", "first label"),
        ("*api.com", "first label"),
        ("*.127.0.0.1", "domain name"),
        ("::1", "brackets"),
        ("2001:db8::1:443", "brackets"),
        ("[::1", "closing bracket"),
        ("[::1]8080", ":PORT"),
        ("[fe80::1%eth0]", "IPv6"),
        ("[not-v6]", "IPv6"),
        ("example.com:", "port"),
        ("example.com:0", "port"),
        ("example.com:65536", "port"),
        ("example.com:+80", "port"),
        ("example.com:http", "port"),
        ("bücher.example", "punycode"),
        ("a..b", "label"),
        ("example.com..", "label"),
        ("-a.com", "label"),
        ("a-.com", "label"),
        ("a!.com", "label"),
        (".", "1 to 253"),
        ("127.1", "IPv4"),
        ("0x7f.1", "IPv4"),
        ("0x7f000001", "IPv4"),
        ("127.000.000.001", "IPv4"),
        ("1.2.3.4.5", "IPv4"),
    ] {
        let e = EgressPattern::parse(input).expect_err(input).0;
        assert!(
            e.starts_with("failed to parse egress pattern"),
            "{input}: {e}"
        );
        assert!(e.contains(hint), "{input}: {e} (wanted {hint:?})");
    }
    let long = format!("{}.com", "a".repeat(64));
    assert!(EgressPattern::parse(&long).is_err());
    let too_long = vec!["abcdefghi"; 26].join(".");
    assert!(too_long.len() > 253);
    assert!(EgressPattern::parse(&too_long).is_err());
}

#[test]
fn matching_table() {
    let cases: &[(&str, &str, bool)] = &[
        // Exact names, default ports.
        ("example.com", "example.com:443", true),
        ("example.com", "example.com:80", true),
        ("example.com", "example.com:8080", false),
        ("example.com", "www.example.com:443", false),
        ("example.com", "evilexample.com:443", false),
        ("example.com", "example.com.evil.net:443", false),
        ("example.com", "EXAMPLE.com.:443", true),
        // A wildcard is the subdomains, not the apex.
        ("*.example.com", "api.example.com:443", true),
        ("*.example.com", "a.b.example.com:443", true),
        ("*.example.com", "example.com:443", false),
        ("*.example.com", "evilexample.com:443", false),
        ("*.example.com", "api.evilexample.com:443", false),
        ("*.example.com", "example.com.evil.net:443", false),
        ("*.example.com", "api.example.com:22", false),
        // Ports.
        ("example.com:8443", "example.com:8443", true),
        ("example.com:8443", "example.com:443", false),
        ("*.example.com:22", "git.example.com:22", true),
        ("*.example.com:22", "git.example.com:443", false),
        // Addresses are compared as addresses, never with names.
        ("127.0.0.1:5432", "127.0.0.1:5432", true),
        ("127.0.0.1:5432", "localhost:5432", false),
        ("localhost:5432", "127.0.0.1:5432", false),
        ("127.0.0.1", "127.0.0.1:443", true),
        ("[::1]:8080", "[::1]:8080", true),
        ("[::1]:8080", "[0:0:0:0:0:0:0:1]:8080", true),
        ("[::1]:8080", "127.0.0.1:8080", false),
        ("[::ffff:127.0.0.1]:80", "127.0.0.1:80", false),
        // Punycode is compared as written.
        ("xn--bcher-kva.example", "xn--bcher-kva.example:443", true),
        (
            "*.xn--bcher-kva.example",
            "a.xn--bcher-kva.example:443",
            true,
        ),
    ];
    for (p, t, want) in cases {
        assert_eq!(pat(p).matches(&target(t)), *want, "{p} vs {t}");
    }
}

#[test]
fn targets_parse_like_connect_lines_and_uri_hosts() {
    assert_eq!(target("Example.COM.:443").to_string(), "example.com:443");
    assert_eq!(target("[::1]:80").to_string(), "[::1]:80");
    assert!(EgressTarget::parse_authority("example.com").is_err());
    assert!(EgressTarget::parse_authority("*.example.com:443").is_err());
    assert!(EgressTarget::parse_authority("example.com:0").is_err());
    assert!(EgressTarget::parse_authority("a@example.com:443").is_err());
    assert!(EgressTarget::parse_authority("127.1:80").is_err());
    // A URI's host, bracketed or not.
    assert_eq!(
        EgressTarget::new("[::1]", 8080).unwrap(),
        target("[::1]:8080")
    );
    assert_eq!(
        EgressTarget::new("::1", 8080).unwrap(),
        target("[::1]:8080")
    );
    assert_eq!(
        EgressTarget::new("Api.Example.com", 80).unwrap().host_str(),
        "api.example.com"
    );
    assert_eq!(EgressTarget::new("::1", 80).unwrap().host_str(), "::1");
    assert!(EgressTarget::new("example.com", 0).is_err());
    assert!(EgressTarget::new("example.com:80", 80).is_err());
}

#[test]
fn covering_is_restriction() {
    for (a, b, want) in [
        ("*.github.com", "api.github.com", true),
        ("*.github.com", "a.b.github.com", true),
        ("*.github.com", "*.api.github.com", true),
        ("*.github.com", "*.github.com", true),
        ("*.github.com", "github.com", false),
        ("*.github.com", "evilgithub.com", false),
        ("api.github.com", "*.github.com", false),
        ("github.com", "*.github.com", false),
        ("example.com", "example.com:443", true),
        ("example.com", "example.com:22", false),
        ("example.com:443", "example.com", false),
        ("example.com:443", "example.com:443", true),
        ("127.0.0.1", "127.0.0.1:80", true),
        ("127.0.0.1", "localhost", false),
    ] {
        assert_eq!(pat(a).covers(&pat(b)), want, "{a} covers {b}");
    }
}

#[test]
fn local_addresses() {
    for (a, local) in [
        ("127.0.0.1", true),
        ("127.8.9.10", true),
        ("0.0.0.0", true),
        ("10.1.2.3", true),
        ("172.16.0.1", true),
        ("172.31.255.255", true),
        ("172.32.0.1", false),
        ("192.168.1.1", true),
        ("169.254.169.254", true),
        ("100.64.0.1", true),
        ("100.128.0.1", false),
        ("224.0.0.1", true),
        ("255.255.255.255", true),
        ("8.8.8.8", false),
        ("140.82.112.3", false),
        ("::1", true),
        ("::", true),
        ("fe80::1", true),
        ("fd00::1", true),
        ("fec0::1", true),
        ("ff02::1", true),
        ("::ffff:127.0.0.1", true),
        ("::ffff:10.0.0.1", true),
        ("::ffff:8.8.8.8", false),
        ("::127.0.0.1", true),
        ("64:ff9b::7f00:1", true),
        ("64:ff9b::808:808", false),
        ("2606:4700::1111", false),
    ] {
        let ip: IpAddr = a.parse().unwrap();
        assert_eq!(is_local_address(ip), local, "{a}");
    }
}

fn label() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9-]{0,6}[a-z0-9]"
}

fn name() -> impl Strategy<Value = String> {
    prop::collection::vec(label(), 1..4).prop_map(|l| l.join("."))
}

proptest! {
    /// A wildcard matches exactly the names that end in "." + domain, and
    /// never the domain itself, whatever the case or a trailing dot.
    #[test]
    fn wildcard_is_dot_suffix(domain in name(), host in name(), sub in label(), upper in any::<bool>(), dot in any::<bool>()) {
        let p = pat(&format!("*.{domain}"));
        let spell = |h: &str| {
            let h = if upper { h.to_ascii_uppercase() } else { h.to_owned() };
            if dot { format!("{h}.") } else { h }
        };
        let t = |h: &str| EgressTarget::new(&spell(h), 443).unwrap();
        let below = format!("{sub}.{domain}");
        let glued = format!("{sub}{domain}");
        prop_assert!(p.matches(&t(&below)));
        prop_assert!(!p.matches(&t(&domain)));
        prop_assert!(!p.matches(&t(&glued)));
        prop_assert_eq!(p.matches(&t(&host)), host.ends_with(&format!(".{domain}")));
    }

    /// An exact name matches itself on the default ports only, or on the
    /// named port only.
    #[test]
    fn exact_names_and_ports(host in name(), other in name(), port in 1u16.., named in 1u16..) {
        let p = pat(&host);
        let t = |h: &str, port| EgressTarget::new(h, port).unwrap();
        prop_assert_eq!(p.matches(&t(&host, port)), DEFAULT_PORTS.contains(&port));
        prop_assert_eq!(p.matches(&t(&other, 443)), other == host);
        let p = pat(&format!("{host}:{named}"));
        prop_assert_eq!(p.matches(&t(&host, port)), port == named);
    }

    /// Covering means what it says: whatever the narrower pattern matches,
    /// the wider one matches too.
    #[test]
    fn covers_implies_matches(a in name(), b in name(), wa in any::<bool>(), wb in any::<bool>(),
                              pa in prop::option::of(prop::sample::select(vec![22u16, 80, 443])),
                              pb in prop::option::of(prop::sample::select(vec![22u16, 80, 443])),
                              host in name(), port in prop::sample::select(vec![22u16, 80, 443, 8080])) {
        let mk = |n: &str, w: bool, p: Option<u16>| {
            let h = if w { format!("*.{n}") } else { n.to_owned() };
            pat(&match p { Some(p) => format!("{h}:{p}"), None => h })
        };
        let (wide, narrow) = (mk(&a, wa, pa), mk(&b, wb, pb));
        let t = EgressTarget::new(&host, port).unwrap();
        if wide.covers(&narrow) && narrow.matches(&t) {
            prop_assert!(wide.matches(&t));
        }
    }

    /// Parsing never panics, and whatever parses has a canonical form that
    /// parses to the same pattern.
    #[test]
    fn parse_round_trips(s in "[a-zA-Z0-9.*:\\[\\]_-]{0,40}") {
        if let Ok(p) = EgressPattern::parse(&s) {
            prop_assert_eq!(EgressPattern::parse(&p.to_string()).unwrap(), p);
        }
    }
}
