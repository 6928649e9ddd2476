"""The peer of `agency-bench` item 2: an MCP server built with the official
Python MCP SDK (PyPI `mcp`; in 2.x FastMCP is called MCPServer) doing the
same work as Agency's `kb_read` on every call:

1. the bearer token's hash is looked up in SQLite, with its agent (a revoked
   token or an ended agent is refused);
2. the caller's access level to the file is looked up (no access: refused);
3. the 4 KiB file is read;
4. a read-audit row is recorded, batched as Agency batches them (written
   in one transaction per 64 reads).

Streamable HTTP on 127.0.0.1 at /mcp, in one of two modes: `fast`,
stateless with JSON answers (`stateless_http=True`, `json_response=True`),
as Agency's daemon serves them and the SDK's fastest mode, so both sides
pay for the same protocol; or `default`, the SDK's defaults (a session per
client, answers as SSE), what its quickstart gives.
Logging is at WARNING so no access log line is written per request (the
daemon writes none either).

    python python_peer.py --port N --db PATH --content FILE --file UUID --token T [--mode fast|default]
"""

import argparse
import hashlib
import sqlite3
import time

from mcp.server.mcpserver import Context, MCPServer

AUDIT_BATCH = 64


def digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=32).hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--content", required=True)
    ap.add_argument("--file", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--mode", choices=["fast", "default"], default="fast")
    args = ap.parse_args()

    with open(args.content, "rb") as f:
        content = f.read()
    db = sqlite3.connect(args.db, check_same_thread=False, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.executescript(
        """
        CREATE TABLE IF NOT EXISTS files (id TEXT PRIMARY KEY, version INTEGER,
            hash TEXT, description TEXT, content BLOB);
        CREATE TABLE IF NOT EXISTS agents (id TEXT PRIMARY KEY, handler TEXT, ended_at INTEGER);
        CREATE TABLE IF NOT EXISTS tokens (hash TEXT PRIMARY KEY, agent TEXT, revoked_at INTEGER);
        CREATE TABLE IF NOT EXISTS caps (handler TEXT, file TEXT, level TEXT,
            PRIMARY KEY (handler, file));
        CREATE TABLE IF NOT EXISTS read_audit (file TEXT, handler TEXT, agent TEXT, at INTEGER);
        """
    )
    handler, agent = "handler-1", "agent-1"
    db.execute("INSERT OR REPLACE INTO agents VALUES (?, ?, NULL)", (agent, handler))
    db.execute("INSERT OR REPLACE INTO tokens VALUES (?, ?, NULL)", (digest(args.token.encode()), agent))
    db.execute("INSERT OR REPLACE INTO caps VALUES (?, ?, 'write')", (handler, args.file))
    db.execute(
        "INSERT OR REPLACE INTO files VALUES (?, 1, ?, ?, ?)",
        (args.file, "blake2b:" + digest(content), "benchmark file, 4 KiB", content),
    )
    pending: list[tuple[str, str, str, int]] = []

    server = MCPServer("python-peer", log_level="WARNING")

    @server.tool()
    def kb_read(file: str, ctx: Context) -> dict:
        """Read the latest version of a file."""
        auth = (ctx.headers or {}).get("authorization", "")
        if not auth.startswith("Bearer "):
            raise ValueError("unauthorized: no bearer token")
        who = db.execute(
            "SELECT a.id, a.handler FROM tokens t JOIN agents a ON a.id = t.agent"
            " WHERE t.hash = ? AND t.revoked_at IS NULL AND a.ended_at IS NULL",
            (digest(auth[len("Bearer ") :].strip().encode()),),
        ).fetchone()
        if who is None:
            raise ValueError("unauthorized: unknown token")
        level = db.execute(
            "SELECT level FROM caps WHERE handler = ? AND file = ?", (who[1], file)
        ).fetchone()
        if level is None:
            raise ValueError(f"file {file} not found")
        row = db.execute(
            "SELECT id, version, hash, description, content FROM files WHERE id = ?", (file,)
        ).fetchone()
        if row is None:
            raise ValueError(f"file {file} not found")
        pending.append((file, who[1], who[0], int(time.time() * 1000)))
        if len(pending) >= AUDIT_BATCH:
            db.execute("BEGIN")
            db.executemany("INSERT INTO read_audit VALUES (?, ?, ?, ?)", pending)
            db.execute("COMMIT")
            pending.clear()
        return {
            "file": row[0],
            "kind": "document",
            "description": row[3],
            "level": level[0],
            "version": row[1],
            "hash": row[2],
            "encoding": "utf-8",
            "content": row[4].decode("utf-8"),
        }

    server.run(
        "streamable-http",
        host="127.0.0.1",
        port=args.port,
        json_response=args.mode == "fast",
        stateless_http=args.mode == "fast",
    )


if __name__ == "__main__":
    main()
