"""The peer of `agency-bench` item 2: an MCP server built with the official
Python MCP SDK (PyPI `mcp`; in 2.x FastMCP is called MCPServer) doing the same
work as Agency's `kb_read` minus Agency's checks: it answers `kb_read` with a
4 KiB file read from SQLite on every call.

Streamable HTTP on 127.0.0.1 at /mcp, stateful sessions with SSE replies
(`stateless_http=False`, `json_response=False`), as Agency's daemon serves
them, so both sides pay for the same protocol. Logging is at WARNING so no
access log line is written per request (the daemon writes none either).

    python python_peer.py --port N --db PATH --content FILE --file UUID
"""

import argparse
import hashlib
import sqlite3

from mcp.server.mcpserver import MCPServer


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--content", required=True)
    ap.add_argument("--file", required=True)
    args = ap.parse_args()

    with open(args.content, "rb") as f:
        content = f.read()
    db = sqlite3.connect(args.db, check_same_thread=False, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute(
        "CREATE TABLE IF NOT EXISTS files (id TEXT PRIMARY KEY, version INTEGER,"
        " hash TEXT, description TEXT, content BLOB)"
    )
    db.execute(
        "INSERT OR REPLACE INTO files VALUES (?, 1, ?, ?, ?)",
        (args.file, "blake2b:" + hashlib.blake2b(content).hexdigest(), "benchmark file, 4 KiB", content),
    )

    server = MCPServer("python-peer", log_level="WARNING")

    @server.tool()
    def kb_read(file: str) -> dict:
        """Read the latest version of a file."""
        row = db.execute(
            "SELECT id, version, hash, description, content FROM files WHERE id = ?", (file,)
        ).fetchone()
        if row is None:
            raise ValueError(f"file {file} not found")
        return {
            "file": row[0],
            "kind": "document",
            "description": row[3],
            "version": row[1],
            "hash": row[2],
            "encoding": "utf-8",
            "content": row[4].decode("utf-8"),
        }

    server.run(
        "streamable-http",
        host="127.0.0.1",
        port=args.port,
        json_response=False,
        stateless_http=False,
    )


if __name__ == "__main__":
    main()
