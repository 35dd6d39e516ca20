from ui.routing import through_app

import streamlit as st

from models.analysis.thumbnails import thumbnails
from models.errors import ModelLoadError
from models.limits import MAX_TARGET_TOKENS, MAX_TEXT_CHARS, MODEL_NAME_CHARS
from models.loading.hf_seq2seq import DEFAULT_NEW_TOKENS
from models.teaching.translation_task import EXAMPLE_SENTENCES, SPECIALS
from ui import charts
from ui import seq2seq_cache as cache
from ui.state import index_slider
from ui.text import plain
from viz.bertviz_views import HEAD_VIEW, MODEL_VIEW, encoder_decoder_fits, shared_layers
from viz.heatmap import attention_heatmap
from viz.labels import display_tokens, token_text
from viz.overview import all_heads_figure
from viz.seq2seq import loss_curve_figure, snapshots_figure, step_row_figure

through_app()

TOY, HUB = "toy", "hub"
MODEL_LABELS = {TOY: "Toy translator, trained here", HUB: "A Hugging Face encoder–decoder"}
KIND_LABELS = {"cross": "Cross-attention (target reads source)",
               "decoder": "Decoder self-attention (causal)", "encoder": "Encoder self-attention"}
VIEW_LABELS = {HEAD_VIEW: "Head view", MODEL_VIEW: "Model view"}
HF_NAME = "xattn_hf_loaded"  # session key: the encoder–decoder this session loaded
HF_MESSAGE = "xattn_hf_message"
RETRAINED = "xattn_retrained"
RETRAIN_REQUESTED = "xattn_retrain_requested"


def _load_hf() -> None:
    name = st.session_state.get("xattn_hf_input", "").strip()
    try:
        cache.hf_model(name)
    except ModelLoadError as error:
        st.session_state[HF_MESSAGE] = ("error", str(error))
        return
    st.session_state[HF_NAME] = name
    st.session_state[HF_MESSAGE] = ("success", f"Loaded '{name}'.")


def _toy_translator():
    if not cache.toy_is_trained():
        bar = st.progress(0.0, text="Training the toy translator (once per machine, under a minute)…")
        try:
            cache.train_toy(lambda step, total, loss: bar.progress(
                step / total, text=f"Training the toy translator: step {step} of {total}, loss {loss:.3f}"))
        finally:
            bar.empty()
    return cache.toy_translator()


st.title("Cross-attention: an encoder–decoder translating")
controls, picture = st.columns([1, 2], gap="medium")  # the controls beside what they drive
controls.markdown(
    "An **encoder** reads the source sentence; a **decoder** writes the translation word by word, "
    "and its **cross-attention** reads the encoder's output. Each row of a cross-attention map is "
    "a target position, each column a source word; every row adds up to 1."
)
controls.expander("The two stacks").markdown(
    "The original Transformer has two stacks. The **encoder** reads the whole source sentence "
    "with self-attention. The **decoder** writes the translation one word at a time: its "
    "*masked* self-attention sees only the words it has written so far, and its "
    "**cross-attention** takes queries from the decoder and keys and values from the encoder's "
    "output. In a cross-attention map each row is a target position, each column a source "
    "word, and every row adds up to 1 over the source."
)
choice = controls.radio("Model", list(MODEL_LABELS), format_func=MODEL_LABELS.get,
                        key="xattn_model")
st.session_state.setdefault("xattn_source", EXAMPLE_SENTENCES[0])
source = controls.text_input("Source sentence (English)", key="xattn_source",
                             max_chars=MAX_TEXT_CHARS)
run = translator = None
if choice == TOY:
    with picture:  # training, the first time on a machine, shows its progress here
        translator = _toy_translator()
    with controls.expander("What the toy translator knows"):
        st.markdown(
            "It was trained here, from random weights, on sentences of a tiny English → French "
            "grammar such as *the red car is fast* → *la voiture rouge est rapide* and *she sees "
            "the green books* → *elle voit les livres verts*: French puts the adjective after "
            "the noun, and the article, adjectives and verb agree with the noun or subject. "
            f"Held out from training: {len(translator.task.held_out)} sentences, "
            f"{translator.held_out_accuracy:.1%} of them translated exactly right. Its words:"
        )
        st.caption(", ".join(w for w in translator.source_vocabulary.words if w not in SPECIALS))
    try:
        run = cache.toy_translation(source)
    except ValueError as error:
        controls.error(plain(str(error)))
    if run is not None:
        verdict = ("" if run.correct is None else " (the grammar's own translation)" if run.correct
                   else f" (the grammar says: *{' '.join(run.reference)}*)")
        controls.success(f"Translation: **{plain(run.text)}**{verdict}")
else:
    controls.caption("T5, BART, Marian and other encoder–decoders load by Hugging Face id or "
                     "local folder (config.json, .safetensors weights and tokenizer files). A real "
                     "one such as t5-small or Helsinki-NLP/opus-mt-en-fr loads when this server "
                     "is online or has it in its Hugging Face cache; with no internet, use a "
                     "local folder.")
    controls.text_input("Hugging Face id or local folder", key="xattn_hf_input",
                        max_chars=MODEL_NAME_CHARS,
                        placeholder="Helsinki-NLP/opus-mt-en-fr or /path/to/folder")
    controls.button("Load", key="xattn_hf_load", on_click=_load_hf)
    message = st.session_state.get(HF_MESSAGE)
    if message:
        (controls.error if message[0] == "error" else controls.success)(plain(message[1]))
    target = controls.text_input("Target text (optional: leave empty and the model writes its "
                                 "own)", key="xattn_target", max_chars=MAX_TEXT_CHARS)
    st.session_state.setdefault("xattn_new_tokens", DEFAULT_NEW_TOKENS)
    new_tokens = controls.slider("Tokens to write", 1, MAX_TARGET_TOKENS,
                                 key="xattn_new_tokens", disabled=bool(target.strip()))
    name = st.session_state.get(HF_NAME)
    if name is None:
        picture.info("Load an encoder–decoder to see its attention.")
    else:
        try:
            with picture:
                result = cache.hf_run(name, source, target.strip(), new_tokens)
        except (ValueError, ModelLoadError) as error:
            controls.error(plain(str(error)))
        else:
            run = result
            controls.success(f"{'Generated' if result.generated else 'Read'} by {plain(name)}: "
                             f"**{plain(result.output_text) or '(nothing)'}**")

if run is not None:
    records = {"cross": run.cross, "decoder": run.decoder, "encoder": run.encoder}
    controls.subheader("Step by step")
    kind = controls.radio("Attention", list(KIND_LABELS), format_func=KIND_LABELS.get,
                          key="xattn_kind")
    record = records[kind]
    layer = index_slider("Layer", record.num_layers, "xattn_layer", controls)
    head = index_slider("Head", record.num_heads, "xattn_head", controls)
    steps = run.cross.num_tokens
    step = index_slider("Step", steps, "xattn_step", controls) if steps > 1 else 0
    read = plain(" ".join(display_tokens(run.cross.tokens)[:step + 1]))
    wrote = plain(token_text(run.output_tokens[step], run.cross.tokens))
    controls.markdown(f"Step {step + 1} of {steps}: reading *{read}*, the decoder wrote "
                      f"**{wrote}**. The first map is its cross-attention over "
                      f"the source (layer {layer}, head {head}).")
    charts.show(step_row_figure(run.cross, step, layer, head), key="xattn_row", container=picture)
    picture.caption(f"{KIND_LABELS[kind]} · {record.num_tokens} queries × {record.num_keys} keys "
                    f"· {record.source}")
    charts.show(attention_heatmap(record, layer, head), key="xattn_heatmap", container=picture)
    st.subheader("Every head of the cross-attention")
    charts.show(all_heads_figure(thumbnails(run.cross), (layer, head)), key="xattn_all_heads")

    if translator is not None:
        st.subheader("Training: watch the alignment form")
        shown = st.session_state.get(RETRAINED) or translator
        st.metric("Held-out sentences translated exactly right", f"{shown.held_out_accuracy:.1%}",
                  help="Greedy translations of sentences never seen in training.")
        charts.show(loss_curve_figure(shown.losses, cache.snapshot_steps(shown.snapshots)),
                    key="xattn_loss")
        snapshots = st.empty()
        snapshot_layer = min(layer, shown.snapshots[0].cross.num_layers - 1)
        charts.show(snapshots_figure(tuple(s.cross for s in shown.snapshots),
                                     cache.snapshot_steps(shown.snapshots),
                                     snapshot_layer, head),
                    key="xattn_snapshots", container=snapshots)
        st.caption(f"The sentence '{EXAMPLE_SENTENCES[0]}' with its reference translation, read "
                   f"by the model after each number of steps (this session's "
                   f"{'retraining' if shown is not translator else 'cached training'}, "
                   f"{shown.settings.steps} steps, {shown.seconds:.0f} s).")
        st.session_state.setdefault("xattn_retrain_steps", translator.settings.steps)
        retrain_steps = st.number_input("Steps to retrain", cache.MIN_RETRAIN_STEPS,
                                        cache.MAX_RETRAIN_STEPS, step=20,
                                        key="xattn_retrain_steps")
        st.button("Retrain and watch", key="xattn_retrain",
                  on_click=lambda: st.session_state.update({RETRAIN_REQUESTED: True}))
        if st.session_state.pop(RETRAIN_REQUESTED, False):
            bar = st.progress(0.0, text="Retraining…")
            seen = []

            def draw(snapshot) -> None:
                seen.append(snapshot)
                charts.show(snapshots_figure(tuple(s.cross for s in seen),
                                             cache.snapshot_steps(tuple(seen)),
                                             snapshot_layer, head),
                            key=f"xattn_snapshots_{len(seen)}",  # a key may not repeat in a run
                            container=snapshots)

            fresh = cache.retrain(retrain_steps, lambda s, total, loss: bar.progress(
                s / total, text=f"Retraining: step {s} of {total}, loss {loss:.3f}"), draw)
            bar.empty()
            if fresh is None:
                st.info("Another session is retraining right now; try again in a minute.")
            else:
                st.session_state[RETRAINED] = fresh
                st.rerun()

    st.subheader("bertviz: head view and model view")
    view = st.radio("View", list(VIEW_LABELS), format_func=VIEW_LABELS.get, horizontal=True,
                    key="xattn_bertviz_view")
    if encoder_decoder_fits(run.encoder, run.decoder, view):
        shown_layers = shared_layers(run.encoder, run.decoder)
        st.caption("Pick *Encoder*, *Decoder* or *Cross* in bertviz's *Attention* menu."
                   + (f" bertviz has one layer menu for both stacks, so it draws their first "
                      f"{shown_layers} layers." if run.encoder.num_layers != run.decoder.num_layers
                      else ""))
        st.iframe(cache.bertviz_html(run.encoder, run.decoder, run.cross, view), height="content",
                  alt=f"bertviz {VIEW_LABELS[view].lower()} of the encoder–decoder")
    else:
        st.info("This input is too long for bertviz to draw without freezing the browser; "
                "the heatmaps above show every layer and head.")
