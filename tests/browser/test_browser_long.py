"""A 4,096-token text on the decoder in the real browser: the all-heads view streams it layer by
layer and draws every head, then one exact head, with nothing leaving the machine."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect

from tests.app_support import GUARD_MESSAGE
from tests.browser_support import guard_requests, set_sidebar_text, switch_on, wait_idle

SCREENSHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"
# Short words: well over 4,096 SmolLM2 tokens within the sidebar's character limit.
LONG_TEXT = " ".join(["I saw a cat and a dog by the old red barn, so we ran to it."] * 330)
STREAM_MS = 1_200_000  # 30 layers of 9 maps of 4,096 x 4,096, the first model load, on two
# cores shared with the other test worker


class SessionWatch:
    """What happened to the tab's connection while it waited: every websocket opened and closed
    and every navigation of the page, with its time, for a failure's report."""

    def __init__(self, page) -> None:
        self.started = time.monotonic()
        self.events: list[str] = []
        page.on("websocket", self._opened)
        page.on("framenavigated",
                lambda frame: frame == page.main_frame and self._log(f"navigated to "
                                                                     f"{frame.url[:120]}"))

    def _log(self, what: str) -> None:
        self.events.append(f"{time.monotonic() - self.started:7.1f} s  {what}")

    def _opened(self, socket) -> None:
        self._log(f"websocket opened {socket.url[-40:]}")
        socket.on("close", lambda _: self._log("websocket closed"))

    def report(self) -> str:
        return "\n".join(self.events) or "(no event)"


def decoder_still_chosen(page) -> bool:
    """The sidebar's model is still the causal decoder the test chose."""
    return page.get_by_role("radio", name="Pretrained causal decoder").is_checked()


def test_a_4096_token_text_on_the_decoder_draws_every_head(app_url, browser):
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    outside = guard_requests(page)
    watch = SessionWatch(page)
    page.goto(f"{app_url}/all_heads?model=decoder")
    page.get_by_role("heading", name="All heads at once").first.wait_for(timeout=240_000)
    set_sidebar_text(page, LONG_TEXT)
    wait_idle(page, 240_000)
    label = "Read all 4,096 tokens, layer by layer"
    page.get_by_text(label).wait_for(timeout=240_000)
    switch_on(page, page.get_by_role("switch", name=label))
    # The exact head is drawn once the stream has finished (the mosaic's title alone would
    # also match the 352-token view drawn before the toggle's run). Meanwhile the session must
    # stay on the decoder with the setting on: a change is reported at once, with what
    # happened to the tab's connection (not after the whole stream time).
    whole = page.locator(".js-plotly-plot .gtitle").filter(
        has_text="Layer 0 · Head 0: all 4096 tokens")
    deadline = time.monotonic() + STREAM_MS / 1000
    while True:
        try:
            whole.wait_for(timeout=5_000)
            break
        except PlaywrightTimeout:
            changed = not decoder_still_chosen(page)
            if changed or time.monotonic() > deadline:
                page.screenshot(path=str(SCREENSHOTS / "long-input-timeout.png"), full_page=True)
                shown = page.locator('[data-testid="stMain"]').inner_text()[-1500:]
                what = ("the sidebar's model changed from the decoder" if changed
                        else f"no exact head after {STREAM_MS // 1000} s")
                pytest.fail(f"{what}; the tab's connection:\n{watch.report()}\nthe page "
                            f"shows:\n{shown}")
    wait_idle(page, 120_000)  # the 352-token view drawn before the toggle's run is gone now
    assert decoder_still_chosen(page), watch.report()
    mosaic = page.locator(".js-plotly-plot .gtitle").filter(
        has_text="All 30 layers × 9 heads (each map max-pooled to 64×64)")
    expect(mosaic).to_have_count(1, timeout=60_000)
    window = page.locator(".js-plotly-plot .gtitle").filter(has_text="Exact")
    expect(window).to_have_count(1, timeout=60_000)
    page.screenshot(path=str(SCREENSHOTS / "long-input-all-heads.png"), full_page=True)
    assert page.locator('[data-testid="stException"]').count() == 0
    assert page.get_by_text(GUARD_MESSAGE).count() == 0
    assert outside == []
    context.close()
