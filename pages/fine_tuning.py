import streamlit as st

from models.analysis.compare import head_changes, ranking_measure
from models.errors import ModelLoadError, first_sentence
from models.experiments.finetune import (DEFAULT_EPOCHS, PRETRAINED, SCRATCH, SCRATCH_EPOCH_FACTOR,
                             default_settings)
from models.experiments.labelled_data import LabelledDataError, load_shipped, parse_csv
from models.limits import FINE_TUNING_UPLOAD_MIB, KIB, LABELLED_ROWS, PAGE_EPOCHS, UPLOAD_BYTES
from ui import charts, finetune_cache
from ui.routing import through_app
from ui.state import sidebar_input
from viz.training import (accuracy_figure, accuracy_table, before_after_maps, change_heatmap,
                          cls_row_figure, data_figure, loss_figure,
                          probabilities_figure)

SHIPPED, UPLOADED = "shipped", "uploaded"
TABLE_PX = 390  # about ten rows visible; the rest scroll
REQUEST = "fine_tuning_request"  # session key: the training keys the train button asked for

through_app()

st.title("Fine-tuning a classifier")
st.markdown(
    "A pretrained encoder turns a sentence into vectors; a **classification head** turns those "
    "into a label. Here the head averages the vectors of the sentence's tokens (MiniLM was "
    "trained to summarise sentences that way) and one linear layer maps the average to one "
    "score per class. Fine-tuning trains the head and the whole encoder together on labelled "
    "sentences. Next to it, the same head on the **from-scratch encoder** starts from random "
    "weights and learns from the same sentences only."
)
given = sidebar_input()

source = st.radio("Labelled sentences", (SHIPPED, UPLOADED), horizontal=True,
                  key="fine_tuning_data",
                  format_func={SHIPPED: "The app's own 280 positive/negative sentences",
                               UPLOADED: "Your CSV file"}.get)
if source == UPLOADED:
    upload = st.file_uploader("CSV with two columns: text, label (a whole number per class)",
                              type=["csv"], key="fine_tuning_upload",
                              max_upload_size=FINE_TUNING_UPLOAD_MIB)
    st.caption(f"At most {LABELLED_ROWS} rows and {UPLOAD_BYTES // KIB} KB; a header row is "
               "optional; a quarter of each class is held out to measure accuracy.")
    if upload is None:
        st.info("Choose a CSV file to train on it.")
        st.stop()
    try:
        data = parse_csv(upload.getvalue(), upload.name)
    except LabelledDataError as error:
        st.error(str(error))
        st.stop()
else:
    data = load_shipped()
counts = ", ".join(f"{name}: {count}" for name, count in zip(data.class_names, data.class_counts()))
st.caption(f"{data.name}: {data.train_size} sentences to train on, {data.held_out_size} held out "
           f"({counts}).")
charts.show(data_figure(data.class_names, data.split_counts(False), data.split_counts(True)),
            key="fine_tuning_data_counts")

st.session_state.setdefault("fine_tuning_epochs", DEFAULT_EPOCHS)
epochs = st.slider("Epochs (passes over the training sentences)", 1, PAGE_EPOCHS,
                   key="fine_tuning_epochs",
                   help=f"The from-scratch encoder gets {SCRATCH_EPOCH_FACTOR} times as many: "
                        "it is smaller and faster, and starts from nothing.")
models = {f"{given.encoder_name} (pretrained)": default_settings(PRETRAINED, epochs),
          "from-scratch encoder (random start)": default_settings(SCRATCH, epochs)}
try:
    results = {name: finetune_cache.cached(given.encoder_name, data, settings)
               for name, settings in models.items()}
    if any(result is None for result in results.values()):
        st.caption("Trained models are kept on the server and shared: if anyone already trained "
                   "these settings on this data, the results appear at once.")
        request = tuple(finetune_cache.training_key(given.encoder_name, data, settings)
                        for settings in models.values())
        st.button("Train both models", key="fine_tuning_train", type="primary",
                  on_click=st.session_state.__setitem__, args=(REQUEST, request))
        if st.session_state.get(REQUEST) != request:
            st.info("Press the button to train. On a two-core machine this takes from under a "
                    "minute to about two minutes, depending on how busy the machine is.")
            st.stop()
        bar = st.progress(0.0, text=f"Fine-tuning both models on {data.train_size} labelled "
                                    "sentences (a minute or two here): starting…")
        for name, settings in models.items():
            results[name] = finetune_cache.trained(
                given.encoder_name, data, settings,
                lambda fraction, message, name=name: bar.progress(min(fraction, 1.0),
                                                                  text=f"{name}: {message}"))
        bar.empty()
except ModelLoadError as error:
    st.error(str(error))
    st.stop()
except (ValueError, RuntimeError) as error:
    st.error(f"Training failed: {first_sentence(error)}")
    st.stop()

st.subheader("How well each model learned")
pretrained_name, scratch_name = models
left, right = st.columns(2)
for column, name in ((left, pretrained_name), (right, scratch_name)):
    result = results[name]
    column.metric(f"Held-out accuracy, {name}", f"{result.held_out_accuracy:.1%}",
                  f"{result.held_out_accuracy - result.accuracy_before:+.1%} from "
                  f"{result.accuracy_before:.1%} before training")
st.dataframe(accuracy_table(results), hide_index=True, key="fine_tuning_accuracy_table",
             column_config={c: st.column_config.NumberColumn(format="percent")
                            for c in ("held-out accuracy before", "held-out accuracy after")})
charts.show(accuracy_figure(results, data.num_classes), key="fine_tuning_accuracy")
charts.show(loss_figure(results), key="fine_tuning_loss")
st.markdown(
    "**Why is the from-scratch encoder so bad?** It starts from random numbers: it has never "
    "read any text, so it does not know that *lovely* and *wonderful* mean nearly the same, or "
    "that *not* flips a sentence. From a couple of hundred sentences it can memorise the "
    "training set (its training loss falls) but it cannot generalise to new sentences, so its "
    "held-out accuracy stays near chance. The pretrained encoder arrives already knowing how "
    "words relate; fine-tuning only has to point that knowledge at the task."
)

st.subheader("The sidebar's sentence, before and after fine-tuning")
if not given.text.strip():
    st.info("Type a sentence in the sidebar to see its prediction before and after.")
    st.stop()
result = results[pretrained_name]
key = finetune_cache.training_key(given.encoder_name, data, models[pretrained_name])
change = finetune_cache.before_after(key, given.encoder_name, given.text, result)
before_column, after_column = st.columns(2)
before_column.metric("Before (fresh head, untrained)",
                     f"{change.before.label} ({change.before.confidence:.1%})")
after_column.metric("After fine-tuning", f"{change.after.label} ({change.after.confidence:.1%})")
charts.show(probabilities_figure(change.before, change.after), key="fine_tuning_probabilities")

st.markdown("Fine-tuning changes every weight of the encoder a little, so the attention changes "
            "too. Every head, ranked by how much its attention to this sentence changed:")
table = head_changes(change.before_record, change.after_record)
st.caption(ranking_measure(change.before_record, change.after_record))
st.dataframe(table, hide_index=True, key="fine_tuning_heads", height=TABLE_PX,
             column_config={"difference": st.column_config.ProgressColumn(
                 "difference", help="bits, 0 = same, 1 = nothing in common", format="%.3f",
                 min_value=0.0, max_value=1.0)})
charts.show(change_heatmap(table), key="fine_tuning_difference")
labels = {(int(row.layer), int(row.head)):
          f"layer {row.layer} · head {row.head} (difference {row.difference:.3f})"
          for row in table.itertuples()}
layer, head = st.selectbox("Head (most changed first)", list(labels), format_func=labels.get,
                           key="fine_tuning_head")
charts.show(cls_row_figure(change.before_record, change.after_record, layer, head),
            key="fine_tuning_cls_row")
before_map, after_map = before_after_maps(change.before_record, change.after_record, layer, head)
map_left, map_right = st.columns(2)
charts.show(before_map, key="fine_tuning_before_map", container=map_left)
charts.show(after_map, key="fine_tuning_after_map", container=map_right)
