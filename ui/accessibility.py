"""What every page gets so that axe-core finds no serious or critical violation
(tests/browser/test_browser_pages.py); the theme's colours are in .streamlit/config.toml, figures'
text alternatives in ui.charts."""

from __future__ import annotations

import streamlit as st

SCRIPT_KEY = "a11y_script"  # the container of the script below, hidden (it draws nothing)

# A KaTeX display formula wider than its column scrolls sideways, and its cut-off part is missing
# on a projector. The script first draws such a formula smaller, down to 0.8 of its own
# size (presenter mode's 22-px formulas stay above its 18-px text). One still too wide
# scrolls, and a region that scrolls must be reachable by keyboard (WCAG 2.1.1; axe's
# scrollable-region-focusable): the script gives it a tab stop and a name (its TeX source), and
# takes them back when it fits. It looks again whenever a formula or the page changes size.
FORMULA_SCRIPT = """<script>
(() => {
  if (window.__explorerFormulas) return;
  window.__explorerFormulas = true;
  let pending = false;
  const mark = () => {
    pending = false;
    for (const formula of document.querySelectorAll('.katex-display')) {
      const katex = formula.querySelector(':scope > .katex');
      if (katex) {  // its own size first, then as much smaller as it needs to fit, if it may
        katex.style.fontSize = '';
        const size = parseFloat(getComputedStyle(katex).fontSize);
        // a few fixed pixels (KaTeX's struts) do not shrink with it: a step or two more
        for (let scale = 1; formula.scrollWidth > formula.clientWidth && scale > 0.8;) {
          scale = Math.max(0.8, scale * formula.clientWidth / formula.scrollWidth - 0.01);
          katex.style.fontSize = `${size * scale}px`;
        }
      }
      const scrolls = formula.scrollWidth > formula.clientWidth;
      if (scrolls && formula.getAttribute('tabindex') !== '0') {
        const source = formula.querySelector('annotation');
        formula.setAttribute('tabindex', '0');
        formula.setAttribute('role', 'region');
        formula.setAttribute('aria-label',
                             'Formula' + (source ? ': ' + source.textContent : ''));
      } else if (!scrolls && formula.getAttribute('tabindex') === '0') {
        formula.removeAttribute('tabindex');
        formula.removeAttribute('role');
        formula.removeAttribute('aria-label');
      }
    }
  };
  // at once after the change (a microtask), not at the next frame: a check may come first
  const later = () => { if (!pending) { pending = true; queueMicrotask(mark); } };
  // a formula's width changes without any node added: its fonts arrive, presenter mode's
  // larger type applies; so sizes are watched too, each formula's content once
  const sizes = new ResizeObserver(later);
  const watch = () => {
    // the formula's box (its column narrows as the sidebar slides) and its content (fonts)
    for (const box of document.querySelectorAll('.katex-display, .katex-display > .katex')) {
      if (!box.__explorerWatched) { box.__explorerWatched = true; sizes.observe(box); }
    }
    later();
  };
  new MutationObserver(watch).observe(document.body, {childList: true, subtree: true});
  sizes.observe(document.body);
  window.addEventListener('resize', later);
  document.fonts?.addEventListener('loadingdone', later);
  watch();
})();
</script>"""

# Pills and segmented controls wider than their column wrap onto another line: Streamlit scrolls
# them sideways, which hides choices (two of a narrow column's six token pills) from a projector.
# So do the labels Streamlit cuts with "…" (a toggle's, in a column beside a figure). A folded
# sidebar only slides off the screen: its controls stayed in the Tab order, so the keyboard went
# through a dozen invisible ones (presenter mode folds it); everything in it is hidden (each
# element: some set their own visibility) once its 0.3-s slide is over, and shown at once when it
# opens. A display formula spans its column and its own width does not widen the column (it did:
# a column beside a figure grew to the formula's width), so the script above measures it against
# the column.
ACCESSIBLE_CSS = f"""<style>
.st-key-{SCRIPT_KEY} {{ display: none; }}
.stApp [data-testid="stMarkdown"] div:has(.katex-display) {{ width: 100%; }}
.stApp .katex-display {{ contain: inline-size; }}
.stApp [data-testid="stSidebar"][data-collapsed="true"] * {{ visibility: hidden !important;
  transition: visibility 0s 0.3s !important; }}
.stApp .katex-display:focus-visible {{ outline: 2px solid currentColor; outline-offset: 2px; }}
.stApp [data-testid="stButtonGroup"] div:has(> button) {{ flex-wrap: wrap; row-gap: 0.4rem; }}
.stApp .stMarkdownEllipsis, .stApp .stMarkdownEllipsis * {{ white-space: normal; overflow: visible;
  text-overflow: clip; }}
</style>"""


def accessible_page() -> None:
    """Add the app's accessibility styles and the formula script to the page (neither takes
    space: a style-only block goes to Streamlit's event container, the script's is hidden)."""
    st.html(ACCESSIBLE_CSS)
    with st.container(key=SCRIPT_KEY):
        st.html(FORMULA_SCRIPT, unsafe_allow_javascript=True)
