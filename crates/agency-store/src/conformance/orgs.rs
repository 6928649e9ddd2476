//! Applied organisations and their tools: rows replaced and listed, the
//! agents stood up for them, the grants they made.

use agency_core::{CapabilityId, Level, Resource, Timestamp};

use super::New;
use super::fixtures::*;
use crate::{OrgAgentRow, OrgAgentStatus, OrgGrantRow, OrgRow, OrgToolRow};

pub fn organisations_agents_grants_and_tools(new: &New) {
    let (_d, store) = new();
    let (h1, h2) = wr(&store, |tx| {
        let h1 = add_handler(tx, 1, None)?;
        Ok((h1, add_handler(tx, 2, Some(h1))?))
    });
    let org = |name: &str, hash: &str| OrgRow {
        name: name.to_owned(),
        model_json: "{}".into(),
        model_hash: hash.to_owned(),
        executive: h1,
        applied_at: Timestamp(1),
        retired_at: None,
    };
    let org_agent = |name: &str, handler, status| OrgAgentRow {
        org: "acme".into(),
        agent: name.to_owned(),
        agency: "acme".into(),
        handler,
        def_hash: "d".into(),
        runtime: None,
        status,
        updated_at: Timestamp(1),
    };
    let cap_id = wr(&store, |tx| {
        tx.insert_capability(&cap(h2, Resource::Repo("agency".into()), Level::Read, None))
    });
    let grant = |holder: &str, key: &str, capability: CapabilityId| OrgGrantRow {
        org: "acme".into(),
        holder: holder.to_owned(),
        key: key.to_owned(),
        level: Level::Read,
        capability,
    };
    wr(&store, |tx| {
        tx.put_org(&org("zeta", "z"))?;
        tx.put_org(&org("acme", "a1"))?;
        tx.put_org(&org("acme", "a2"))?;
        tx.put_org_agent(&org_agent("writer", h2, OrgAgentStatus::Active))?;
        tx.put_org_agent(&org_agent("boss", h1, OrgAgentStatus::Active))?;
        tx.put_org_agent(&org_agent("writer", h2, OrgAgentStatus::Retired))?;
        tx.put_org_grant(&grant("writer", "repo:agency", cap_id))?;
        tx.put_org_grant(&grant("boss", "repo:agency", cap_id))?;
        tx.put_org_grant(&grant("boss", "kb:notes", cap_id))
    });
    rd(&store, |tx| {
        assert_eq!(tx.org("acme")?, Some(org("acme", "a2")), "replaced");
        assert_eq!(tx.org("none")?, None);
        let names: Vec<String> = tx.orgs()?.into_iter().map(|o| o.name).collect();
        assert_eq!(names, ["acme", "zeta"]);
        let agents = tx.org_agents("acme")?;
        assert_eq!(
            agents,
            [
                org_agent("boss", h1, OrgAgentStatus::Active),
                org_agent("writer", h2, OrgAgentStatus::Retired)
            ]
        );
        assert!(tx.org_agents("zeta")?.is_empty());
        assert_eq!(tx.org_agent_by_handler(h2)?.unwrap().agent, "writer");
        assert_eq!(tx.org_agent_by_handler(hid(9))?, None);
        let keys: Vec<(String, String)> = tx
            .org_grants("acme")?
            .into_iter()
            .map(|g| (g.holder, g.key))
            .collect();
        assert_eq!(
            keys,
            [
                ("boss".to_owned(), "kb:notes".to_owned()),
                ("boss".to_owned(), "repo:agency".to_owned()),
                ("writer".to_owned(), "repo:agency".to_owned())
            ]
        );
        Ok(())
    });
    wr(&store, |tx| tx.delete_org_grant("acme", "boss", "kb:notes"));
    assert_eq!(rd(&store, |tx| tx.org_grants("acme")).len(), 2);

    // Tools.
    let tool = |name: &str, org: &str, hash: &str| OrgToolRow {
        name: name.to_owned(),
        org: org.to_owned(),
        def_json: "{}".into(),
        def_hash: hash.to_owned(),
        updated_at: Timestamp(1),
    };
    wr(&store, |tx| {
        tx.put_org_tool(&tool("search", "acme", "1"))?;
        tx.put_org_tool(&tool("deploy", "acme", "1"))?;
        tx.put_org_tool(&tool("lint", "zeta", "1"))?;
        tx.put_org_tool(&tool("search", "acme", "2"))
    });
    rd(&store, |tx| {
        assert_eq!(tx.org_tool("search")?, Some(tool("search", "acme", "2")));
        assert_eq!(tx.org_tool("none")?, None);
        let names = |tools: Vec<OrgToolRow>| tools.into_iter().map(|t| t.name).collect::<Vec<_>>();
        assert_eq!(names(tx.org_tools(None)?), ["deploy", "lint", "search"]);
        assert_eq!(names(tx.org_tools(Some("acme"))?), ["deploy", "search"]);
        Ok(())
    });
    wr(&store, |tx| tx.delete_org_tool("deploy"));
    assert_eq!(rd(&store, |tx| tx.org_tool("deploy")), None);
}
