"""The lessons on what surrounds attention and what a head does: fine-tuning, interventions, the
transformer block, BERT's pretraining and the output layer."""

from __future__ import annotations

from ui.lesson_figures_models import (block_table_figure, block_walk_figure,
                                      finetune_data_figure, finetune_heads_figure,
                                      finetune_prediction_figure, head_patching_figure,
                                      head_shares_figure, lens_rank_figure, loss_step_figure,
                                      mask_filling_figure, next_sentence_figure,
                                      output_layer_figure, positions_figure, recipe_figure)
from ui.lesson_index import TITLES
from ui.lesson_steps import Lesson, OpenExample, OpenPage, SetSidebar, Step, question

MODEL_LESSONS: tuple[Lesson, ...] = (
    Lesson("finetune", TITLES["finetune"], "chapters 0, 2 and 4", (
        Step("Labelled sentences",
             "Fine-tuning adds a small classification head to a pretrained encoder and trains "
             "both on labelled sentences. Part of the sentences are held out to measure how "
             "well it works on text it has not seen.",
             finetune_data_figure,
             SetSidebar("Use the chapter's sentence", text="I like natural language processing."),
             question("What does fine-tuning train?",
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
             question("Why does a pretrained encoder learn this from a few hundred sentences?",
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
             question("How does fine-tuning change the attention heads?",
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
             question("In the logit lens, which row is exactly the model's own prediction?",
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
             question("Why do the direct shares add up exactly to the logit difference?",
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
             question("A cell of the patching grid reads 1. What does that mean?",
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
             question("Why is a position vector added to each token's embedding?",
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
             question("What does the feed-forward network of a layer read?",
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
             question("What does a residual connection do?",
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
             question("Of the chosen tokens, why are 10% left unchanged?",
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
             question("Where does BERT read its next-sentence answer from?",
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
             question("What does the masked LM's loss compare?",
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
             question("How many numbers does the output layer give for one position?",
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
             question("The model gave the right token probability 0.5. What is the loss?",
                ("1 bit", True, "−log₂(0.5) = 1."),
                ("0.5 bits", False, "The loss is −log of the probability, not the "
                                    "probability."),
                ("0 bits", False, "Only a probability of 1 costs nothing."))),
    )),
)
