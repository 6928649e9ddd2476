"""A real Agency daemon in a temporary home, for tests driven by the official
Python MCP client. The `agency` binary comes from AGENCY_BIN (scripts/test.sh
builds it) or target/debug/agency."""

import json
import os
import pathlib
import signal
import subprocess
import time
import urllib.error
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def agency_bin() -> str:
    return os.environ.get("AGENCY_BIN") or str(ROOT / "target" / "debug" / "agency")


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
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"http://{self.addr}{path}", data=data, method=method)
        req.add_header("Authorization", f"Bearer {token or self.admin}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

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
