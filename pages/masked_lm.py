import streamlit as st

from models.limits import MAX_TEXT_CHARS
from ui import charts
from ui import masked_lm_cache as mlm
from ui.routing import through_app
from ui.text import plain
from viz.heatmap import attention_heatmap
from viz.masked_lm import pretraining_loss_figure, recipe_table
from viz.predictions import candidate_bars

through_app()

EXAMPLE_PASSAGE = "The bakery on the corner opens at six, but the smell of bread reaches the bus stop."
DEFAULT_TEXT = "The bakery on the corner opens at [MASK]."
SEED = 0
PRETRAIN_REQUESTED = "mlm_pretrain_requested"  # a flag: the click survives the app's reruns

st.title("Masked words: how BERT is pretrained")
st.markdown(
    "BERT learns language by filling in hidden words. In every passage 15% of the tokens are "
    "**chosen**; of those, 80% are replaced by `[MASK]`, 10% by a random token and 10% are kept "
    "as they are (so the model cannot learn that only `[MASK]` needs fixing). The loss asks for "
    "the original token at the chosen positions only. Here a small encoder (2 layers, 4 heads, "
    "width 64, on MiniLM's tokenizer) is pretrained that way on the app's own corpus of 232 "
    "passages, once per machine, and kept on disk."
)

st.subheader("The recipe on one passage")
st.session_state.setdefault("mlm_recipe_seed", 0)
st.session_state.setdefault("mlm_text", DEFAULT_TEXT)
recipe_seed = st.number_input("Draw (seed)", 0, 999, key="mlm_recipe_seed")
example = mlm.recipe_example(EXAMPLE_PASSAGE, int(recipe_seed))
st.dataframe(recipe_table(example), hide_index=True, key="mlm_recipe")
chosen = sum(fate != "not chosen" for fate in example.fates)
st.caption(f"{chosen} of {sum(t not in ('[CLS]', '[SEP]') for t in example.tokens)} ordinary "
           "tokens chosen in this draw; over the whole corpus about 15% are.")

st.subheader("Pretraining")
if not mlm.is_pretrained(SEED):
    st.info("The masked LM has not been pretrained on this machine yet. It takes a minute or "
            "two on a laptop's CPU, once: the weights are then kept on disk for every session.")
    st.button("Pretrain it now", key="mlm_pretrain", type="primary",
              on_click=lambda: st.session_state.update({PRETRAIN_REQUESTED: True}))
if mlm.is_pretrained(SEED) or st.session_state.pop(PRETRAIN_REQUESTED, False):
    result = mlm.pretrained(SEED)
    charts.show(pretraining_loss_figure(result.losses, result.model.config.vocab_size),
                key="mlm_loss")
    st.caption(f"{result.settings.steps} steps of {result.settings.batch_size} passages, seed "
               f"{result.settings.seed}: the loss falls from about ln V (a uniform guess) as the "
               f"model learns which words fit where. The corpus has {result.tokens:,} ordinary "
               "tokens in all, far too few for real language knowledge: the model learns "
               "frequent words and local patterns.")

st.subheader("Fill in the mask")
text = st.text_input("A sentence with [MASK] where a word should go",
                     max_chars=MAX_TEXT_CHARS, key="mlm_text")
if not mlm.is_pretrained(SEED):
    st.info("Pretrain the model above first; then it fills in your [MASK].")
elif "[MASK]" not in text:
    st.info("Type [MASK] where a word should go, and the model fills it in.")
else:
    trace = mlm.trace(SEED, text)
    record = trace.record
    fills, maps = st.columns(2, gap="medium")
    for index, fillers in enumerate(trace.predictions.masks):
        charts.show(candidate_bars(fillers.candidates,
                                   f"Top 10 fillers for the mask at token #{fillers.position}"),
                    key=f"mlm_fillers_{index}", container=fills)
    layer_choice, head_choice = maps.columns(2)
    layer = layer_choice.selectbox("Layer", range(record.num_layers), key="mlm_layer")
    head = head_choice.selectbox("Head", range(record.num_heads), key="mlm_head")
    charts.show(attention_heatmap(record, layer, head), key="mlm_map", container=maps)
    maps.caption(plain(f"{record.source}: layer {layer} · head {head}. The [MASK] row shows "
                       "which tokens the model read to guess the word."))
st.page_link("pages/predictions.py", label="A real masked LM loaded in the sidebar fills its "
              "[MASK] on the What the model predicts page", icon=":material/open_in_new:")
