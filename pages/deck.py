import streamlit as st

from models.limits import DECK_BYTES, DECK_UPLOAD_MIB, KIB
from models.teaching.decks import DeckError, deck_to_json, deck_to_toml
from ui import deck_editor, decks
from ui.routing import through_app
from ui.text import plain

MINE = "mine"

through_app()

st.title("Slide decks")
st.markdown(
    "A deck is a lecture's views in order: each slide is one view of the app (a page with its "
    "sentence, model and settings, as *Link to this view* gives it), with a title and a note for "
    "the speaker. **Present** shows one slide at a time in presenter mode, with the sidebar "
    "closed: *Next* and *Previous* (or the arrow keys) move through the deck. **Warm up** runs "
    "every slide once before class, so each then appears at once. Build your own with *Add this "
    "view to the deck* in the sidebar of any page."
)
deck_editor.load_linked_deck()
shipped = decks.shipped()
labels = {**{name: deck.title for name, deck in shipped.items()},
          MINE: f"Your deck ({len(deck_editor.draft().slides)} slides)"}
choice = st.selectbox("Deck", list(labels), format_func=labels.get, key="deck_choice")
deck = deck_editor.draft() if choice == MINE else shipped[choice]
if deck.description:
    st.caption(plain(deck.description))

if deck.slides:
    present, warm = st.columns(2)
    present.button("Present", key="deck_present", icon=":material/slideshow:", type="primary",
                   on_click=decks.present, args=(deck,), width="stretch")
    warm.button("Warm up every slide", key="deck_warm", icon=":material/local_fire_department:",
                on_click=decks.ask_warm_up, args=(deck,), width="stretch",
                help="Loads the models and computes every slide (training included) now, so "
                     "that each slide appears at once in class.")
    decks.warm_up_if_asked()
    decks.show_warmed()

if choice == MINE:
    deck_editor.edit_draft()
    upload = st.file_uploader("Open a deck file (TOML or JSON); it replaces your deck",
                              type=["toml", "json"], key="deck_upload",
                              max_upload_size=DECK_UPLOAD_MIB)
    st.caption(f"At most {DECK_BYTES // KIB} KB.")
    deck_editor.load_upload(upload)
else:
    deck_editor.show_slides(deck)
    st.button("Copy into your deck to change it", key="deck_copy", on_click=deck_editor.set_draft,
              args=(deck,))

if deck.slides:
    stem = deck_editor.file_stem(deck)
    save_toml, save_json = st.columns(2)
    save_toml.download_button("Save as TOML", deck_to_toml(deck), f"{stem}.toml",
                              mime="application/toml", key="deck_save_toml",
                              icon=":material/download:", width="stretch")
    save_json.download_button("Save as JSON", deck_to_json(deck), f"{stem}.json",
                              mime="application/json", key="deck_save_json",
                              icon=":material/download:", width="stretch")
    with st.popover("Link to this deck", icon=":material/link:"):
        try:
            st.code(deck_editor.deck_url(deck), language=None, wrap_lines=True)
        except DeckError as error:
            st.warning(str(error))
