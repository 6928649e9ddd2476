"""A real Agency daemon in a temporary home, for tests driven by the official
Python MCP client. The `agency` binary comes from AGENCY_BIN (scripts/test.sh
builds it) or target/debug/agency."""

import http.client
import json
import os
import pathlib
import signal
import socket
import subprocess
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def agency_bin() -> str:
    return os.environ.get("AGENCY_BIN") or str(ROOT / "target" / "debug" / "agency")


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over a Unix socket (the daemon's `daemon.sock`)."""

    def __init__(self, path: str):
        super().__init__("localhost", timeout=30)
        self.socket_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.socket_path)


class Daemon:
    def __init__(self, home: pathlib.Path, proc: subprocess.Popen, addr: str):
        self.home = home
        self.proc = proc
        self.addr = addr
        self.admin = (home / "admin.token").read_text().strip()

    @property
    def mcp_url(self) -> str:
        return f"http://{self.addr}/mcp"

    def rest(self, method: str, path: str, body=None, token=None):
        """The admin REST API, served only on the home's Unix socket."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {token or self.admin}"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        conn = UnixHTTPConnection(str(self.home / "daemon.sock"))
        try:
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            return resp.status, json.loads(resp.read() or b"null")
        finally:
            conn.close()

    def mint(self, handler: str, workspace: str | None = None) -> dict:
        body = {"handler": handler}
        if workspace:
            body["workspace"] = workspace
        status, minted = self.rest("POST", "/v1/tokens", body)
        assert status == 200, minted
        return minted

    def root_handler(self) -> str:
        status, st = self.rest("GET", "/v1/status")
        assert status == 200, st
        return st["root_handler"]


@pytest.fixture
def daemon(tmp_path):
    home = tmp_path / "home"
    env = dict(os.environ, AGENCY_HOME=str(home))
    subprocess.run([agency_bin(), "init"], env=env, check=True, capture_output=True)
    proc = subprocess.Popen([agency_bin(), "serve"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    info = home / "daemon.json"
    deadline = time.time() + 30
    while not info.exists():
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            raise RuntimeError(f"daemon did not start: {proc.stderr.read().decode()}")
        time.sleep(0.05)
    addr = json.loads(info.read_text())["addr"]
    d = Daemon(home, proc, addr)
    yield d
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, proc.stderr.read().decode()
    assert not info.exists(), "daemon.json must be removed on clean shutdown"
