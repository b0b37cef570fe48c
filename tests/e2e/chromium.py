"""Debian's chromium, headless, driven by selenium through chromedriver: for the tests of pages people see.

A test module imports this first; it skips the module when selenium, chromium or chromedriver is missing.
"""

from __future__ import annotations

import shutil
from typing import Any

import pytest

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")  # Debian's, on the PATH
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--hide-scrollbars")

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e '.[test]')")
if CHROMIUM is None or CHROMEDRIVER is None:
    pytest.skip("chromium and chromedriver are not installed (Debian: apt-get install chromium chromium-driver)",
                allow_module_level=True)


def start_chromium(width: int, height: int) -> Any:
    """A headless chromium with a window of this size; the caller quits it."""
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--window-size={width},{height}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    return driver
