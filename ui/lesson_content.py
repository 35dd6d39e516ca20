"""The lessons' content as plain data: a lesson is a list of steps; a step has a title, two or
three sentences, one live figure (ui/lesson_figures.py), a "try this" action and a check
question."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ui.examples import BY_KEY, MARIO
from ui.lesson_index import TITLES
from ui.lesson_figures import (
    RAMP, SPAN, block_table_figure, block_walk_figure, cost_figure, loss_step_figure,
    mask_filling_figure, neuron_view_figure, next_sentence_figure, output_layer_figure,
    positions_figure, recipe_figure, cross_attention_figure, decoder_self_figure, dot_products_figure,
    finetune_data_figure, finetune_heads_figure, finetune_prediction_figure, head_map_figure,
    head_patching_figure, head_shares_figure, lens_rank_figure,
    layer_grid_figure, learned_spans_step, masked_scores_figure, padding_figure, pronoun_figure,
    ramp_figure_step, row_figure, span_on_sentence_figure, unscaled_row_figure,
)


# --- content types ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Choice:
    text: str
    right: bool
    why: str  # one or two sentences: why this answer is right or wrong


@dataclass(frozen=True)
class Question:
    prompt: str
    choices: tuple[Choice, ...]

    def __post_init__(self) -> None:
        if sum(choice.right for choice in self.choices) != 1:
            raise ValueError(f"'{self.prompt}' needs exactly one right answer")

    @property
    def right_index(self) -> int:
        return next(i for i, choice in enumerate(self.choices) if choice.right)


@dataclass(frozen=True)
class SetSidebar:
    """Try this: a button that changes the sidebar's sentence or model."""

    label: str
    text: str | None = None
    kind: str | None = None  # a registered kind (models/loading/kinds/)


@dataclass(frozen=True)
class ToggleModel:
    """Try this: a button that switches the sidebar between the encoder and the decoder."""


@dataclass(frozen=True)
class Switch:
    """Try this: a button that turns one of the lesson's own switches on or off."""

    name: str
    turn_on: str
    turn_off: str


@dataclass(frozen=True)
class OpenExample:
    """Try this: a link that opens one of the chapters' examples (ui/examples.py)."""

    example: str
    label: str


@dataclass(frozen=True)
class OpenPage:
    """Try this: a link to one of the app's pages."""

    page: str  # its file, "pages/masked_lm.py"
    label: str


Action = SetSidebar | ToggleModel | Switch | OpenExample | OpenPage


@dataclass(frozen=True)
class Step:
    title: str
    text: str
    figure: Callable[[str], None]  # draws the step's figure; its argument is the chart's key
    action: Action
    question: Question


@dataclass(frozen=True)
class Lesson:
    key: str
    title: str
    chapters: str
    steps: tuple[Step, ...] = field(default_factory=tuple)


# --- figures: each draws one live figure from the caches ----------------------------------------


def _q(prompt: str, *choices: tuple[str, bool, str]) -> Question:
    return Question(prompt, tuple(Choice(*choice) for choice in choices))


LESSONS: tuple[Lesson, ...] = (
    Lesson("scratch", TITLES["scratch"], "chapters 0–4", (
        Step("Queries, keys and values",
             "Every token is turned into three vectors: a query (what it is looking for), a key "
             "(what it offers) and a value (what it passes on). The query of one token is "
             "compared with every key by a dot product, and a softmax turns those scores into "
             "weights that add up to 1.",
             row_figure, SetSidebar("Use the chapter's dictionary sentence",
                                    text="Squirtle is the greatest Pokemon ever."),
             _q("What do the weights of one attention row add up to?",
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
             _q("In this map, what does one row show?",
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
             _q("Why does a layer have several heads?",
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
             _q("Which head links 'he' to 'Mario'?",
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
             _q("In the neuron view, what turns the products q × k into one score per key?",
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
             _q("For random vectors of size 10,000, about how large is |q·k| on average?",
                ("About 80", True, "√(2d/π) = √(2·10,000/π) ≈ 80: the size grows like √d."),
                ("About 1", False, "That is roughly its size after dividing by √d_k, not before."),
                ("About 10,000", False, "10,000 is the variance; the typical size is its "
                                        "square root, scaled by √(2/π)."))),
        Step("Your sentence, with and without the division",
             "Here is one real row of your model: the softmax of q·k as it is, and of q·k "
             "divided by √d_k, as the model does. Unscaled, the largest score takes more of "
             "the weight and the entropy falls.",
             unscaled_row_figure, ToggleModel(),
             _q("Does dividing every score of a row by √d_k change which key gets the most "
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
             _q("A text four times as long: how much more do the attention scores cost?",
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
             _q("In a causal decoder, which keys may the fourth token (row 3) attend to?",
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
             _q("Why are masked scores set to −∞ rather than to 0?",
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
             _q("What does the padding mask hide?",
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
             _q(f"With z = {SPAN:g} and R = {RAMP:g}, how much of its weight does a key 6 tokens "
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
             _q("After the mask, why is each row divided by what is left?",
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
             _q("What pushes a head's span down during training?",
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
             _q("In cross-attention, where do the queries come from?",
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
             _q("Why is the decoder's self-attention causal?",
                ("Later words are not written yet", True,
                 "At each step the future does not exist; in training the mask keeps the model "
                 "from copying the answer."),
                ("To save memory", False, "The mask is a rule about what may be read, not a "
                                          "saving."),
                ("Because French is read right to left", False,
                 "French is written left to right like English."))),
    )),
    Lesson("finetune", TITLES["finetune"], "chapters 0, 2 and 4", (
        Step("Labelled sentences",
             "Fine-tuning adds a small classification head to a pretrained encoder and trains "
             "both on labelled sentences. Part of the sentences are held out to measure how "
             "well it works on text it has not seen.",
             finetune_data_figure,
             SetSidebar("Use the chapter's sentence", text="I like natural language processing."),
             _q("What does fine-tuning train?",
                ("The new head and, a little, every weight of the encoder", True,
                 "The whole model learns together; the pretrained weights move only a little."),
                ("Only the encoder's attention", False, "Every weight changes, and the new "
                                                        "head most of all."),
                ("Nothing in the encoder", False, "That would be a frozen encoder; here the "
                                                  "encoder is trained too."))),
        Step("Your sentence, before and after",
             "Before training, the new head has random weights, so its answer is a guess. "
             "After fine-tuning, your sentence gets the label the model learned for it, "
             "usually with far more confidence.",
             finetune_prediction_figure, OpenExample("sentiment", "Open the fine-tuning page"),
             _q("Why does a pretrained encoder learn this from a few hundred sentences?",
                ("It already knows how words relate", True,
                 "Pretraining taught it that 'lovely' and 'wonderful' are close; fine-tuning "
                 "only points that knowledge at the task."),
                ("A few hundred sentences are plenty for any model", False,
                 "The from-scratch encoder, trained on the same sentences, stays near chance."),
                ("The held-out sentences are in the training set", False,
                 "They are kept apart precisely to test on unseen text."))),
        Step("Which heads changed",
             "Fine-tuning moves every weight a little, so attention changes too. The map ranks "
             "the heads by how differently they attend to your sentence after training.",
             finetune_heads_figure, OpenExample("sentiment", "Open the fine-tuning page"),
             _q("How does fine-tuning change the attention heads?",
                ("Some more than others", True, "Heads the task uses move more; many barely "
                                                "change."),
                ("It resets them", False, "It starts from the pretrained weights and nudges "
                                          "them."),
                ("It leaves them untouched", False, "Every weight gets gradients, the "
                                                    "attention weights included."))),
    )),
    Lesson("interventions", TITLES["interventions"],
           "chapters 1 and 3", (
        Step("What each layer already predicts",
             "The logit lens reads every layer's residual stream through the model's final norm "
             "and unembedding, as if the model stopped there. On 'The Eiffel Tower is in the "
             "city of', watch the rank of ' Paris' climb to 1 in the last layers.",
             lens_rank_figure, OpenExample("fact_lens", "Open the logit lens on this prompt"),
             _q("In the logit lens, which row is exactly the model's own prediction?",
                ("The last layer's output", True,
                 "The model's head reads the last layer's output; reading it with the same "
                 "final norm and unembedding gives the model's own logits."),
                ("The embeddings", False,
                 "The embeddings are what the first layer reads: no layer has worked on them "
                 "yet."),
                ("The layer with the most probable token", False,
                 "A middle layer may be surer than the last, but only the last is what the "
                 "model outputs."))),
        Step("Which heads write the answer",
             "In 'When Mary and John went to the store, John gave a drink to' the model should "
             "answer Mary, not John. The final stream is a sum of every head's and MLP's "
             "output, so with the final norm's scale frozen, logit(Mary) − logit(John) splits "
             "into one share per head and MLP.",
             head_shares_figure,
             OpenExample("ioi_attribution", "Open direct logit attribution on this prompt"),
             _q("Why do the direct shares add up exactly to the logit difference?",
                ("The stream is a sum of the parts, and the frozen norm reads it linearly", True,
                 "Each part's share is its output read by the same linear map, and the shares "
                 "of a sum add up to the share of the whole."),
                ("Because the heads are trained to add up", False,
                 "Nothing in training asks for it: it follows from the sum in the residual "
                 "stream."),
                ("They only add up approximately", False,
                 "With the scale frozen at its value in the run the split is exact, up to "
                 "rounding."))),
        Step("Patching one run into another",
             "Writing the answer is not the whole story: a head can matter through the heads "
             "after it. Activation patching runs the prompt with a third name ('Paul gave a "
             "drink to') and puts one head's output from the Mary prompt back, to see how much "
             "of the answer returns.",
             head_patching_figure,
             OpenExample("ioi_patching", "Open activation patching on this pair"),
             _q("A cell of the patching grid reads 1. What does that mean?",
                ("Patching that piece alone brings the clean answer fully back", True,
                 "The scale puts the corrupted run at 0 and the clean run at 1: that one "
                 "piece carries everything the clean prompt adds."),
                ("The head attends to one token only", False,
                 "Patching measures an effect on the answer, not where the head looks."),
                ("The head is not used", False,
                 "A head that does not matter leaves the corrupted run as it was: 0."))),
    )),
    Lesson("block", TITLES["block"], "chapters 0, 1, 3 and 4", (
        Step("Attention alone ignores word order",
             "Attention compares every token with every other one, whatever their order: "
             "'dog bites man' and 'man bites dog' would give the same weights, shuffled. So "
             "before the first layer a position vector is added to every token's embedding: "
             "fixed sine and cosine waves in the original Transformer, a learned table in "
             "BERT.",
             positions_figure, OpenPage("pages/positions.py", "Open the positions page"),
             _q("Why is a position vector added to each token's embedding?",
                ("Without it, attention would not know the order of the tokens", True,
                 "The dot products do not depend on where a token stands; the position "
                 "vector puts that into the token itself."),
                ("To make the embeddings longer", False,
                 "It is added, not appended: the width stays the same."),
                ("To mark the padding", False, "Padding is handled by the padding mask."))),
        Step("The feed-forward network",
             "After attention, every token goes on its own through the same small network: a "
             "linear layer that widens it (four times in BERT), a GELU, and a linear layer "
             "back to the model's width. Attention mixes information between tokens; the "
             "feed-forward network works on each token alone.",
             block_walk_figure, OpenPage("pages/encoder_layer.py",
                                         "Follow your sentence through a whole layer"),
             _q("What does the feed-forward network of a layer read?",
                ("One token's vector at a time", True,
                 "The same weights are applied to each position separately: no token sees "
                 "another there."),
                ("The whole sentence at once", False,
                 "Only attention reads other tokens; the feed-forward part is per token."),
                ("Only the [CLS] token", False, "It runs on every position."))),
        Step("Residual connections and layer norm",
             "Each sub-layer's output is added to its input (a residual connection), so a "
             "layer only has to learn a change, and gradients reach the first layers through "
             "the sums. Layer norm then rescales each token's vector to mean 0 and variance 1 "
             "(with a learned scale and shift): BERT normalises after each sum, many newer "
             "models before each sub-layer.",
             block_table_figure, OpenPage("pages/encoder_layer.py",
                                          "Open the layer, step by step"),
             _q("What does a residual connection do?",
                ("Adds the sub-layer's input to its output", True,
                 "x + sublayer(x): the input passes through unchanged and the sub-layer adds "
                 "to it."),
                ("Normalises each vector", False, "That is the layer norm."),
                ("Removes the padding", False, "Residuals do not know about padding."))),
    )),
    Lesson("bert", TITLES["bert"], "chapters 1 and 4", (
        Step("Masked words: 15%, then 80/10/10",
             "BERT reads text with words hidden and learns to fill them in. 15% of the tokens "
             "are chosen; of those, 80% become [MASK], 10% a random token and 10% stay as "
             "they are, so the model cannot rely on [MASK] to know where to work and must "
             "keep a good vector for every token. The loss counts the chosen tokens only.",
             recipe_figure, OpenPage("pages/masked_lm.py", "Open the masked-words page"),
             _q("Of the chosen tokens, why are 10% left unchanged?",
                ("So the model must check every token, not only the [MASK]s", True,
                 "[MASK] never appears when the model is used; keeping and randomising some "
                 "chosen tokens teaches it to build good vectors for real words too."),
                ("To make training faster", False, "The same positions are scored either "
                                                   "way."),
                ("Because [MASK] is rare in the vocabulary", False,
                 "It is one token like the others; the point is what the model learns."))),
        Step("Next-sentence prediction",
             "BERT's second task: given [CLS] A [SEP] B [SEP], was B the sentence that came "
             "after A (IsNext, half the pairs) or one from elsewhere (NotNext)? The answer is "
             "read from the [CLS] token's last vector, and segment embeddings tell the model "
             "which tokens belong to A and which to B; later models (RoBERTa) dropped the task "
             "and did as well.",
             next_sentence_figure, OpenExample("head_view",
                                               "See a sentence pair in bertviz's head view"),
             _q("Where does BERT read its next-sentence answer from?",
                ("The [CLS] token's last vector", True,
                 "[CLS] attends to both sentences; a small classifier on its vector says "
                 "IsNext or NotNext."),
                ("The last [SEP]", False, "[SEP] only marks where a sentence ends."),
                ("The average of all tokens", False, "BERT uses [CLS] for it."))),
        Step("A masked LM pretrained here",
             "A small encoder pretrained on this app's own corpus by the same recipe fills in "
             "a [MASK]. With a few thousand tokens to learn from it knows frequent words and "
             "short patterns; BERT read 3.3 billion words.",
             mask_filling_figure, OpenPage("pages/masked_lm.py",
                                           "Pretrain it and type your own [MASK]"),
             _q("What does the masked LM's loss compare?",
                ("Its prediction with the original token, at the chosen positions", True,
                 "The cross-entropy of the original token, only where the recipe chose one."),
                ("Its prediction with [MASK]", False, "[MASK] is the input, never the answer."),
                ("Every position's prediction", False,
                 "Unchosen positions are not in the loss."))),
    )),
    Lesson("output", TITLES["output"], "chapters 3 and 4", (
        Step("From the last vector to a score for every word",
             "After the last layer, a linear layer maps each token's vector to one score per "
             "vocabulary token (the logits), often with the embedding matrix as its weights. "
             "A softmax turns the scores into probabilities: here the decoder's for the token "
             "after 'The Eiffel Tower is in the city of'.",
             output_layer_figure, OpenExample("capital", "Open the next-word predictions"),
             _q("How many numbers does the output layer give for one position?",
                ("One per token of the vocabulary", True,
                 "Every token the model knows gets a score; the softmax makes them a "
                 "distribution."),
                ("One per token of the input", False,
                 "That would be an attention row, not a prediction."),
                ("As many as the model's width", False,
                 "That is the vector it reads; the output layer maps it to the vocabulary."))),
        Step("The loss: cross-entropy",
             "Training compares the predicted distribution with the token that really came: "
             "the loss is −log of the probability given to it (in bits here). A sure and "
             "right guess costs 0; a token given 1/1,000 costs about 10 bits. Training "
             "lowers the mean over every position.",
             loss_step_figure, OpenExample("capital", "Open the loss at every position"),
             _q("The model gave the right token probability 0.5. What is the loss?",
                ("1 bit", True, "−log₂(0.5) = 1."),
                ("0.5 bits", False, "The loss is −log of the probability, not the "
                                    "probability."),
                ("0 bits", False, "Only a probability of 1 costs nothing."))),
    )),
)
