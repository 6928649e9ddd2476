//! Warnings `agency up` gives about a model that applies but will not
//! work as its author expects: an HTTP tool whose agent has no egress to
//! its base URL, or an MCP tool to its server's URL (the daemon would
//! refuse every call).

use agency_org::{AgencyModel, Agent};

/// A warning for each HTTP tool of `a` whose base URL (or MCP tool whose
/// server URL) its capabilities give
/// it no egress to: the daemon would refuse every call (the same rule as
/// the egress proxy), which is better said at `agency up` than at the
/// first call.
pub(crate) fn unreachable_http_tools(m: &AgencyModel, a: &Agent) -> Vec<String> {
    use agency_core::egress::{EgressPattern, EgressTarget};
    // The agent's own egress, and what its tools declare (granted with them).
    let tool_egress = m
        .all_tools()
        .into_iter()
        .filter(|t| a.tools.contains(&t.name))
        .flat_map(|t| t.egress.iter().map(String::as_str))
        .collect::<Vec<_>>();
    let patterns: Vec<EgressPattern> = a
        .capabilities
        .iter()
        .filter_map(|c| c.strip_prefix("egress:"))
        .map(|c| c.split('=').next().unwrap_or(c))
        .chain(tool_egress)
        .filter_map(|c| EgressPattern::parse(c).ok())
        .collect();
    let mut out = Vec::new();
    for t in m.all_tools() {
        // An HTTP tool's base URL, or an MCP tool's server URL: both are
        // reached through the same egress rule.
        let url = match &t.implementation {
            agency_org::ToolImplementation::Http(h) => &h.base_url,
            agency_org::ToolImplementation::Mcp(agency_org::McpTool { url: Some(u), .. }) => u,
            _ => continue,
        };
        if !a.tools.contains(&t.name) {
            continue;
        }
        let Some((host, port)) = base_authority(url) else {
            continue;
        };
        let Ok(target) = EgressTarget::new(&host, port) else {
            continue;
        };
        if !patterns.iter().any(|p| p.matches(&target)) {
            // The grant that covers it: the port only when the default
            // ports (80, 443) do not.
            let host = if host.contains(':') {
                format!("[{host}]")
            } else {
                host
            };
            let grant = if agency_core::egress::DEFAULT_PORTS.contains(&port) {
                host.clone()
            } else {
                format!("{host}:{port}")
            };
            out.push(format!(
                "agent {} uses tool {}, which calls {host}:{port}, but holds no egress to it: every call will be refused until it does; add the line `- Egress: {grant}` to {} (every agent holding the tool gets it), or \"egress:{grant}\" to the agent's capabilities (agency: {{capabilities: [...]}})",
                a.name, t.name, t.source.file
            ));
        }
    }
    out
}

/// Host and port of an `http(s)://HOST[:PORT]` base URL.
fn base_authority(url: &str) -> Option<(String, u16)> {
    let (rest, default) = if let Some(r) = url.strip_prefix("https://") {
        (r, 443)
    } else if let Some(r) = url.strip_prefix("http://") {
        (r, 80)
    } else {
        return None;
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if let Some(v6) = authority.strip_prefix('[') {
        let (h, after) = v6.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None => default,
        };
        return Some((h.to_owned(), port));
    }
    match authority.rsplit_once(':') {
        Some((h, p)) => Some((h.to_owned(), p.parse().ok()?)),
        None => Some((authority.to_owned(), default)),
    }
}

#[cfg(test)]
mod tests {
    use super::base_authority;

    #[test]
    fn issue12_base_urls_give_host_and_port() {
        for (url, want) in [
            (
                "https://api.example-weather.com",
                Some(("api.example-weather.com", 443)),
            ),
            ("http://127.0.0.1:8080/v1", Some(("127.0.0.1", 8080))),
            ("http://user@h.example:81?x", Some(("h.example", 81))),
            ("https://[::1]:9443/", Some(("::1", 9443))),
            ("https://[::1]", Some(("::1", 443))),
            ("ftp://h.example", None),
            ("http://h.example:notaport", None),
        ] {
            let got = base_authority(url);
            assert_eq!(got.as_ref().map(|(h, p)| (h.as_str(), *p)), want, "{url}");
        }
    }
}
