import streamlit as st

from models.teaching.neuron_view import VECTOR_DECIMALS, neuron_inputs
from ui.routing import through_app
from ui.state import current_trace, use_decoder
from ui.text import plain
from viz.neuron_view import MAX_TOKENS, neuron_view_html

through_app()

st.title("bertviz neuron view")
st.markdown(
    "bertviz's **neuron view** opens up one head: pick a token on the left and it shows that "
    "token's **query** vector, every token's **key** vector, their elementwise products, the "
    "dot product q·k divided by √d_k, and the softmax that turns those scores into the "
    "attention weights. Blue cells are positive, orange negative. Here bertviz's own drawing "
    "is fed with the query and key vectors captured from the sidebar's model (not bertviz's "
    "own copy of BERT), so it works for the embedded encoder, the decoder and the from-scratch "
    "encoder alike. Nothing is fetched from the internet."
)
st.button("Use the causal decoder", key="neuron_use_decoder", on_click=use_decoder)
trace = current_trace()
if trace is not None:
    record = trace.record
    if record.num_tokens > MAX_TOKENS:
        st.info(f"The neuron view draws up to {MAX_TOKENS} tokens (one row of vectors per token); "
                f"this input has {record.num_tokens}. Use a shorter sentence.")
    else:
        layer_column, head_column = st.columns(2)
        layer = layer_column.selectbox("Layer", range(record.num_layers), key="neuron_layer")
        head = head_column.selectbox("Head (bertviz's menu changes it too)",
                                     range(record.num_heads), key="neuron_head")
        inputs = neuron_inputs(trace, layer)
        st.caption(plain(
            f"{record.source} · layer {layer} · {record.num_tokens} tokens · vectors of "
            f"{inputs.queries.shape[-1]} numbers rounded to {VECTOR_DECIMALS} decimals. Hover "
            "over a token on the left to see its computation; click it to keep it. The "
            "scores bertviz computes are the model's own q·k scores"
            + (" (its queries are given pre-scaled, since this model does not divide by √d_k "
               "alone)" if abs(trace.scaling[layer] * inputs.queries.shape[-1] ** 0.5 - 1) > 1e-6
               else "") + "."))
        st.iframe(neuron_view_html(inputs, head, record.source), height="content",
                  alt=f"bertviz neuron view of layer {layer}, head {head}: query, key and "
                      "product vectors, scores and weights of one token")
