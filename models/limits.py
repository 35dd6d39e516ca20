"""Every budget and limit of the app, stated once (bytes unless the name says otherwise).

A limit here bounds what the server keeps (memory, disk, entries of a store) or what one request
may ask of it (characters, tokens, rows, steps). Two kinds of number stay beside their code: chunk
sizes that only split a computation (they bound a moment's memory, not what is kept or accepted),
and what a figure draws (viz/ reads nothing from models/ but records).
"""

from __future__ import annotations

from models.settings import configured_budgets

KIB = 2**10
MIB = 2**20
GIB = 2**30

# --- Text -----------------------------------------------------------------------------------------
# The one text limit: the sidebar's text and second sentence, a link's text, every page's own text
# box and each row of a data set to fine-tune on are cut (or, for a data set's row, refused) here.
MAX_TEXT_CHARS = 20_000
# A page's own text box is written into a link only up to this many characters (longer is data,
# not a setting); the box itself still accepts MAX_TEXT_CHARS.
LINK_CONTROL_CHARS = 500
# A model name or folder longer than this is refused before it reaches the file system.
MODEL_NAME_CHARS = 1024
# The largest seed of the from-scratch encoder's random weights (the sidebar's and a link's).
MAX_SEED = 2**31 - 1

# --- The stores of computed values (models/store/stores.py declares each with its budget) -------
# Traces (records and the views derived from them), shared by every session.
TRACE_CACHE_BYTES = 512 * MIB
# Ablations, knockouts and detector runs (one decoder comparison at its token limit is ~270 MB).
ANALYSIS_CACHE_BYTES = 320 * MIB
# Teaching pages, translations, fine-tuning before/after, layer walks and generations.
RESULT_CACHE_BYTES = 256 * MIB
# Figures as drawn (themed for presenter mode and the palette), counted by their JSON's size: a
# view seen before is drawn without restyling (a sentence's heatmap is tens of KB).
FIGURE_CACHE_BYTES = 64 * MIB
# Random from-scratch encoders of the layer-walk page (~90 MB at width 384 with BERT's vocabulary).
WALK_ENCODER_BYTES = 128 * MIB
# Classifiers fine-tuned on this server (a MiniLM copy is ~90 MB); the newest stays even alone
# over this (it is at most a MODEL_BYTES model and its head, and a session is about to use it).
FINETUNED_BYTES = 256 * MIB
# Fine-tuned classifiers kept at once, within FINETUNED_BYTES.
FINETUNED_MODELS = 4
# Fine-tuned classifiers kept on disk under the cache folder (a MiniLM copy is ~90 MB on disk);
# the least recently used is deleted when a new one is written.
FINETUNED_ON_DISK = 6
# Training keys whose encoder and data names are remembered (a few hundred bytes each).
TRAINING_NAMES = 256
# User-loaded Hugging Face encoders and decoders kept at once (the embedded MiniLM and SmolLM2 are
# pinned on top); each is at most MODEL_BYTES, so this bounds their memory.
LOADED_MODELS = 2
# From-scratch encoders kept at once (one per seed typed, or with weights copied in; 20-40 MB each).
SCRATCH_ENCODERS = 4
# Hugging Face encoder–decoders of the cross-attention page kept at once (each <= MODEL_BYTES).
SEQ2SEQ_MODELS = 1
# Keys a store remembers having dropped, for a notice or a test (the latest ones).
EVICTIONS_REMEMBERED = 64

# --- Loading a model (models/loading/) ------------------------------------------------------------
# A model whose float32 parameters (estimated from its config.json before anything is built)
# would take more than this is refused: about 268 million parameters.
MODEL_BYTES = 1 * GIB
# A safetensors header (JSON listing the tensors) larger than this is refused unread.
SAFETENSORS_HEADER_BYTES = 16 * MIB
# A decoder's token limit is cut so one record's float32 attentions (every layer and head) fit here.
DECODER_ATTENTION_BYTES = 128 * MIB
# Free disk kept beyond the converted SmolLM2 itself when it is converted.
CONVERSION_DISK_MARGIN_BYTES = 64 * MIB
# A Hugging Face encoder–decoder reads at most this many source tokens (what its views draw well).
MAX_SOURCE_TOKENS = 128
# ... and writes or is given at most this many target tokens.
MAX_TARGET_TOKENS = 64

# --- What one request may ask for -----------------------------------------------------------------
# What one batched forward of the head-importance grid may keep (every layer's weights, and a
# masked LM's logits); long inputs get smaller batches.
GRID_BUDGET_BYTES = 256 * MIB
# Most new tokens one generation may ask for.
MAX_NEW_TOKENS = 100
# Most epochs of one fine-tuning (the model's check) ...
MAX_EPOCHS = 30
# ... and what the fine-tuning page offers (a few minutes of training on two cores).
PAGE_EPOCHS = 8
# Fewest steps of the toy translator's "retrain and watch" ...
MIN_RETRAIN_STEPS = 20
# ... and most (about a minute on two cores).
MAX_RETRAIN_STEPS = 600
# Sentences in the layer-walk page's from-scratch batch ...
WALK_BATCH = 32
# ... tokens per sentence (the pretrained walk reads the model's own limit) ...
WALK_TOKENS = 128
# ... and layers of its from-scratch encoder.
WALK_SCRATCH_LAYERS = 6
# The n² cost page measures one layer at 64, 128, ... tokens (doubling), no longer than this: at 1,024 tokens a
# BERT-base layer's scores and weights take 2 x 12 x 1024² x 4 bytes = 96 MiB ...
COST_LONGEST_TOKENS = 1024
# ... each part timed this many times (the fastest run is kept: on a busy machine the others wait).
COST_REPEATS = 3

# --- Long inputs (models/hooks/streaming.py) ------------------------------------------------------
# A long input keeps per-layer reductions, never its full maps, so a decoder reads up to this many
# tokens (or its own position limit, when smaller).
LONG_TOKENS = 4096
# Each long input's per-layer inputs are kept on disk (SmolLM2 at 4,096 tokens: 283 MB) so any
# head can be computed again exactly in a fraction of a second; at most this much disk in all.
LONG_INPUT_DISK_BYTES = 2 * GIB
# A head of at most this many tokens is drawn cell by cell with its tokens; a longer one whole,
# max-pooled, beside an exact window (ui/views.py).
EXACT_MAP_TOKENS = 512

# --- Files ----------------------------------------------------------------------------------------
# Every export file on disk at once. Below Streamlit's 1 GB: a static folder larger than that at
# start switches static serving off (bootstrap.MAX_APP_STATIC_FOLDER_SIZE).
EXPORT_DISK_BYTES = 768 * MIB
# One export file: Streamlit's static serving answers 404 above 200 MB (MAX_APP_STATIC_FILE_SIZE),
# so an export that would grow past this is stopped and removed.
MAX_EXPORT_BYTES = 200 * MIB
# An export at most this large is written when the page draws; a larger one waits for a click.
CHEAP_EXPORT_BYTES = 2 * MIB
# An uploaded data set to fine-tune on (a CSV) ...
UPLOAD_BYTES = 256 * KIB
# ... has at most this many rows (a full fine-tune of MiniLM on them stays within a few minutes) ...
LABELLED_ROWS = 1000
# ... and at most this many classes.
LABELLED_CLASSES = 10

# Causal interventions (models/experiments/patching.py, attribution.py, logit_lens.py).
# One batched forward of a patching grid may hold this much: it decides how many patched copies
# of the corrupted prompt share a forward.
PATCH_BATCH_BYTES = 192 * MIB
# Patched copies per forward, at most (on a CPU, larger batches were no faster per copy).
PATCH_BATCH_ITEMS = 64
# A whole grid's patched forwards together (long prompts × many cells): a grid that would need
# more is refused before it starts, with the size it would need.
PATCH_GRID_BYTES = 8 * GIB
# Attribution patching keeps every layer's activations for its one backward pass.
ATTRIBUTION_BYTES = 512 * MIB
# The logit lens turns each layer's residual stream into logits this many bytes at a time.
LENS_CHUNK_BYTES = 128 * MIB

# --- Corpus mode (models/corpus/, pages/corpus.py, the `corpus` command) ---------------------------
# Passages in one padded batch of a corpus job, at most (the command line's default --batch-size).
CORPUS_BATCH_SIZE = 32
# ... and one layer's float32 maps of a batch (B x H x T x T) at most: long passages get smaller
# batches, and a job's memory stays bounded whatever the corpus.
CORPUS_BATCH_BYTES = 256 * MIB
# Passages whose heads are compared pairwise (Jensen-Shannon) in one job, about: a share of a
# larger corpus, drawn per passage.
CORPUS_DISTANCE_PASSAGES = 128
# ... compared a slice of heads against all at once: one slice's mixed rows take at most this (small
# enough to stay in the processor's cache: measured on MiniLM, 1 MiB was 3.7x faster than one
# 13 MB slice, 4 MiB 1.7x, 256 KiB 2x).
CORPUS_DISTANCE_CHUNK_BYTES = 1 * MIB
# The float16 query and key vectors a job keeps of sampled tokens for the joint embedding, on
# disk (MiniLM: about 29,000 tokens, 58,000 points per head).
CORPUS_EMBEDDING_BYTES = 256 * MIB
# A corpus uploaded on the Corpus page: at most this many bytes ...
CORPUS_UPLOAD_BYTES = 8 * MIB
# ... and this many passages (a larger corpus runs with the command line, or on Ray).
CORPUS_UPLOAD_PASSAGES = 5000
# Passages handed to a Ray cluster at once (the driver holds their texts and results).
CORPUS_RAY_CHUNK_PASSAGES = 20_000
# Corpus analyses the app keeps in its cache folder (the default one, uploads); the oldest beyond
# this are deleted.
CORPUS_KEPT_ANALYSES = 4
# A corpus job has glibc map every block this large or larger on its own (models.store.byte_cache
# map_large_blocks), so freed batches give their memory back instead of fragmenting the heap.
HEAP_MMAP_THRESHOLD_BYTES = 256 * KIB
# While a corpus job runs (models.corpus.heap batch_heap), blocks below this are kept on the heap
# and reused within a batch instead of being mapped and faulted in anew: above any batch's layer.
CORPUS_HEAP_MMAP_THRESHOLD_BYTES = 2 * CORPUS_BATCH_BYTES
# ... and the heap's top is not trimmed by a free below this (mallopt takes a C int); the job
# trims the whole heap after a batch that leaves more than CORPUS_HEAP_SLACK_BYTES free in it ...
CORPUS_HEAP_TRIM_THRESHOLD_BYTES = 1 << 30
# ... and afterwards it is trimmed again at glibc's own default (DEFAULT_TRIM_THRESHOLD).
HEAP_TRIM_THRESHOLD_BYTES = 128 * KIB
# Freed heap memory a corpus job keeps between batches for the next one to reuse, at most one
# batch's layer of maps; more is handed back. Batches come longest first (models.corpus.plan), so
# the next batch fits in what the last one freed: on 200 MiniLM passages the page faults fell
# from about 200,000 to 60,000-90,000 and the system time from 0.8 s to 0.35 s; the 1,000- and
# 100-passage peaks stayed within 24 MB of each other (shortest first, the kept memory could not
# hold the next, wider batch, and the 1,000-passage peak rose by 66-86 MB).
CORPUS_HEAP_SLACK_BYTES = CORPUS_BATCH_BYTES

# --- Reliability: what the server takes from a browser, a link, a model folder or the Hub ---------
# (issue 22). .streamlit/config.toml states the first three in Streamlit's units; a test checks
# that it agrees with these.
# What Streamlit itself holds of one uploaded file, in whole MiB: each uploader passes its own
# limit rounded up (max_upload_size), and the server's (server.maxUploadSize) is the largest of
# them; a larger file is refused while it streams in, before it is held.
# (FINE_TUNING_UPLOAD_MIB, CORPUS_UPLOAD_MIB, DECK_UPLOAD_MIB, STREAMLIT_UPLOAD_MIB: at the end,
# from the budgets in force.)
# A slide deck (models/teaching/decks.py): its file at most ...
DECK_BYTES = 256 * KIB
# ... its slides at most ...
DECK_SLIDES = 100
# ... a slide's title and the deck's ...
DECK_TITLE_CHARS = 200
# ... and a slide's note for the speaker.
DECK_NOTE_CHARS = 4_000
# A slide's view: its page and link query, the sidebar's texts included.
DECK_VIEW_CHARS = 3 * MAX_TEXT_CHARS
# A deck shared as one link: its compressed code, and once unpacked.
DECK_CODE_CHARS = 64 * KIB
# The largest message between the server and one browser (server.maxMessageSize; Streamlit
# counts it in units of 10**6 bytes). Outgoing, the largest the pages send are bertviz's views
# (at most about 14 MB) and a long input's mosaic of every head; incoming, each connection may
# make the server buffer this much before the next limit refuses it.
MESSAGE_BYTES = 32 * 10**6
# What a browser may send as the widgets' values of one run (server.maxWidgetStateSize, in units
# of 10**6 bytes too): a few text boxes of MAX_TEXT_CHARS characters each take well under this.
WIDGET_STATE_BYTES = 2 * 10**6
# A link's number with more digits than this is refused before it is converted (a float holds at
# most about 1.8e308; Python refuses to read ints of more than 4,300 digits).
LINK_NUMBER_DIGITS = 308
# A model's skeleton (built on the meta device, nothing allocated, to count its parameters) that
# makes more tensors than this is refused: a model within MODEL_BYTES makes a few thousand (a
# 48-layer BART about 2,900), and a config claiming millions of layers would otherwise build
# millions of empty modules.
SKELETON_TENSORS = 20_000
# A model reads at least this many tokens: a tokenizer saying fewer (model_max_length 1, -5) is
# ignored for the model's own positions, and a model with fewer positions is refused.
MIN_MODEL_TOKENS = 2
# Disk the models downloaded from the Hugging Face Hub may take together, in the app's own Hub
# folder (only when the Hub is turned on: ATTENTION_EXPLORER_HUB=on); the least recently used
# are deleted to make room, and a model larger than this is not downloaded.
HUB_CACHE_BYTES = 4 * GIB

# --- Configuration (models/settings.py) -----------------------------------------------------------
# Every budget above may be set in attention-explorer.toml or as ATTENTION_EXPLORER_<NAME>
# (environment over file over the defaults above): the values in force replace them here.
globals().update(configured_budgets(globals()))

# Derived from the budgets in force (Streamlit's upload limits, in whole MiB).
# The fine-tuning CSV's uploader ...
FINE_TUNING_UPLOAD_MIB = -(-UPLOAD_BYTES // MIB)
# ... the corpus uploader ...
CORPUS_UPLOAD_MIB = -(-CORPUS_UPLOAD_BYTES // MIB)
# ... the deck uploader ...
DECK_UPLOAD_MIB = -(-DECK_BYTES // MIB)
# ... and the server's (server.maxUploadSize): the largest of them.
STREAMLIT_UPLOAD_MIB = max(FINE_TUNING_UPLOAD_MIB, CORPUS_UPLOAD_MIB, DECK_UPLOAD_MIB)
