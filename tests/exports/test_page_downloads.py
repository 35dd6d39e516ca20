"""The pages' figure downloads: pressing "Prepare SVG" writes the shown map through
viz/export_figures.py (the command line's function) and offers the file as a link; the file on
disk is the drawn figure, with the sidebar's tokens."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from urllib.parse import unquote

from tests.app_support import assert_no_failure, run_page
from ui.export_files import STATIC_DIR, STATIC_URL

TEXT = "Zebras grazed quietly."
SVG_TEXT = "{http://www.w3.org/2000/svg}text"


def prepared_file(at, key: str, file_name: str):
    """Press the Prepare button `key`, rerun, and return the linked file's bytes."""
    at.button(key=key).click().run()
    assert_no_failure(at)
    links = "".join(element.value for element in at.html)
    found = re.search(rf'href="{STATIC_URL}/([^"]+)" download="{re.escape(file_name)}"', links)
    assert found, links
    return (STATIC_DIR / unquote(found.group(1))).read_bytes()


def drawn_texts(data: bytes) -> list[str]:
    return ["".join(element.itertext())
            for element in ElementTree.fromstring(data).iter(SVG_TEXT)]


def test_the_maps_page_prepares_the_shown_head_as_svg():
    at = run_page(text=TEXT, state={"maps_layer": 1, "maps_head": 4})  # the first page
    assert at.button(key="maps_figure_svg").label == "Prepare SVG"
    data = prepared_file(at, "maps_figure_svg",
                         "sentence-transformers_all-MiniLM-L6-v2_L1H4_map.svg")
    texts = " ".join(drawn_texts(data))
    assert "Layer 1 · Head 4" in texts and "zebra" in texts and "grazed" in texts
