"""The real daemon on port 0, driven by the official Python MCP client:
every tool is listed, the KB / outcome / mail tools work, and the refusals
the seed's rules require are refused (as isError results, or 401)."""

import json
import os
import urllib.error
import urllib.request

import anyio
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

TOOLS = """kb_list kb_browse kb_read kb_read_version kb_history kb_create kb_write
outcome_view outcome_ancestors outcome_subtree outcome_create outcome_update outcome_complete
outcome_close outcome_request_completion mail_send mail_send_deferred mail_inbox mail_ack
permissions_list permissions_grant delegate force_stop state_read state_write audit_read
audit_submit""".split()


class Agent:
    """One MCP session authenticated with one agent token."""

    def __init__(self, session: ClientSession):
        self.s = session

    async def call(self, tool: str, **args):
        res = await self.s.call_tool(tool, args)
        text = "".join(getattr(c, "text", "") for c in res.content)
        is_error = getattr(res, "is_error", None)
        if is_error is None:
            is_error = getattr(res, "isError", False)
        return bool(is_error), text

    async def ok(self, tool: str, **args):
        err, text = await self.call(tool, **args)
        assert not err, f"{tool} failed: {text}"
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text

    async def refused(self, tool: str, **args) -> str:
        err, text = await self.call(tool, **args)
        assert err, f"{tool} should have been refused, got: {text}"
        return text


async def session(url: str, token: str, body):
    client = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with client:
        async with streamable_http_client(url, http_client=client) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                return await body(Agent(s))


def test_tools_and_rules_through_the_python_client(daemon, tmp_path):
    root = daemon.root_handler()
    ws = tmp_path / "ws"
    ws.mkdir()
    root_tok = daemon.mint(root, str(ws))

    async def as_root(a: Agent):
        tools = await a.s.list_tools()
        names = {t.name for t in tools.tools}
        assert set(TOOLS) <= names, set(TOOLS) - names
        for t in tools.tools:
            assert t.description and len(t.description) > 40, t.name
            schema = getattr(t, "input_schema", None) or getattr(t, "inputSchema", None)
            assert schema.get("type") == "object", t.name

        created = await a.ok("kb_create", description="Plan", content="v1")
        fid = created["file"]
        read = await a.ok("kb_read", file=fid)
        assert read["content"] == "v1" and read["version"] == 1
        await a.ok("kb_write", file=fid, content="v2", base_version=1, base_hash=read["hash"])
        stale = await a.refused("kb_write", file=fid, content="v3", base_version=1, base_hash=read["hash"])
        assert "current version is 2" in stale, stale
        hist = await a.ok("kb_history", file=fid)
        assert [v["version"] for v in hist["versions"]] == [1, 2]

        root_outcome = root
        goal = await a.ok("outcome_create", title="Ship the garden", parents=[root_outcome])
        goal_id = goal["outcome"]
        chains = (await a.ok("outcome_ancestors", outcome=goal_id))["chains"]
        assert [o["id"] for o in chains[0]] == [goal_id, root_outcome]
        sub = await a.ok("outcome_subtree", outcome=root_outcome)
        assert any(o["id"] == goal_id for o in sub["outcomes"])
        await a.ok("mail_send", to="boss", text="Started on the garden.")

        # Paths resolve inside the workspace only.
        (ws / "notes.md").write_text("from a file")
        from_path = await a.ok("kb_create", description="From path", path="notes.md")
        assert from_path
        os.symlink("/etc/passwd", ws / "escape")
        os.symlink("/etc", ws / "etcdir")
        for bad in ["../outside.md", "/etc/passwd", "escape", "etcdir/passwd", "a\x00b", "", "."]:
            msg = await a.refused("kb_create", description="bad", path=bad)
            assert "path" in msg.lower() or "workspace" in msg.lower(), (bad, msg)
        both = await a.refused("kb_create", description="both", content="x", path="notes.md")
        assert "exactly one" in both.lower() or "either" in both.lower(), both

        # Delegate a child: the root can no longer write inside it.
        leaf = await a.ok("outcome_create", title="Beds laid out", parents=[goal_id])
        leaf_id = leaf["outcome"]
        d = await a.ok("delegate", outcome=goal_id)
        return fid, goal_id, leaf_id, d["handler"]

    fid, goal_id, leaf_id, underling = anyio.run(session, daemon.mcp_url, root_tok["token"], as_root)

    under_tok = daemon.mint(underling)

    async def as_underling(a: Agent):
        # A file it holds no capability on does not exist for it.
        missing = await a.refused("kb_read", file=fid)
        assert "no such KB file" in missing, missing
        sub = await a.ok("outcome_create", title="Soil bought", parents=[leaf_id])
        child = await a.ok("delegate", outcome=sub["outcome"])
        await a.ok("mail_send", to="boss", text="Working on it.")
        return child["handler"]

    deeper = anyio.run(session, daemon.mcp_url, under_tok["token"], as_underling)
    deep_tok = daemon.mint(deeper)

    async def as_deep(a: Agent):
        # Only boss and direct underlings: not the boss's boss.
        msg = await a.refused("mail_send", to=root, text="skip-level")
        assert "boss" in msg, msg

    anyio.run(session, daemon.mcp_url, deep_tok["token"], as_deep)

    async def root_again(a: Agent):
        msg = await a.refused("outcome_update", outcome=leaf_id, title="meddling")
        assert "responsible" in msg, msg

    root_tok2 = root_tok  # the same agent is still live

    anyio.run(session, daemon.mcp_url, root_tok2["token"], root_again)

    # A revoked token stops working; no token is 401.
    status, body = daemon.rest("DELETE", f"/v1/tokens/{deep_tok['agent']}")
    assert status == 200 and body["revoked"] is True
    for token in [deep_tok["token"], None]:
        req = urllib.request.Request(
            daemon.mcp_url,
            data=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode(),
            method="POST",
        )
        req.add_header("Content-Type", "application/json")
        req.add_header("Accept", "application/json, text/event-stream")
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=10)
        assert e.value.code == 401
        assert "www-authenticate" not in {k.lower() for k in e.value.headers.keys()}


def test_foreign_host_and_origin_are_refused(daemon):
    for header, value in [("Host", "evil.example"), ("Origin", "http://evil.example")]:
        req = urllib.request.Request(daemon.mcp_url, data=b"{}", method="POST")
        req.add_header(header, value)
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=10)
        assert e.value.code == 403
