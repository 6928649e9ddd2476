"""The web dashboard in a real headless browser (Debian's Chromium through
chromedriver, driven by Selenium): log in with the one-time URL from
`agency dashboard`, see a pending approval and a stalled handler in "Needs
you", approve with a click and see the call admitted, see a live tool call
appear without reloading, and check that agents' text renders inert, that
a login URL works once and that an action without the CSRF token is
refused. The Lessons page is driven after three AgencyCore runs against
the scripted model server: the score trend, lessons with their utility, a
lesson's page (retired with a reason) and a tool-policy lesson approved
from "Needs you". A screenshot of each page is saved under
target/dashboard-screenshots/."""

import http.client
import json
import os
import pathlib
import shutil
import signal
import subprocess
import time

import anyio
import pytest
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException, StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from conftest import ROOT, Daemon, agency_bin
from test_mcp_daemon import session

XSS_TITLE = "<script>alert(1)</script><img src=x onerror=alert(2)> Garden"
XSS_BODY = "Report <img src=x onerror=alert(3)><script>alert(4)</script> done"
SHOTS = ROOT / "target" / "dashboard-screenshots"

# Agents are `sh -c 'exit 0'`: they end without progress, so a handler
# with work is marked stalled after its first agent's exit. Unconfined:
# the test is about the dashboard, and the sandbox has tests of its own.
SETTINGS = [
    ("[server]", "port", "0"),
    ("[agents]", "runtime", '"command"'),
    ("[agents]", "sandbox", '"off"'),
    ("[agents]", "kill_grace_ms", "300"),
    ("[agents]", "stall_after_exits", "1"),
    ("[agents]", "respawn_backoff_ms", "20"),
    ("[agents.command]", "program", '"sh"'),
    ("[agents.command]", "args", '["-c", "exit 0"]'),
]


def configure(text: str) -> str:
    """Set each key of SETTINGS in its table of the agency.toml `agency
    init` wrote (each key is there, with its default)."""
    lines = text.split("\n")
    for table, key, value in SETTINGS:
        start = lines.index(table)
        for i in range(start + 1, len(lines)):
            if lines[i].startswith("["):
                raise AssertionError(f"{key} not found in {table}")
            if lines[i].split("=")[0].strip() == key:
                lines[i] = f"{key} = {value}"
                break
    return "\n".join(lines)


def find_browser():
    chrome = shutil.which("chromium") or "/usr/bin/chromium"
    driver = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    if not (os.path.exists(chrome) and os.path.exists(driver)):
        pytest.fail("failed to find chromium and chromedriver: scripts/test.sh installs them (apt-get install chromium chromium-driver)")
    return chrome, driver


@pytest.fixture
def dash_daemon(tmp_path):
    home = tmp_path / "home"
    env = dict(os.environ, AGENCY_HOME=str(home))
    subprocess.run([agency_bin(), "init"], env=env, check=True, capture_output=True)
    cfg = home / "agency.toml"
    cfg.write_text(configure(cfg.read_text()))
    proc = subprocess.Popen([agency_bin(), "serve"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    info = home / "daemon.json"
    deadline = time.time() + 30
    while not info.exists():
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            raise RuntimeError(f"daemon did not start: {proc.stderr.read().decode()}")
        time.sleep(0.05)
    d = Daemon(home, proc, json.loads(info.read_text())["addr"])
    d.env = env
    yield d
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.fixture
def browser():
    chrome, driver = find_browser()
    opts = webdriver.ChromeOptions()
    opts.binary_location = chrome
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000"]:
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    b = webdriver.Chrome(service=Service(driver), options=opts)
    yield b
    b.quit()


def console_problems(b):
    """Console lines that say the page broke: a script error, or something
    the Content-Security-Policy blocked (the page needs no inline code)."""
    return [e["message"] for e in b.get_log("browser")
            if "Content Security Policy" in e["message"] or "Uncaught" in e["message"]]


def tool_check_raw(d: Daemon, token: str, command: str):
    """An agent asks whether it may run `command` (as the runtimes ask)."""
    conn = http.client.HTTPConnection(d.addr, timeout=30)
    try:
        conn.request("POST", "/agent/tool-check", body=json.dumps({"tool": "bash", "args": {"command": command}}),
                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        r = conn.getresponse()
        return r.status, json.loads(r.read())
    finally:
        conn.close()


def tool_check(d: Daemon, token: str, command: str):
    status, body = tool_check_raw(d, token, command)
    assert status == 200, body
    return body


def wait(b, what, cond, timeout=30):
    # The page redraws live: an element found a moment ago may be gone
    # (stale); the condition is then tried again on the new one.
    return WebDriverWait(b, timeout, ignored_exceptions=[StaleElementReferenceException]).until(
        lambda _: cond(), message=f"timed out waiting for {what}")


def wait_for(cond, what, timeout=60):
    """Poll `cond` (no browser) until it holds."""
    deadline = time.time() + timeout
    while not cond():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def click(b, css):
    """A real click on the element `css` names, found again if a redraw
    replaced it first."""
    wait(b, f"a click on {css}", lambda: b.find_element(By.CSS_SELECTOR, css).click() or True)


def texts(b, css):
    """The text of every element `css` names, read at one moment."""
    return b.execute_script("return [...document.querySelectorAll(arguments[0])].map(e => e.innerText)", css)


def shot(b, name):
    SHOTS.mkdir(parents=True, exist_ok=True)
    b.save_screenshot(str(SHOTS / f"{name}.png"))


def no_alert(b):
    try:
        text = b.switch_to.alert.text
    except NoAlertPresentException:
        return
    pytest.fail(f"an alert ran: {text}")


def inert(b):
    """No element came from agents' text: no script or img in the page's
    content, and no alert ran."""
    no_alert(b)
    made = b.execute_script("return document.querySelectorAll('#page script, #page img, #activity script, #activity img').length")
    assert made == 0, "agents' text became markup"


def go(b, d, page):
    b.execute_script("location.hash = arguments[0]", page)
    wait(b, f"the {page} page", lambda: b.execute_script("return document.querySelector('#page h1') !== null && document.querySelector('#tabs a.active').dataset.page") == page.split("/")[0])


def test_dashboard_in_a_real_browser(dash_daemon, browser, tmp_path):
    d, b = dash_daemon, browser
    root = d.root_handler()
    ws = tmp_path / "ws"
    ws.mkdir()
    tok = d.mint(root, str(ws))["token"]

    async def setup(a):
        goal = await a.ok("outcome_create", title=XSS_TITLE, parents=[root])
        child = await a.ok("delegate", outcome=goal["outcome"])
        await a.ok("mail_send", to="boss", text=XSS_BODY)
        return child["handler"]

    child = anyio.run(session, d.mcp_url, tok, setup)
    pending = tool_check(d, tok, "sudo ls /root")
    assert pending["decision"] == "pending", pending
    approval = pending["approval"]

    # The one-time URL, from the CLI.
    out = subprocess.run([agency_bin(), "dashboard"], env=d.env, check=True, capture_output=True, text=True).stdout
    url = out.split()[0]
    assert url.startswith(f"http://127.0.0.1:{d.addr.split(':')[1]}/dashboard/login?t="), out

    b.get(url)
    wait(b, "the landing page", lambda: b.execute_script("return document.querySelector('#page h1')?.textContent") == "Needs you")
    assert b.current_url.endswith("/dashboard/") or "/dashboard/#" in b.current_url
    wait(b, "the live stream", lambda: b.find_element(By.ID, "conn").text == "live")

    # The pending approval, with its exact arguments.
    row = f"tr[data-row=approval][data-id='{approval}']"
    wait(b, "the approval row", lambda: b.find_elements(By.CSS_SELECTOR, row))
    args = texts(b, row + " pre.args")[0]
    assert json.loads(args) == {"command": "sudo ls /root"}, args
    # The stalled handler (its first agent exited without progress); it
    # arrives live if it was not there at load.
    wait(b, "the stalled handler", lambda: b.find_elements(By.CSS_SELECTOR, f"tr[data-row=stalled][data-id='{child}']"))
    inert(b)
    shot(b, "needs-you")

    # Approve with one click: the row leaves, the call is now admitted.
    b.execute_script("window.__notReloaded = true")
    click(b, row + " button[data-action=approve]")
    wait(b, "the approval to leave the queue", lambda: not b.find_elements(By.CSS_SELECTOR, row))
    again = tool_check(d, tok, "sudo ls /root")
    assert again["decision"] == "allow", again

    # A budget of one tool call on the child: its second call pauses the
    # subtree; the row shows up live, and raising the limit lifts it.
    st, _ = d.rest("POST", f"/v1/budgets/{child}", {"tool_calls": 1})
    assert st == 200
    child_tok = d.mint(child, str(ws))["token"]
    assert tool_check(d, child_tok, "ls")["decision"] == "allow"
    status, refused = tool_check_raw(d, child_tok, "ls")
    assert status == 403 and refused["error"]["kind"] == "quota", refused
    paused = f"tr[data-row=paused][data-id='{child}']"
    wait(b, "the paused subtree", lambda: b.find_elements(By.CSS_SELECTOR, paused))
    shot(b, "needs-you-paused")
    # Focus the field first: the page does not redraw under a focused
    # field, but may between finding it and focusing it (then find again).
    for _ in range(20):
        try:
            field = b.find_element(By.CSS_SELECTOR, paused + " input[data-limit=tool_calls]")
            assert field.get_attribute("value") == "1"
            field.click()
            break
        except StaleElementReferenceException:
            continue
    field.clear()
    field.send_keys("50")
    wait(b, "the Raise click", lambda: b.find_element(By.XPATH, f"//tr[@data-row='paused'][@data-id='{child}']//button[text()='Raise']").click() or True)
    wait(b, "the pause to lift", lambda: not b.find_elements(By.CSS_SELECTOR, paused))
    st, budgets = d.rest("GET", f"/v1/budgets/{child}")
    assert budgets["limits"]["tool_calls"] == 50 and budgets["paused"] is None, budgets

    # A tool call of the agent shows up live, without a reload.
    async def call_tool(a):
        await a.ok("kb_list")

    anyio.run(session, d.mcp_url, tok, call_tool)
    wait(b, "the live tool call", lambda: b.find_elements(By.CSS_SELECTOR, "#activity li[data-kind='tool.called']"))
    assert b.execute_script("return window.__notReloaded === true"), "the page reloaded"
    shot(b, "needs-you-after-approve")

    # Organisation: the title agents wrote is text.
    go(b, d, "org")
    wait(b, "the child's card", lambda: b.find_elements(By.CSS_SELECTOR, f".card[data-handler='{child}'] h3"))
    h3 = texts(b, f".card[data-handler='{child}'] h3")[0]
    assert "<script>alert(1)</script>" in h3 and "onerror" in h3, h3
    assert b.find_elements(By.CSS_SELECTOR, f".card[data-handler='{child}'] .badge.stalled")
    inert(b)
    shot(b, "organisation")

    go(b, d, "outcomes")
    wait(b, "the DAG", lambda: b.find_elements(By.CSS_SELECTOR, "svg.dag g[data-outcome]"))
    labels = b.execute_script("return [...document.querySelectorAll('svg.dag text')].map(t => t.textContent)")
    assert any("<script>" in t for t in labels), labels
    inert(b)
    shot(b, "outcomes")

    go(b, d, "mail")
    wait(b, "the mail", lambda: b.find_elements(By.CSS_SELECTOR, "pre.body"))
    bodies = texts(b, "pre.body")
    assert any(XSS_BODY in t for t in bodies), bodies
    inert(b)
    shot(b, "mail")

    # Click through to an outcome's history.
    go(b, d, "outcomes")
    wait(b, "the DAG", lambda: b.find_elements(By.CSS_SELECTOR, "svg.dag g[data-outcome] rect"))
    b.execute_script("document.querySelectorAll('svg.dag g[data-outcome]')[1].dispatchEvent(new MouseEvent('click', {bubbles: true}))")
    wait(b, "the history", lambda: b.execute_script("return [...document.querySelectorAll('#page h2')].some(h => h.textContent.startsWith('History of'))"))
    inert(b)
    shot(b, "outcome-history")

    for page in ["runs", "costs", "kb", "orgs", "approvals"]:
        go(b, d, page)
        inert(b)
        shot(b, page)
    # A KB file with several versions: the diff of the last two.
    go(b, d, "kb")
    wait(b, "the files", lambda: b.find_elements(By.CSS_SELECTOR, "#page tbody tr"))
    href = b.execute_script("""return [...document.querySelectorAll('#page tbody tr')]
        .find(r => Number(r.children[2].textContent) > 1).querySelector('a').getAttribute('href')""")
    click(b, f"#page a[href='{href}']")
    wait(b, "the diff", lambda: b.find_elements(By.CSS_SELECTOR, ".diff div.add"))
    inert(b)
    shot(b, "kb-diff")
    # A run's page: timeline, transcript, log.
    go(b, d, "runs")
    wait(b, "a run", lambda: b.find_elements(By.CSS_SELECTOR, "#page td a[href^='#runs/']"))
    click(b, "#page td a[href^='#runs/']")
    wait(b, "the run page", lambda: b.execute_script("return document.querySelector('#page h1')?.textContent.startsWith('Run ')"))
    shot(b, "run")

    # An action without the CSRF token is refused, and changes nothing.
    status = b.execute_async_script(
        """const done = arguments[arguments.length - 1];
        fetch('/dashboard/api/handlers/' + arguments[0] + '/stop', {method: 'POST'}).then(r => done(r.status));""",
        child)
    assert status == 403, status
    st, view = d.rest("GET", f"/v1/handlers/{child}")
    assert st == 200 and view["status"] == "active", view

    assert console_problems(b) == []

    # The stream drops (the daemon stops): the page says so and keeps
    # what it showed.
    go(b, d, "org")
    wait(b, "the cards", lambda: b.find_elements(By.CSS_SELECTOR, ".card"))
    d.proc.send_signal(signal.SIGTERM)
    wait(b, "the reconnecting marker", lambda: b.find_element(By.ID, "conn").text == "reconnecting…")
    assert b.find_elements(By.CSS_SELECTOR, f".card[data-handler='{child}']"), "last known values kept"
    shot(b, "reconnecting")


def test_login_url_works_once_in_the_browser(dash_daemon, browser):
    d, b = dash_daemon, browser
    url = subprocess.run([agency_bin(), "dashboard"], env=d.env, check=True, capture_output=True, text=True).stdout.split()[0]
    b.get(url)
    wait(b, "the landing page", lambda: b.execute_script("return document.querySelector('#page h1')?.textContent") == "Needs you")
    b.get(url)
    assert "used or expired" in b.find_element(By.TAG_NAME, "body").text
    shot(b, "login-reused")
    # The session opened the first time still works; logging out ends it.
    b.get(f"http://{d.addr}/dashboard/")
    wait(b, "the landing page", lambda: b.execute_script("return document.querySelector('#page h1')?.textContent") == "Needs you")
    b.find_element(By.ID, "logout").click()
    wait(b, "the logged-out page", lambda: "agency dashboard" in b.find_element(By.TAG_NAME, "body").text)


def test_dashboard_open_runs_the_opener_and_survives_its_absence(dash_daemon, tmp_path):
    d = dash_daemon
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    seen = tmp_path / "opened"
    opener = bin_dir / "xdg-open"
    opener.write_text(f"#!/bin/sh\necho \"$1\" > {seen}\n")
    opener.chmod(0o755)
    out = subprocess.run([agency_bin(), "dashboard", "--open"], env=dict(d.env, PATH=str(bin_dir)),
                         check=True, capture_output=True, text=True)
    assert seen.read_text().strip() == out.stdout.split()[0]
    empty = tmp_path / "empty"
    empty.mkdir()
    r = subprocess.run([agency_bin(), "dashboard", "--open"], env=dict(d.env, PATH=str(empty)),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "/dashboard/login?t=" in r.stdout
    assert "failed to open a browser" in r.stderr, r.stderr


# The README's offline quickstart: the root handler reads its inbox,
# answers, and acknowledges, played by the scripted model server.
HELLO = {"scenarios": [{"name": "root answers the user", "turns": [
    {"tool_calls": [{"name": "mail_inbox", "input": {}}]},
    {"tool_calls": [{"name": "mail_send", "input": {
        "to": "user", "subject": "Re: {{result:/messages/0/subject}}",
        "text": "You wrote: {{result:/messages/0/body}}"}}]},
    {"tool_calls": [{"name": "mail_ack", "input": {"messages": ["{{result[2]:/messages/0/id}}"]}}]},
    {"text": "Answered."}]}],
    "fallback": {"text": "Nothing scripted; stopping."}}


def test_a_built_in_agents_run_in_the_dashboard(tmp_path, browser):
    b = browser
    script = tmp_path / "hello.json"
    script.write_text(json.dumps(HELLO))
    home = tmp_path / "home"
    env = dict(os.environ, AGENCY_HOME=str(home))
    model = subprocess.Popen([agency_bin(), "model-server", "--script", str(script)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    serve = None
    try:
        model_url = model.stdout.readline().strip()
        assert model_url.startswith("http://127.0.0.1:"), model_url
        subprocess.run([agency_bin(), "init", "--model-server", model_url], env=env, check=True, capture_output=True)
        cfg = home / "agency.toml"
        cfg.write_text("\n".join("port = 0" if l.startswith("port = ") else l for l in cfg.read_text().split("\n")))
        serve = subprocess.Popen([agency_bin(), "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        info = home / "daemon.json"
        deadline = time.time() + 30
        while not info.exists():
            assert serve.poll() is None and time.time() < deadline, "the daemon did not start"
            time.sleep(0.05)
        d = Daemon(home, serve, json.loads(info.read_text())["addr"])

        url = subprocess.run([agency_bin(), "dashboard"], env=env, check=True, capture_output=True, text=True).stdout.split()[0]
        b.get(url)
        wait(b, "the live stream", lambda: b.find_element(By.ID, "conn").text == "live")
        st, _ = d.rest("POST", "/v1/mail", {"to": "root", "text": "hello <b>dashboard</b>"})
        assert st == 200
        # The run's model and tool calls arrive live.
        wait(b, "the agent's model calls", lambda: b.find_elements(By.CSS_SELECTOR, "#activity li[data-kind='model_call.ended']"), timeout=120)
        wait(b, "the answer", lambda: any("You wrote: hello" in (m.get("body") or "") for m in d.rest("GET", "/v1/inbox?all=true")[1]), timeout=120)
        wait(b, "the run to end", lambda: b.find_elements(By.CSS_SELECTOR, "#activity li[data-kind='agent.ended']"), timeout=120)
        shot(b, "live-activity")

        go(b, d, "runs")
        wait(b, "the run", lambda: b.find_elements(By.CSS_SELECTOR, "#page td a[href^='#runs/']"))
        click(b, "#page td a[href^='#runs/']")
        wait(b, "the transcript", lambda: b.find_elements(By.CSS_SELECTOR, "#page .replay"))
        kinds = b.execute_script("return [...document.querySelectorAll('#page tr[data-kind]')].map(r => r.dataset.kind)")
        assert "tool.called" in kinds and "model_call.ended" in kinds, kinds
        replay = " ".join(texts(b, "#page .replay"))
        assert "mail_send" in replay, replay
        inert(b)
        shot(b, "run-builtin")

        go(b, d, "costs")
        wait(b, "the per-model costs", lambda: b.execute_script("return [...document.querySelectorAll('#page td')].some(t => t.textContent === 'scripted')"))
        shot(b, "costs-builtin")
        go(b, d, "mail")
        wait(b, "the answer", lambda: any("You wrote: hello <b>dashboard</b>" in t for t in texts(b, "pre.body")))
        inert(b)
        assert console_problems(b) == []
    finally:
        if serve is not None:
            serve.send_signal(signal.SIGTERM)
            try:
                serve.wait(timeout=15)
            finally:
                if serve.poll() is None:
                    serve.kill()
        model.kill()
        model.wait()


# AgencyCore's offline demo script, its Gatekeeper failing Safety for one
# request and its Learner proposing, besides the demo's lesson, one whose
# title and advice carry markup and a tool-policy lesson (which waits for
# the user once its evidence suffices).
DEMO_SCRIPT = ROOT / "crates" / "agency-cli" / "src" / "demo_pipeline_script.json"
LESSON_RUNS = ["Add a /health endpoint to our web API", "Add a /ready endpoint to our web API",
               "Add a /metrics endpoint to our web API"]
UNSAFE_RUN = "/ready"
POLICY_TITLE = "Ask before sudo"


def lessons_script() -> dict:
    doc = json.loads(DEMO_SCRIPT.read_text())
    scenarios = doc["scenarios"]
    gate = next(s for s in scenarios if s["name"] == "AgencyCore Gatekeeper")
    unsafe = json.loads(gate["turns"][0]["text"])
    unsafe["scorecard"] = {"correctness": 4, "verification": 2, "safety": 1, "clarity": 3, "autonomy": 2}
    unsafe["totalScore"] = 12
    unsafe["decision"] = {"approved": False, "promoteToPortfolio": False, "reason": "runs a command it should not"}
    learner = next(s for s in scenarios if s["name"] == "AgencyCore Learner")
    answer = json.loads(learner["turns"][0]["text"])
    answer["candidateLessons"] += [
        {"title": XSS_TITLE, "lesson": XSS_BODY, "tags": ["http"]},
        {"title": POLICY_TITLE, "lesson": "Ask for approval before running sudo in a stage.", "tags": ["sudo"]},
    ]
    learner["turns"][0]["text"] = json.dumps(answer)
    scenarios.insert(0, {"name": "Gatekeeper, unsafe run",
                         "match": {"system_contains": "You are the Gatekeeper ", "user_contains": UNSAFE_RUN},
                         "turns": [{"text": json.dumps(unsafe)}]})
    # A run that recalls lessons is clearer: the replay gate's evidence.
    clearer = json.loads(gate["turns"][0]["text"])
    clearer["scorecard"]["clarity"] = 5
    clearer["totalScore"] += 1
    scenarios.insert(1, {"name": "Gatekeeper, lessons recalled",
                         "match": {"system_contains": "You are the Gatekeeper ", "user_contains": "Advice, quoted"},
                         "turns": [{"text": json.dumps(clearer)}]})
    return doc


def test_lessons_page_in_a_real_browser(tmp_path, browser):
    b = browser
    script = tmp_path / "lessons.json"
    script.write_text(json.dumps(lessons_script()))
    home = tmp_path / "home"
    env = dict(os.environ, AGENCY_HOME=str(home))
    model = subprocess.Popen([agency_bin(), "model-server", "--script", str(script)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    serve = None
    try:
        model_url = model.stdout.readline().strip()
        assert model_url.startswith("http://127.0.0.1:"), model_url
        subprocess.run([agency_bin(), "init"], env=env, check=True, capture_output=True)
        # The pipeline's llm stages use the default model: the scripted one.
        (home / "agency.toml").write_text(
            f'[server]\nport = 0\n[models.default]\napi = "anthropic"\nbase_url = "{model_url}"\n'
            'model = "scripted"\ndefault_price = { input = 0.0, output = 0.0 }\n')
        serve = subprocess.Popen([agency_bin(), "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        info = home / "daemon.json"
        deadline = time.time() + 30
        while not info.exists():
            assert serve.poll() is None and time.time() < deadline, "the daemon did not start"
            time.sleep(0.05)
        d = Daemon(home, serve, json.loads(info.read_text())["addr"])

        # Three runs: the second fails Safety; two runs' evidence admits
        # the lessons, and the third recalls them.
        for request in LESSON_RUNS:
            r = subprocess.run([agency_bin(), "--json", "pipeline", "run", "agencycore", request, "--wait"],
                               env=env, capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, r.stdout + r.stderr
            assert json.loads(r.stdout)["status"] == "done", r.stdout
            # The replay gate runs after a run; the next run starts once
            # every replay ended, so what it recalls is known.
            wait_for(lambda: all(l["state"] != "replaying" for l in d.rest("GET", "/v1/lessons")[1]),
                     "the lessons' replays")
        st, lessons = d.rest("GET", "/v1/lessons")
        assert st == 200, lessons
        by_title = {l["title"]: l for l in lessons}
        assert by_title[XSS_TITLE]["state"] == "admitted", lessons
        policy = by_title[POLICY_TITLE]
        assert policy["state"] == "awaiting_user", policy
        xss = by_title[XSS_TITLE]

        url = subprocess.run([agency_bin(), "dashboard"], env=env, check=True, capture_output=True, text=True).stdout.split()[0]
        b.get(url)
        wait(b, "the live stream", lambda: b.find_element(By.ID, "conn").text == "live")

        # "Needs you": the tool-policy lesson, to approve or reject.
        row = f"tr[data-row=lesson][data-id='{policy['id']}']"
        wait(b, "the lesson waiting for you", lambda: b.find_elements(By.CSS_SELECTOR, row))
        assert b.find_elements(By.CSS_SELECTOR, row + " button[data-action=approve]")
        assert b.find_elements(By.CSS_SELECTOR, row + " button[data-action=reject]")
        inert(b)
        shot(b, "needs-you-lesson")

        # The Lessons page: the score trend (one bar per run, the unsafe
        # one marked) and the lessons with their utility.
        go(b, d, "lessons")
        wait(b, "the trend", lambda: len(b.find_elements(By.CSS_SELECTOR, "svg.trend g[data-run]")) == 3)
        totals = b.execute_script("return [...document.querySelectorAll('svg.trend g[data-run]')].map(g => [Number(g.dataset.total), g.classList.contains('fail')])")
        assert totals == [[21, False], [12, True], [22, False]], totals
        wait(b, "the lessons", lambda: len(b.find_elements(By.CSS_SELECTOR, "#page tr[data-lesson]")) == 3)
        link = texts(b, f"tr[data-lesson='{xss['id']}'] a")[0]
        assert link == XSS_TITLE, link
        utility = texts(b, f"tr[data-lesson='{xss['id']}'] td.utility")[0]
        assert "1 recalled" in utility and "1 helpful" in utility, utility
        inert(b)
        shot(b, "lessons")

        # A lesson's page: its advice as text, its history and versions;
        # retire it with a reason.
        click(b, f"tr[data-lesson='{xss['id']}'] a")
        wait(b, "the lesson", lambda: b.find_elements(By.CSS_SELECTOR, f".lesson-detail[data-lesson='{xss['id']}']"))
        assert texts(b, ".lesson-detail pre.advice")[0] == XSS_BODY
        assert b.find_elements(By.CSS_SELECTOR, ".lesson-detail tr[data-action=proposed]")
        inert(b)
        shot(b, "lesson")
        for _ in range(20):
            try:
                field = b.find_element(By.CSS_SELECTOR, ".lesson-detail input[data-reason=retire]")
                field.click()
                break
            except StaleElementReferenceException:
                continue
        field.send_keys("superseded by the route template")
        click(b, ".lesson-detail button[data-action=retire]")
        wait(b, "the lesson to retire", lambda: b.find_elements(By.CSS_SELECTOR, ".lesson-detail .badge.s-retired"))
        st, shown = d.rest("GET", f"/v1/lessons/{xss['id']}")
        assert shown["state"] == "retired" and "superseded" in shown["reason"], shown

        # Approve the waiting lesson from "Needs you" with one click.
        go(b, d, "needs")
        click(b, row + " button[data-action=approve]")
        wait(b, "the lesson to leave the queue", lambda: not b.find_elements(By.CSS_SELECTOR, row))
        st, shown = d.rest("GET", f"/v1/lessons/{policy['id']}")
        assert shown["state"] == "admitted", shown
        assert console_problems(b) == []
    finally:
        if serve is not None:
            serve.send_signal(signal.SIGTERM)
            try:
                serve.wait(timeout=15)
            finally:
                if serve.poll() is None:
                    serve.kill()
        model.kill()
        model.wait()
