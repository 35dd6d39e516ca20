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


def test_a_links_size_is_the_files_own_and_a_small_file_is_counted_in_bytes():
    """A short sentence's head CSV is a few hundred bytes: its link says how many (it said
    "(0 kB)"), and every link's size is its file's size on disk."""
    from ui.downloads import readable_size

    at = run_page(text=TEXT)
    links = "".join(element.value for element in at.html)
    shown = re.findall(rf'href="{STATIC_URL}/([^"]+)"[^>]*>[^<]*</a> \(([^)]+)\)', links)
    assert shown, links
    sizes = {unquote(path): text for path, text in shown}
    for path, text in sizes.items():
        assert text == readable_size((STATIC_DIR / path).stat().st_size), (path, text)
    assert any(text.endswith(" bytes") for text in sizes.values()), sizes
    assert "(0 kB)" not in links
    assert [readable_size(n) for n in (0, 999, 1_000, 9_949, 10_000, 99_499, 100_000)] == [
        "0 bytes", "999 bytes", "1.0 kB", "9.9 kB", "10 kB", "99 kB", "0.1 MB"]
