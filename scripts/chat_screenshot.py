"""docs/chat-page.png: a conversation in the chat page of a running gateway, as a person sees it.

    make run                                             # in another terminal
    .venv/bin/python scripts/chat_screenshot.py [--url http://127.0.0.1:8000]

Drives Debian's Chromium headless (selenium, from the test extra; scripts/install_browser.sh):
base-info 도시 / 사무직 / 에너지 절약, then the free-text turns given with ``--say`` (default: "더
쉬운 거 없어?"), each answer waited for to its end, then saves the whole page. Prints each
turn's seconds to its end.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

ROOT = Path(__file__).resolve().parents[1]
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--lang=ko-KR",
)


def _wait_idle(driver: webdriver.Chrome, timeout: float) -> float:
    """Seconds until the page no longer says it is thinking (the answer's close or error)."""
    started = time.monotonic()
    time.sleep(0.3)
    while time.monotonic() - started < timeout:
        if not driver.find_element(By.ID, "status").text.strip():
            return time.monotonic() - started
        time.sleep(0.2)
    raise TimeoutError("the answer did not end")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--say", action="append", help="a free-text turn (repeatable)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "chat-page.png")
    args = parser.parse_args()
    options = Options()
    options.binary_location = "/usr/bin/chromium"
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument("--window-size=1100,1000")
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        driver.get(args.url + "/")
        Select(driver.find_element(By.ID, "location")).select_by_value("도시")
        Select(driver.find_element(By.ID, "workType")).select_by_value("사무직")
        Select(driver.find_element(By.ID, "category")).select_by_value("ENERGY_SAVING")
        driver.find_element(By.ID, "base-info-submit").click()
        print(f"base-info: {_wait_idle(driver, 120):.1f} s")
        for message in args.say or ["더 쉬운 거 없어?"]:
            box = driver.find_element(By.ID, "message")
            box.clear()
            box.send_keys(message)
            driver.find_element(By.ID, "free-text-submit").click()
            print(f"{message}: {_wait_idle(driver, 120):.1f} s")
        # The conversation scrolls inside its panel, which grows with the window: a window as
        # tall as the conversation shows all of it.
        log = driver.find_element(By.ID, "chat-log")
        extra = (
            int(driver.execute_script("return arguments[0].scrollHeight", log)) - log.size["height"]
        )
        driver.set_window_size(1100, min(1000 + max(extra, 0) + 40, 4000))
        driver.execute_script("document.activeElement.blur(); window.scrollTo(0, 0);")
        args.out.parent.mkdir(exist_ok=True)
        driver.save_screenshot(str(args.out))
        print(f"written: {args.out}")
    finally:
        driver.quit()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
