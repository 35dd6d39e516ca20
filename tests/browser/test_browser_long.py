"""A 4,096-token text on the decoder in the real browser: the all-heads view streams it layer by
layer and draws every head, then one exact head, with nothing leaving the machine."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.app_support import GUARD_MESSAGE
from tests.browser_support import guard_requests, set_sidebar_text, wait_idle

SCREENSHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"
# Short words: well over 4,096 SmolLM2 tokens within the sidebar's character limit.
LONG_TEXT = " ".join(["I saw a cat and a dog by the old red barn, so we ran to it."] * 330)
STREAM_MS = 1_200_000  # 30 layers of 9 maps of 4,096 x 4,096, the first model load, on two
# cores shared with the other test worker


def switch_on(page, label, switch, attempts: int = 3) -> None:
    """Click a Streamlit toggle's label until its switch reads as on: a click that lands while
    the page is being redrawn can be lost, and the test would then wait its whole stream time
    for nothing. (The switch's own input is hidden under its label.)"""
    for _ in range(attempts):
        label.click()
        try:
            expect(switch).to_be_checked(timeout=15_000)
            return
        except AssertionError:
            wait_idle(page, 60_000)
    expect(switch).to_be_checked(timeout=1_000)


def test_a_4096_token_text_on_the_decoder_draws_every_head(app_url, browser):
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    outside = guard_requests(page)
    page.goto(f"{app_url}/all_heads?model=decoder")
    page.get_by_role("heading", name="All heads at once").first.wait_for(timeout=240_000)
    set_sidebar_text(page, LONG_TEXT)
    wait_idle(page, 240_000)
    label = "Read all 4,096 tokens, layer by layer"
    page.get_by_text(label).wait_for(timeout=240_000)
    switch_on(page, page.get_by_text(label), page.get_by_role("switch", name=label))
    # The exact head is drawn once the stream has finished (the mosaic's title alone would
    # also match the 352-token view drawn before the toggle's run).
    whole = page.locator(".js-plotly-plot .gtitle").filter(
        has_text="Layer 0 · Head 0: all 4096 tokens")
    try:
        whole.wait_for(timeout=STREAM_MS)
    except Exception:  # what the page shows instead, for the report (and a screenshot)
        page.screenshot(path=str(SCREENSHOTS / "long-input-timeout.png"), full_page=True)
        shown = page.locator('[data-testid="stMain"]').inner_text()[-1500:]
        pytest.fail(f"no exact head after {STREAM_MS // 1000} s; the page shows:\n{shown}")
    wait_idle(page, 120_000)  # the 352-token view drawn before the toggle's run is gone now
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
