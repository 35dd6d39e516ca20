"""The lessons on attention itself: from scratch, why it is scaled, masks, adaptive spans,
an encoder–decoder's cross-attention (the chapters' steps, in order)."""

from __future__ import annotations

from ui.examples import BY_KEY, MARIO
from ui.lesson_figures import (RAMP, SPAN, cost_figure, cross_attention_figure,
                               decoder_self_figure, dot_products_figure, head_map_figure,
                               layer_grid_figure, learned_spans_step, masked_scores_figure,
                               neuron_view_figure, padding_figure, pronoun_figure,
                               ramp_figure_step, row_figure, span_on_sentence_figure,
                               unscaled_row_figure)
from ui.lesson_index import TITLES
from ui.lesson_steps import (Lesson, OpenExample, OpenPage, SetSidebar, Step, Switch, ToggleModel,
                             question)

ATTENTION_LESSONS: tuple[Lesson, ...] = (
    Lesson("scratch", TITLES["scratch"], "chapters 0–4", (
        Step("Queries, keys and values",
             "Every token is turned into three vectors: a query (what it is looking for), a key "
             "(what it offers) and a value (what it passes on). The query of one token is "
             "compared with every key by a dot product, and a softmax turns those scores into "
             "weights that add up to 1.",
             row_figure, SetSidebar("Use the chapter's dictionary sentence",
                                    text="Squirtle is the greatest Pokemon ever."),
             question("What do the weights of one attention row add up to?",
                ("1", True, "The softmax divides every exponential by their sum, so a row is a "
                            "set of shares of one whole."),
                ("The number of tokens", False, "That would be true if every weight were 1; the "
                                                "softmax makes them shares that add up to 1."),
                ("It depends on d_k", False, "d_k changes how peaked the weights are, not their "
                                             "sum: the softmax always normalises to 1."))),
        Step("One head, every row",
             "Do the same for every token and you get a square map: one row per query, one "
             "column per key. The row from the previous step is one row of this map.",
             head_map_figure, ToggleModel(),
             question("In this map, what does one row show?",
                ("How one token shares its attention over all tokens", True,
                 "Rows are queries: each row is one token's weights over every key."),
                ("How much attention one token receives", False,
                 "That is a column: how much every query gives to one key, and columns need "
                 "not add up to 1."),
                ("The token's embedding vector", False,
                 "The map holds weights between tokens, not vectors."))),
        Step("Many heads in one layer",
             "A layer runs several heads side by side, each with its own query, key and value "
             "weights, so each can learn to look for something else. Their outputs are joined "
             "and mixed by one more linear layer.",
             layer_grid_figure,
             OpenExample("fruit_flies", "Compare 'time flies' with 'fruit flies', head by head"),
             question("Why does a layer have several heads?",
                ("Each head has its own weights, so each can track a different relation", True,
                 "Like two friends watching the same video for different things, each head "
                 "can follow its own pattern: pronouns, neighbours, punctuation…"),
                ("To average out noise between identical heads", False,
                 "Identical heads would be wasted work; their weights differ from the start."),
                ("To make the model faster", False,
                 "Several heads cost about as much as one wide head; they are there for "
                 "variety, not speed."))),
        Step("The head that resolves “he”",
             "In 'Mario is short, but he can jump super high.' a model has to work out who "
             "'he' is. The head finder scores every head by how much of the attention of "
             "'he' goes to 'Mario' on the model you are running.",
             pronoun_figure, SetSidebar("Use the chapter's Mario sentence", text=MARIO),
             question("Which head links 'he' to 'Mario'?",
                ("It depends on the model: find it by measuring", True,
                 "Each model learns its own heads; the head finder measures it on the running "
                 "model, so the answer changes with the model."),
                ("Always layer 5, head 5", False,
                 "A number that fits one model says nothing about another: a 6-layer and a "
                 "30-layer model do not even share the same heads."),
                ("The last head of the last layer", False,
                 "Nothing forces a relation into a particular place; it is where training put "
                 "it."))),
        Step("Inside one head: the neuron view",
             "bertviz's neuron view opens the computation of one row: hover over a token on the "
             "left (click ⊕ to expand) to see its query, every key, their elementwise "
             "products, the sums q·k / √d_k and the softmax. The vectors are the ones your "
             "model computed for your sentence.",
             neuron_view_figure, OpenPage("pages/neuron_view.py", "Open the neuron view page"),
             question("In the neuron view, what turns the products q × k into one score per key?",
                ("Adding them up and dividing by √d_k", True,
                 "q·k is the sum of the elementwise products; the division by √d_k keeps "
                 "the scores in a range where the softmax still spreads its weight."),
                ("Taking the largest product", False,
                 "Every product counts: the score is their sum, not their maximum."),
                ("The softmax", False,
                 "The softmax comes after: it turns the scores of all keys into weights."))),
    )),
    Lesson("scaling", TITLES["scaling"], "chapters 0, 1 and 3", (
        Step("Dot products grow with the size of the vectors",
             "A dot product adds up d_k products. For random numbers with variance 1 the sum "
             "has variance d_k, so its typical size grows like √d_k: the chapter measured "
             "about 2.7 at d = 10 and far more at d = 10,000.",
             dot_products_figure, OpenExample("dot_10000", "Open the experiment at d = 10,000"),
             question("For random vectors of size 10,000, about how large is |q·k| on average?",
                ("About 80", True, "√(2d/π) = √(2·10,000/π) ≈ 80: the size grows like √d."),
                ("About 1", False, "That is roughly its size after dividing by √d_k, not before."),
                ("About 10,000", False, "10,000 is the variance; the typical size is its "
                                        "square root, scaled by √(2/π)."))),
        Step("Your sentence, with and without the division",
             "Here is one real row of your model: the softmax of q·k as it is, and of q·k "
             "divided by √d_k, as the model does. Unscaled, the largest score takes more of "
             "the weight and the entropy falls.",
             unscaled_row_figure, ToggleModel(),
             question("Does dividing every score of a row by √d_k change which key gets the most "
                "weight?",
                ("No, only how peaked the weights are", True,
                 "Dividing by the same positive number keeps the order of the scores; it "
                 "shrinks the gaps, so the softmax is less extreme."),
                ("Yes, it reverses the order", False,
                 "Dividing by a positive number never swaps two scores."),
                ("Yes, it makes every weight equal", False,
                 "The weights move closer together but stay different unless the scores were "
                 "equal."))),
        Step("The n² cost",
             "Every query meets every key: with n tokens a head computes n² dot products and "
             "keeps n² weights, while the projections and the feed-forward block treat each "
             "token on its own, n times the same work. Double the length and attention's "
             "part grows four times: past a few thousand tokens it is most of the work.",
             cost_figure, OpenPage("pages/attention_cost.py",
                                   "Measure it on this machine"),
             question("A text four times as long: how much more do the attention scores cost?",
                ("16 times", True, "n² grows with the square: (4n)² = 16 n²."),
                ("4 times", False, "That is the linear parts (projections, MLP); the scores "
                                   "compare every pair of tokens."),
                ("The same", False, "Each extra token is compared with every other one, so "
                                    "the cost grows."))),
    )),
    Lesson("masks", TITLES["masks"], "chapters 1, 3 and 4", (
        Step("A decoder only looks back",
             "An encoder lets every token read the whole sentence. A decoder that writes text "
             "one token at a time may only read what is already written, so row i keeps "
             "columns 0 to i. Switch the sidebar's model and watch the upper triangle empty.",
             head_map_figure, ToggleModel(),
             question("In a causal decoder, which keys may the fourth token (row 3) attend to?",
                ("Tokens 0 to 3", True, "Itself and everything before it: the past only."),
                ("Every token", False, "That is an encoder; a decoder must not read words it "
                                       "has not written yet."),
                ("Only token 3", False, "It may read all earlier tokens too, not just itself."))),
        Step("How the mask is applied",
             "The mask is laid over the raw scores before the softmax: allowed cells keep "
             "their score, masked ones become −∞. The softmax then gives them exactly zero "
             "weight. Real code writes the smallest number the dtype can hold instead "
             "(torch.finfo(dtype).min, about −3.4·10³⁸ in float32): its exponential is 0 all "
             "the same, and a row with every key masked stays a number instead of becoming "
             "NaN (−∞ − (−∞) is undefined).",
             masked_scores_figure, Switch("bidirectional", "Take the mask away",
                                          "Put the causal mask back"),
             question("Why are masked scores set to −∞ rather than to 0?",
                ("Because e^−∞ = 0, so they get exactly zero weight", True,
                 "The softmax exponentiates every score: only −∞ becomes 0."),
                ("A score of 0 would also get zero weight", False,
                 "e^0 = 1, so a score of 0 still gets a share of the row."),
                ("To make the computation faster", False,
                 "It costs the same; it is about which keys may be read."))),
        Step("Padding: two sentences in one batch",
             "A batch is a rectangle, so the shorter sentence is filled up with [PAD] tokens. "
             "The padding mask hides those as keys, so the short sentence is read as if it "
             "were alone.",
             padding_figure, Switch("forget", "Leave the padding mask out",
                                    "Put the padding mask back"),
             question("What does the padding mask hide?",
                ("[PAD] tokens as keys", True, "No real token may attend to padding, so the "
                                               "result does not depend on the batch."),
                ("The last real word", False, "Real words are never masked by padding."),
                ("Every token after the query", False, "That is the causal mask, a different "
                                                       "rule."))),
    )),
    Lesson("span", TITLES["span"], "chapter 0", (
        Step("A soft mask with a ramp",
             "Adaptive span gives each head a span z: keys within z tokens keep their weight, "
             "keys further away fade out over a ramp of width R. Because the ramp is a slope "
             "rather than a cliff, z can be learned like any other weight.",
             ramp_figure_step, OpenExample("span", "Open the span page at z = 5"),
             question(f"With z = {SPAN:g} and R = {RAMP:g}, how much of its weight does a key 6 tokens "
                "away keep?",
                ("Half", True, "m(x) = (R + z − x)/R = (2 + 5 − 6)/2 = 0.5: it is halfway "
                               "down the ramp."),
                ("All of it", False, "Only keys within z = 5 tokens keep all their weight."),
                ("None", False, "Weight drops to 0 only from z + R = 7 tokens on."))),
        Step("A span laid over your sentence",
             "Here the span z = 5 is laid over one head of your model: weights are multiplied "
             "by the mask and each row is rescaled to add up to 1. Longer sentences lose more.",
             span_on_sentence_figure,
             SetSidebar("Use the chapter's long Mario sentence",
                        text=BY_KEY["span"].text),
             question("After the mask, why is each row divided by what is left?",
                ("So its weights add up to 1 again", True,
                 "The mask removes some weight; rescaling shares the rest out as a whole."),
                ("To undo the mask", False, "Masked keys stay at 0; only the others grow."),
                ("To divide by √d_k", False, "That scaling happens before the softmax and has "
                                             "nothing to do with the span."))),
        Step("Spans a model learned",
             "A tiny encoder was trained with a penalty on long spans. The head that only "
             "needs the previous symbol shrank its span; reaching the first symbol kept a "
             "long one.",
             learned_spans_step, OpenExample("span", "Open the span page (retrain there)"),
             question("What pushes a head's span down during training?",
                ("A small penalty on z added to the loss", True,
                 "Every head pays for its span, so it keeps a long one only if the task needs "
                 "it."),
                ("The softmax", False, "The softmax does not know about distances."),
                ("Nothing: spans only grow", False, "Without the penalty they could stay long; "
                                                    "with it they shrink where they can."))),
    )),
    Lesson("seq2seq", TITLES["seq2seq"], "chapters 1 and 3", (
        Step("Cross-attention reads the source",
             "An encoder–decoder has three kinds of attention: the encoder's self-attention, "
             "the decoder's masked self-attention, and cross-attention. In cross-attention the "
             "queries come from the decoder and the keys and values from the encoder, so each "
             "word being written reads the source sentence.",
             cross_attention_figure,
             SetSidebar("Use a sentence the toy translator knows", text="i see the red car"),
             question("In cross-attention, where do the queries come from?",
                ("The decoder", True, "The word being written asks; the encoded source "
                                      "answers with its keys and values."),
                ("The encoder", False, "The encoder provides the keys and values."),
                ("Both, averaged", False, "Queries and keys come from different stacks; "
                                          "that is what makes it cross-attention."))),
        Step("The decoder writes one word at a time",
             "While writing, the decoder reads only the words it has already written: its "
             "self-attention is causal. A decoder-only model such as the one in the sidebar "
             "works the same way, without a source.",
             decoder_self_figure, OpenExample("generate", "Watch the decoder write"),
             question("Why is the decoder's self-attention causal?",
                ("Later words are not written yet", True,
                 "At each step the future does not exist; in training the mask keeps the model "
                 "from copying the answer."),
                ("To save memory", False, "The mask is a rule about what may be read, not a "
                                          "saving."),
                ("Because French is read right to left", False,
                 "French is written left to right like English."))),
    )),
)
