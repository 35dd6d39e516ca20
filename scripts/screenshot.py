"""Serve the app on loopback, open every page in headless Chromium and save screenshots.

Usage: python scripts/screenshot.py OUT_DIR [--text "a sentence"]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.browser_support import PAGES, launch_chromium, served_app, visit  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("--text", default=None)
    parser.add_argument("--only", nargs="*", default=None, help="url paths to capture")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with served_app() as url, launch_chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1800})
        for path, heading in PAGES:
            if args.only is not None and path not in args.only:
                continue
            visit(page, url, path, heading, text=args.text)
            page.screenshot(path=str(args.out / f"{path or 'home'}.png"), full_page=True)
            print("saved", args.out / f"{path or 'home'}.png")


if __name__ == "__main__":
    main()
