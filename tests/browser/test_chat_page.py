"""The chat page (``/``) in headless Chromium, against the real gateway and the scripted upstream.

Needs Debian's chromium and chromium-driver (``scripts/install_browser.sh``) and selenium. When
they are missing the tests fail, never skip: CI installs them.

What the page must do (SPEC "Who calls us"): stream the ``challenge`` texts into the bubble as
they arrive; at ``close`` keep only the recommend in the bubble and show the challenges as cards
(each description once on the page) and the ``suggestions`` as chips that send the next message;
show the envelope's Korean ``message`` on ``error``, after what was already shown; and close its
EventSource on every terminal event so the browser never reconnects into a second generation. A dropped connection (a TCP relay in the test resets it mid-answer) is left
to the browser's own reconnect with ``Last-Event-ID``: the gateway continues the same answer,
or ends it with its error, or answers 204, which stops the browser. Reconnects are counted
twice: as upstream chat requests and as the browser's own network requests (Chromium's
performance log).

The page's tests run twice: against a gateway without API keys, and against one with
``API_KEYS`` set, where the page gets in with nothing but the visitor token (a cookie) the
gateway hands out with the page itself (docs/security.md). Every page load records the
violations of its Content-Security-Policy (``securitypolicyviolation``), and the tests assert
there are none, beside one that shows the policy is enforced. What the gateway does not send
on demand (``suggestions``, an ``error`` after some text) comes from a scripted stand-in that
serves the same page (tests/support/scripted_page.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from app.chat.planning import OFF_TOPIC_REPLY
from app.domain.errors import UpstreamFailed
from app.streams.log import StreamAborted
from tests.support.gateway import ROOT, GatewayProcess
from tests.support.scripted_page import ScriptedPage, answer_events, error_events
from tests.support.store import store_copy
from tests.upstream.scripted_openai import (
    DEFAULT_ANSWER,
    ScriptedUpstreamThread,
    expected_display_text,
)

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select
except ImportError:  # reported by the fixture as a failure
    webdriver = None

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
SCREENSHOT = ROOT / "docs" / "chat-page.png"
API = "/ai/chatbot/recommendation/"
#: Never on the page, not even for a moment: keys, fences, braces (SPEC "Display text").
FORBIDDEN = ("recommend", "challenges", '"title"', "description", "```", "json", "{")
#: EventSource reconnects after 3 s unless the server sends ``retry:``; wait longer than that.
RECONNECT_WINDOW_S = 3.5
STREAM_TIMEOUT_S = 20.0

_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1100,900",
    "--lang=ko-KR",
)

# Records every state of the page text, not only what a poll happens to see.
_WATCH_JS = """
window.__leaks = [];
const forbidden = arguments[0];
new MutationObserver(() => {
  const text = document.body.textContent;
  for (const word of forbidden) {
    if (text.includes(word)) window.__leaks.push([word, text]);
  }
}).observe(document.body, {childList: true, subtree: true, characterData: true});
"""

# Keeps every EventSource the page creates, to read its readyState.
_TRACK_SOURCES_JS = """
const Native = window.EventSource;
window.__sources = [];
window.EventSource = class extends Native {
  constructor(...args) {
    super(...args);
    window.__sources.push(this);
  }
};
"""

# Installed before any page script runs (a CDP script for every new document): every violation
# of the page's Content-Security-Policy, as the browser reports it to the page.
_CSP_JS = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__csp.push(`${e.effectiveDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber}`);
});
"""

_SNAPSHOT_JS = """
const answers = document.querySelectorAll('#chat-log > li.msg.bot[data-state]');
const last = answers[answers.length - 1];
return {
  count: answers.length,
  state: last ? last.dataset.state : null,
  text: last ? last.querySelector('.bubble-text').textContent : '',
  page: document.body.innerText,
  leaks: window.__leaks.length,
};
"""

_LAST_ANSWER_JS = """
const answers = document.querySelectorAll('#chat-log > li.msg.bot[data-state]');
const last = answers[answers.length - 1];
const all = (selector) => Array.from(last.querySelectorAll(selector), (n) => n.textContent);
return {
  state: last.dataset.state,
  text: last.querySelector('.bubble-text').textContent,
  titles: all('.card-title'),
  descriptions: all('.card-text'),
  labels: all('.badge'),
  chips: all('.suggestions button'),
  bubbleHidden: last.querySelector('.bubble').hidden,
  error: all('.error-text').join(''),
  busy: document.getElementById('chat-log').getAttribute('aria-busy'),
  buttonsDisabled: Array.from(document.querySelectorAll('button'), (b) => b.disabled),
};
"""


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.exists()]
    if missing:
        pytest.fail(
            f"browser tests need Chromium and chromedriver; missing {', '.join(missing)}. "
            "Install them with scripts/install_browser.sh "
            "(as root: apt-get install -y chromium chromium-driver)",
            pytrace=False,
        )
    if webdriver is None:
        pytest.fail("browser tests need selenium: .venv/bin/pip install selenium", pytrace=False)
    options = Options()
    options.binary_location = str(CHROMIUM)
    for flag in _FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    service = Service(executable_path=str(CHROMEDRIVER))
    driver = webdriver.Chrome(service=service, options=options)
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": _CSP_JS})
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def keyed_gateway(
    upstream: ScriptedUpstreamThread,
    store_template: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[GatewayProcess]:
    """The session's gateway settings, with API_KEYS set: the page must get in by its token."""
    env = {
        "QDRANT_PATH": str(store_copy(store_template, tmp_path_factory.mktemp("store") / "q")),
        "LLM_BASE_URL": upstream.base_url,
        "LLM_READ_TIMEOUT": "2",
        "SSE_PING_INTERVAL": "0.3",
        "MAX_MESSAGE_CHARS": "100",
        "API_KEYS": "a-key-the-page-never-sees",
    }
    with GatewayProcess(env) as gw:
        yield gw


@pytest.fixture(params=["no API_KEYS", "API_KEYS"])
def chat_gateway(request: pytest.FixtureRequest, gateway: GatewayProcess) -> GatewayProcess:
    if request.param == "API_KEYS":
        keyed: GatewayProcess = request.getfixturevalue("keyed_gateway")
        return keyed
    return gateway


@pytest.fixture
def page(browser: Any, chat_gateway: GatewayProcess, scripted: ScriptedUpstreamThread) -> Any:
    """A fresh page load (a new sessionId), watched for leaks, with an empty network log."""
    browser.get_log("browser")  # console messages of earlier tests
    browser.get(chat_gateway.url + "/")
    browser.execute_script(_WATCH_JS, list(FORBIDDEN))
    browser.get_log("performance")  # drop what the page load itself logged
    return browser


def _api_requests(driver: Any) -> list[str]:
    """URLs of gateway API requests the browser sent since the last call (reconnects too)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            url = message["params"]["request"]["url"]
            if API in url:
                urls.append(url)
    return urls


def _no_leak(text: str) -> None:
    for word in FORBIDDEN:
        assert word not in text, (word, text)


def _submit_base_info(driver: Any, location: str, work_type: str, category_label: str) -> None:
    Select(driver.find_element(By.ID, "location")).select_by_visible_text(location)
    Select(driver.find_element(By.ID, "workType")).select_by_visible_text(work_type)
    Select(driver.find_element(By.ID, "category")).select_by_visible_text(category_label)
    driver.find_element(By.ID, "base-info-submit").click()


def _send_message(driver: Any, text: str) -> None:
    box = driver.find_element(By.ID, "message")
    box.clear()
    box.send_keys(text)
    driver.find_element(By.ID, "free-text-submit").click()


def _follow(driver: Any, answers_before: int) -> list[str]:
    """Poll the newest answer until it ends; every page text seen is checked for leaks.

    Returns the distinct bubble texts observed while it was streaming, in order."""
    seen: list[str] = []
    deadline = time.monotonic() + STREAM_TIMEOUT_S
    while True:
        snap = driver.execute_script(_SNAPSHOT_JS)
        _no_leak(snap["page"])
        if snap["count"] > answers_before:
            if snap["state"] != "streaming":
                break
            if not seen or seen[-1] != snap["text"]:
                seen.append(snap["text"])
        assert time.monotonic() < deadline, f"no terminal event within {STREAM_TIMEOUT_S}s"
        time.sleep(0.01)
    leaks = driver.execute_script("return window.__leaks.slice(0, 3);")
    assert not leaks, leaks
    return seen


def _answers(driver: Any) -> int:
    return len(driver.find_elements(By.CSS_SELECTOR, "#chat-log > li.msg.bot[data-state]"))


def _last_answer(driver: Any) -> dict[str, Any]:
    result: dict[str, Any] = driver.execute_script(_LAST_ANSWER_JS)
    return result


def _screenshot(driver: Any) -> None:
    """docs/chat-page.png: the first answer with its cards, nothing hovered. Only with
    UPDATE_SCREENSHOT=1: a test run must not rewrite tracked files."""
    if os.environ.get("UPDATE_SCREENSHOT") != "1":
        return
    size = driver.get_window_size()
    driver.set_window_size(1100, 1150)
    ActionChains(driver).move_to_element(driver.find_element(By.TAG_NAME, "h1")).perform()
    driver.execute_script("document.activeElement.blur();")
    SCREENSHOT.parent.mkdir(exist_ok=True)
    driver.save_screenshot(str(SCREENSHOT))
    driver.set_window_size(size["width"], size["height"])


def _assert_idle(answer: dict[str, Any]) -> None:
    assert answer["busy"] == "false"
    assert not any(answer["buttonsDisabled"]), "the forms are usable again"


def _assert_each_once(driver: Any, texts: list[str]) -> None:
    """Each text is on the page exactly once (hidden nodes count too)."""
    page = driver.execute_script("return document.body.textContent;")
    assert {text: page.count(text) for text in texts} == dict.fromkeys(texts, 1)


def _console_errors(driver: Any) -> list[str]:
    """The browser's console errors since the last call (a refused load or inline code too)."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def _csp_violations(driver: Any) -> list[str]:
    violations: list[str] = driver.execute_script("return window.__csp;")
    return violations


def test_base_info_streams_live_then_cards_then_free_text(
    page: Any, scripted: ScriptedUpstreamThread
) -> None:
    scripted.set_scenario("ok", token_delay=0.02)
    titles = [c["title"] for c in DEFAULT_ANSWER["challenges"]]
    descriptions = [c["description"] for c in DEFAULT_ANSWER["challenges"]]

    recommend = DEFAULT_ANSWER["recommend"]

    _submit_base_info(page, "바닷가", "현장직", "플로깅")
    seen = _follow(page, 0)
    final = expected_display_text()
    intermediate = {len(text) for text in seen if 0 < len(text) < len(final)}
    assert len(intermediate) >= 2, f"the bubble did not grow live: {sorted(intermediate)}"
    for text in seen:
        assert final.startswith(text), text  # it only ever grows
    assert max(intermediate) > len(recommend), "the challenges streamed into the bubble too"
    answer = _last_answer(page)
    assert answer["state"] == "done"
    assert answer["text"] == recommend, "at close the cards replace the streamed challenges"
    assert answer["titles"] == titles
    assert answer["descriptions"] == descriptions
    assert answer["labels"] == ["플로깅"] * 3
    _assert_each_once(page, descriptions + titles)
    _assert_idle(answer)
    _screenshot(page)

    _send_message(page, "주말에 할 수 있는 챌린지 추천해 줘")
    _follow(page, 1)
    second = _last_answer(page)
    assert second["state"] == "done"
    assert second["text"] == recommend
    assert second["labels"] == ["플로깅"] * 3, "the session kept the base-info category"
    _assert_idle(second)
    assert page.find_element(By.ID, "message").get_attribute("value") == ""

    time.sleep(RECONNECT_WINDOW_S)
    requests = [urlsplit(url) for url in _api_requests(page)]
    assert [r.path for r in requests] == [API + "base-info", API + "free-text"], requests
    first_query, second_query = (parse_qs(r.query) for r in requests)
    assert first_query["category"] == ["PLOGGING"], "the code is sent, the label is shown"
    assert first_query["location"] == ["바닷가"] and first_query["workType"] == ["현장직"]
    assert second_query["message"] == ["주말에 할 수 있는 챌린지 추천해 줘"]
    session_ids = {q["sessionId"][0] for q in (first_query, second_query)}
    assert len(session_ids) == 1 and len(session_ids.pop()) == 36, "one UUID per page load"
    assert len(scripted.chat_requests) == 2, "one upstream generation per submit"
    assert _answers(page) == 2
    assert _console_errors(page) == [], "the page logged errors"
    assert _csp_violations(page) == [], "the page broke its own Content-Security-Policy"


def test_upstream_error_is_readable_and_never_reconnects(
    page: Any, scripted: ScriptedUpstreamThread
) -> None:
    scripted.set_scenario("http_error", status=500)
    _submit_base_info(page, "도시", "사무직", "제로웨이스트")
    _follow(page, 0)
    answer = _last_answer(page)
    assert answer["state"] == "error"
    assert answer["error"] == UpstreamFailed.default_message
    assert answer["titles"] == []
    _assert_idle(answer)
    visible = page.find_element(By.CSS_SELECTOR, ".error-note").is_displayed()
    assert visible, "the error is on screen"

    time.sleep(RECONNECT_WINDOW_S)
    assert len(scripted.chat_requests) == 1, "the browser reconnected into a second generation"
    assert len(_api_requests(page)) == 1
    assert _answers(page) == 1
    assert _last_answer(page)["error"] == UpstreamFailed.default_message


def test_nonsense_gets_the_friendly_reply(page: Any, scripted: ScriptedUpstreamThread) -> None:
    _send_message(page, "ㅁㄴㅇㄹ")
    _follow(page, 0)
    answer = _last_answer(page)
    assert answer["state"] == "done"
    assert answer["text"] == OFF_TOPIC_REPLY
    assert answer["titles"] == [] and answer["error"] == ""
    assert scripted.chat_requests == [], "nonsense never reaches the model"
    user = page.find_elements(By.CSS_SELECTOR, "#chat-log > li.msg.user .bubble")
    assert [u.text for u in user] == ["ㅁㄴㅇㄹ"]


@pytest.fixture(scope="module")
def resume_gateway(
    upstream: ScriptedUpstreamThread,
    store_template: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[GatewayProcess]:
    """A second gateway whose generations outlive a dropped client for a while (live resume)."""
    env = {
        "QDRANT_PATH": str(store_copy(store_template, tmp_path_factory.mktemp("store") / "q")),
        "LLM_BASE_URL": upstream.base_url,
        "SSE_PING_INTERVAL": "0.3",
        "STREAM_RESUME_GRACE_SECONDS": "10",
    }
    with GatewayProcess(env) as gw:
        yield gw


def _drop_mid_answer(browser: Any, proxy: _CuttableProxy, retarget: int | None = None) -> str:
    """Load the page through ``proxy``, ask, and reset the connection once text is showing
    (no terminal event: the EventSource's own onerror). Returns the text shown at the cut."""
    browser.get(proxy.url + "/")
    browser.execute_script(_WATCH_JS, list(FORBIDDEN))
    browser.execute_script(_TRACK_SOURCES_JS)
    browser.get_log("performance")
    _submit_base_info(browser, "산", "재택근무", "비건")
    deadline = time.monotonic() + STREAM_TIMEOUT_S
    while not (shown := browser.execute_script(_SNAPSHOT_JS)["text"]):
        assert time.monotonic() < deadline, "the answer never started"
        time.sleep(0.01)
    if retarget is not None:
        proxy.retarget(retarget)
    proxy.cut()
    return str(shown)


def _after_the_drop(browser: Any, proxy: _CuttableProxy) -> None:
    """The browser reconnected once, then stopped: no loop, no second generation."""
    time.sleep(RECONNECT_WINDOW_S)
    assert len(_api_requests(browser)) == 2, "one reconnect, then nothing"
    assert proxy.connections_after_cut >= 1
    states = browser.execute_script("return window.__sources.map((s) => s.readyState);")
    assert states == [2], "the EventSource ended CLOSED"


def test_dropped_connection_resumes_the_live_answer(
    browser: Any, resume_gateway: GatewayProcess, scripted: ScriptedUpstreamThread
) -> None:
    # The gateway keeps generating for 10 s after the drop; the browser reconnects after the
    # 1 s `retry:` hint with Last-Event-ID and the bubble continues where it stopped.
    scripted.set_scenario("ok", token_delay=0.05)
    with _CuttableProxy(resume_gateway.port) as proxy:
        shown = _drop_mid_answer(browser, proxy)
        seen = _follow(browser, 0)
        final = expected_display_text()
        assert len(shown) < len(final), "the cut came mid-answer"
        for text in seen:
            assert final.startswith(text), text  # it only ever grows: nothing twice
        answer = _last_answer(browser)
        assert answer["state"] == "done", answer
        assert answer["text"] == DEFAULT_ANSWER["recommend"]
        assert answer["titles"] == [c["title"] for c in DEFAULT_ANSWER["challenges"]]
        assert answer["error"] == ""
        _assert_idle(answer)
        _after_the_drop(browser, proxy)
    assert len(scripted.chat_requests) == 1, "one upstream generation for the whole answer"
    assert scripted.stats["streams_aborted_by_client"] == 0


def test_dropped_connection_without_grace_ends_with_the_servers_message(
    browser: Any, chat_gateway: GatewayProcess, scripted: ScriptedUpstreamThread
) -> None:
    # Default settings: the generation stops the moment its client is gone, so the reconnect
    # gets what was generated and not yet shown, then the server's error (499). With API_KEYS
    # the reconnect is the same visitor's (its token), so it may resume its own stream.
    scripted.set_scenario("ok", token_delay=0.05)
    with _CuttableProxy(chat_gateway.port) as proxy:
        _drop_mid_answer(browser, proxy)
        _follow(browser, 0)
        answer = _last_answer(browser)
        assert answer["state"] == "error"
        assert answer["error"] == StreamAborted.default_message
        assert answer["text"], "what arrived before the drop stays"
        assert expected_display_text().startswith(answer["text"]), "no text twice"
        _assert_idle(answer)
        _after_the_drop(browser, proxy)
    assert len(scripted.chat_requests) == 1


def test_reconnect_to_a_process_that_lacks_the_stream_gets_204_and_stops(
    browser: Any,
    gateway: GatewayProcess,
    resume_gateway: GatewayProcess,
    scripted: ScriptedUpstreamThread,
) -> None:
    # The reconnect lands on another process without shared storage: 204, the browser stops
    # (CLOSED) and the page reports the drop. Never a new generation there.
    scripted.set_scenario("ok", token_delay=0.05)
    with _CuttableProxy(gateway.port) as proxy:
        _drop_mid_answer(browser, proxy, retarget=resume_gateway.port)
        _follow(browser, 0)
        answer = _last_answer(browser)
        assert answer["state"] == "error"
        assert answer["error"] == "연결이 끊겼어요. 잠시 후 다시 시도해 주세요."
        assert answer["text"]
        _assert_idle(answer)
        _after_the_drop(browser, proxy)
    assert len(scripted.chat_requests) == 1


class _CuttableProxy:
    """A loopback TCP relay to the gateway whose open connections can be reset at once."""

    def __init__(self, target_port: int) -> None:
        self._target = ("127.0.0.1", target_port)  # connections made from now on go there
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._cut = False
        self.connections_after_cut = 0

    def __enter__(self) -> _CuttableProxy:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._listener.close()
        self.cut()

    def retarget(self, port: int) -> None:
        """Later connections (the reconnect) go to another gateway."""
        self._target = ("127.0.0.1", port)

    def cut(self) -> None:
        with self._lock:
            self._cut = True
            sockets = list(self._sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                # Linger 0: the close() in _pump sends a reset, as a dropped network would.
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                # Wakes the pump blocked in recv(); a close() from here would not.
                sock.shutdown(socket.SHUT_RD)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self._target)
            with self._lock:
                if self._cut:
                    self.connections_after_cut += 1
                self._sockets += [client, server]
            for src, dst in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        if self._cut:
            src.close()
            return
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def test_message_is_capped_at_100_characters(page: Any) -> None:
    box = page.find_element(By.ID, "message")
    box.send_keys("가" * 150)
    assert box.get_attribute("value") == "가" * 100
    assert page.find_element(By.ID, "message-count").text == "100/100"


def test_page_assets_load_and_nothing_else_is_served(page: Any) -> None:
    loaded = page.execute_script(
        "return [document.styleSheets.length, getComputedStyle(document.body).margin];"
    )
    assert loaded == [1, "0px"], "chat.css applied"
    assert page.find_element(By.ID, "message-count").text == "0/100", "chat.js ran"
    status = page.execute_script("return fetch('static/index.html').then((r) => r.status);")
    assert status == 404, "only the listed assets are served from /static"


def test_the_pages_policy_is_enforced(page: Any, chat_gateway: GatewayProcess) -> None:
    # The page loaded without breaking its policy (the full answer is checked above); what an
    # injection would try is refused: inline script and style, a foreign connection, a frame.
    assert _csp_violations(page) == []
    tried = page.execute_script(
        """
        const script = document.createElement('script');
        script.textContent = 'window.__inline = true;';
        document.head.appendChild(script);
        const styled = document.createElement('p');
        styled.setAttribute('style', 'color: rgb(255, 0, 0)');
        document.body.appendChild(styled);
        const color = getComputedStyle(styled).color;
        styled.remove();
        return fetch('http://127.0.0.2:9/').then(() => 'sent', () => 'refused')
          .then((connect) => [window.__inline === true, color, connect]);
        """
    )
    assert tried == [False, "rgb(31, 42, 36)", "refused"]  # not run, not styled, not sent
    deadline = time.monotonic() + 2
    while len(violations := _csp_violations(page)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    directives = sorted(v.split()[0] for v in violations)
    assert directives == ["connect-src", "script-src-elem", "style-src-attr"], violations

    # Framed by another origin: the browser shows its error page in the frame instead.
    page.get("data:text/html,<iframe src='" + chat_gateway.url + "/'></iframe>")
    frame = page.find_element(By.TAG_NAME, "iframe")
    deadline = time.monotonic() + 5
    try:
        while True:
            page.switch_to.frame(frame)
            shown = page.execute_script(
                "return [location.href, !!document.getElementById('chat-log')];"
            )
            page.switch_to.default_content()
            if shown[0] != "about:blank" or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    finally:
        page.switch_to.default_content()
    assert shown == ["chrome-error://chromewebdata/", False], "the page was shown in a frame"


@pytest.fixture(scope="module")
def site() -> Iterator[ScriptedPage]:
    with ScriptedPage() as stand_in:
        yield stand_in


def _open(browser: Any, site: ScriptedPage) -> None:
    site.reset()
    browser.get_log("browser")
    browser.get(site.url + "/")
    browser.execute_script(_WATCH_JS, list(FORBIDDEN))


def _chips(driver: Any) -> list[Any]:
    return list(driver.find_elements(By.CSS_SELECTOR, "#chat-log .suggestions button"))


CHALLENGES = [
    {**item, "category": "PLOGGING", "label": "플로깅"} for item in DEFAULT_ANSWER["challenges"]
]
SUGGESTIONS = ["더 쉬운 거", "돈 안 드는 거", "다른 분야"]


def test_suggestions_are_chips_that_send_the_next_message(browser: Any, site: ScriptedPage) -> None:
    long = "가" * 120
    site_answers = [
        answer_events("첫 답이에요.", CHALLENGES, SUGGESTIONS),
        answer_events("돈 안 드는 것으로 골라 봤어요.", CHALLENGES[:1], [long, "혼자서"]),
        answer_events("친환경 챌린지를 추천해 드려요.", [], ["아이랑"]),  # off-topic-like
        answer_events("혼자 하기 좋은 것들이에요.", CHALLENGES[1:]),  # no suggestions
    ]
    _open(browser, site)
    for events in site_answers:
        site.queue(events)

    _submit_base_info(browser, "바닷가", "현장직", "플로깅")
    _follow(browser, 0)
    first = _last_answer(browser)
    assert first["state"] == "done" and first["text"] == "첫 답이에요."
    assert first["titles"] == [c["title"] for c in CHALLENGES]
    _assert_each_once(browser, [c["description"] for c in CHALLENGES])
    assert first["chips"] == SUGGESTIONS
    group = browser.find_element(By.CSS_SELECTOR, ".suggestions")
    assert (group.get_attribute("role"), group.get_attribute("aria-label")) == (
        "group",
        "이어서 물어보기",
    )
    chips = _chips(browser)
    assert [(c.tag_name, c.get_attribute("type"), c.accessible_name) for c in chips] == [
        ("button", "button", text) for text in SUGGESTIONS
    ]

    chips[1].click()
    _follow(browser, 1)
    focused = browser.execute_script("return document.activeElement.id;")
    assert focused != "message", "a tap opens no on-screen keyboard"
    second = _last_answer(browser)
    assert second["text"] == "돈 안 드는 것으로 골라 봤어요." and second["chips"] == [
        long,
        "혼자서",
    ]
    assert [c.text for c in _chips(browser)] == [long, "혼자서"], "earlier chips are gone"

    # Over the cap: sent as if typed, cut to 100 characters. By keyboard: the focus goes on to
    # the message box, not lost with the chip.
    _chips(browser)[0].send_keys(Keys.ENTER)
    _follow(browser, 2)
    assert browser.execute_script("return document.activeElement.id;") == "message"
    third = _last_answer(browser)
    assert third["text"] == "친환경 챌린지를 추천해 드려요." and third["titles"] == []
    assert third["chips"] == ["아이랑"] and not third["bubbleHidden"]

    _send_message(browser, "혼자 할 수 있는 거")  # typing removes the chips too
    _follow(browser, 3)
    assert _last_answer(browser)["titles"] == [c["title"] for c in CHALLENGES[1:]]
    assert _chips(browser) == [], "no suggestions, no chips"
    _assert_idle(_last_answer(browser))

    users = browser.find_elements(By.CSS_SELECTOR, "#chat-log > li.msg.user .bubble")
    assert [u.text for u in users][1:] == ["돈 안 드는 거", "가" * 100, "혼자 할 수 있는 거"]
    assert browser.find_element(By.ID, "message").get_attribute("value") == ""
    paths = [path for path, _ in site.requests]
    assert paths == ["base-info", "free-text", "free-text", "free-text"]
    messages = [query.get("message") for _, query in site.requests]
    assert messages == [None, "돈 안 드는 거", "가" * 100, "혼자 할 수 있는 거"]
    assert len({query["sessionId"] for _, query in site.requests}) == 1, "one session"
    assert _console_errors(browser) == [] and _csp_violations(browser) == []


def test_an_error_after_some_text_keeps_that_text(browser: Any, site: ScriptedPage) -> None:
    shown = "첫 답이에요.\n\n" + CHALLENGES[0]["title"]
    _open(browser, site)
    site.queue(error_events(shown, 504, "답변이 너무 늦어지고 있어요. 잠시 후 다시 시도해 주세요."))
    _submit_base_info(browser, "산", "사무직", "비건")
    _follow(browser, 0)
    answer = _last_answer(browser)
    assert answer["state"] == "error" and answer["text"] == shown
    assert answer["error"] == "답변이 너무 늦어지고 있어요. 잠시 후 다시 시도해 주세요."
    assert answer["titles"] == [] and answer["chips"] == []
    _assert_idle(answer)
