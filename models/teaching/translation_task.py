"""A tiny English -> French translation task the app generates itself (no download).

Two sentence shapes, word for word except where French grammar says otherwise:
- "the red car is fast"      -> "la voiture rouge est rapide"    (the adjective follows the noun)
- "she sees the green books" -> "elle voit les livres verts"     (the verb agrees with the subject)
The article (le / la / les) and every adjective agree with the noun's gender and number, and the
noun comes after its adjective in English but before it in French, so the cross-attention that
writes "rouge" has to look one word back in the source and the one that writes "la" two words
ahead: the alignment is not the diagonal.

Words are the tokens (lower case, split on spaces). Every sentence of the grammar is listed once;
a seeded shuffle splits them into training and held-out sentences, and held-out sentences never
appear in training.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import lru_cache

PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"
SPECIALS = (PAD, BOS, EOS)
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2

MASCULINE, FEMININE = "m", "f"
# English noun -> (French noun, gender). Every plural adds -s in both languages.
NOUNS = {
    "car": ("voiture", FEMININE), "book": ("livre", MASCULINE), "cat": ("chat", MASCULINE),
    "house": ("maison", FEMININE), "dog": ("chien", MASCULINE), "table": ("table", FEMININE),
    "bike": ("vélo", MASCULINE), "flower": ("fleur", FEMININE), "door": ("porte", FEMININE),
    "chair": ("chaise", FEMININE), "pen": ("stylo", MASCULINE), "shirt": ("chemise", FEMININE),
    "ball": ("balle", FEMININE), "garden": ("jardin", MASCULINE), "train": ("train", MASCULINE),
    "key": ("clé", FEMININE), "cup": ("tasse", FEMININE), "phone": ("téléphone", MASCULINE),
    "bag": ("sac", MASCULINE), "window": ("fenêtre", FEMININE),
}
# English adjective -> (masculine, feminine); the plural adds -s unless the word ends in s.
ADJECTIVES = {
    "red": ("rouge", "rouge"), "blue": ("bleu", "bleue"), "green": ("vert", "verte"),
    "black": ("noir", "noire"), "white": ("blanc", "blanche"), "grey": ("gris", "grise"),
    "yellow": ("jaune", "jaune"), "fast": ("rapide", "rapide"), "slow": ("lent", "lente"),
    "heavy": ("lourd", "lourde"), "clean": ("propre", "propre"), "dirty": ("sale", "sale"),
    "broken": ("cassé", "cassée"), "round": ("rond", "ronde"), "empty": ("vide", "vide"),
    "cold": ("froid", "froide"),
}
# English subject -> (French subject, person: 0 je, 1 tu, 2 il/elle, 3 nous, 4 ils)
SUBJECTS = {"i": ("je", 0), "you": ("tu", 1), "he": ("il", 2), "she": ("elle", 2),
            "we": ("nous", 3), "they": ("ils", 4)}
THIRD_PERSON = 2
# English verb (base, third person singular) -> French forms for persons 0..4
VERBS = {
    ("see", "sees"): ("vois", "vois", "voit", "voyons", "voient"),
    ("take", "takes"): ("prends", "prends", "prend", "prenons", "prennent"),
    ("want", "wants"): ("veux", "veux", "veut", "voulons", "veulent"),
    ("wash", "washes"): ("lave", "laves", "lave", "lavons", "lavent"),
}
ARTICLES = {(MASCULINE, False): "le", (FEMININE, False): "la", (MASCULINE, True): "les",
            (FEMININE, True): "les"}

EXAMPLE_SENTENCES = ("the red car is fast", "she sees the green books", "the white cat is heavy",
                     "we want the black chairs")
SNAPSHOT_SENTENCE = EXAMPLE_SENTENCES[0]
MAX_SOURCE_WORDS = 12  # the longest sentence of the grammar has 6 words
MAX_TARGET_WORDS = 12  # translation stops here if the model never writes <eos>


@dataclass(frozen=True)
class TaskSettings:
    seed: int = 0
    train_size: int = 8000
    held_out_size: int = 500

    def __post_init__(self) -> None:
        for name in ("train_size", "held_out_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"TaskSettings.{name} must be a positive integer, got {value!r}")
        available = len(all_pairs()) - len(EXAMPLE_SENTENCES)
        if self.train_size + self.held_out_size > available:
            raise ValueError(f"the grammar has {available} sentences to split, not "
                             f"{self.train_size + self.held_out_size}")


@dataclass(frozen=True)
class Pair:
    source: tuple[str, ...]  # English words
    target: tuple[str, ...]  # French words


@dataclass(frozen=True)
class Vocabulary:
    """Words <-> ids; ids 0, 1, 2 are <pad>, <bos>, <eos>."""

    words: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.words[:len(SPECIALS)] != SPECIALS or len(set(self.words)) != len(self.words):
            raise ValueError("a vocabulary starts with <pad>, <bos>, <eos> and lists each word once")

    @property
    def index(self) -> dict[str, int]:
        return _index(self.words)

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return word in self.index and word not in SPECIALS

    def ids(self, words: tuple[str, ...]) -> list[int]:
        index = self.index
        return [index[w] for w in words]

    def unknown(self, words: tuple[str, ...]) -> tuple[str, ...]:
        """The words not in this vocabulary, each once, in the order they appear."""
        return tuple(dict.fromkeys(w for w in words if w not in self))


@lru_cache(maxsize=8)
def _index(words: tuple[str, ...]) -> dict[str, int]:
    return {w: i for i, w in enumerate(words)}


@dataclass(frozen=True)
class TranslationTask:
    settings: TaskSettings
    train: tuple[Pair, ...]
    held_out: tuple[Pair, ...]
    source_vocabulary: Vocabulary
    target_vocabulary: Vocabulary


def _plural_adjective(word: str) -> str:
    return word if word.endswith("s") else word + "s"


def _noun_phrase(adjective: str, noun: str, plural: bool) -> tuple[tuple[str, ...], tuple[str, ...], str]:
    """("the red cars", "les voitures rouges") as word tuples, and the French noun's gender."""
    french_noun, gender = NOUNS[noun]
    french_adjective = ADJECTIVES[adjective][gender == FEMININE]
    if plural:
        noun, french_noun = noun + "s", french_noun + "s"
        french_adjective = _plural_adjective(french_adjective)
    return (("the", adjective, noun), (ARTICLES[gender, plural], french_noun, french_adjective),
            gender)


def _descriptions():
    for noun in NOUNS:
        for plural in (False, True):
            for first in ADJECTIVES:
                english, french, gender = _noun_phrase(first, noun, plural)
                for second in ADJECTIVES:
                    if second == first:
                        continue
                    predicate = ADJECTIVES[second][gender == FEMININE]
                    if plural:
                        predicate = _plural_adjective(predicate)
                    yield Pair(english + ("are" if plural else "is", second),
                               french + ("sont" if plural else "est", predicate))


def _actions():
    for subject, (french_subject, person) in SUBJECTS.items():
        for (base, third), forms in VERBS.items():
            verb = third if person == THIRD_PERSON else base
            for noun in NOUNS:
                for plural in (False, True):
                    for adjective in ADJECTIVES:
                        english, french, _ = _noun_phrase(adjective, noun, plural)
                        yield Pair((subject, verb) + english, (french_subject, forms[person]) + french)


@lru_cache(maxsize=1)
def all_pairs() -> tuple[Pair, ...]:
    """Every sentence of the grammar with its translation, in a fixed order."""
    return tuple(_descriptions()) + tuple(_actions())


@lru_cache(maxsize=1)
def reference_translations() -> dict[tuple[str, ...], tuple[str, ...]]:
    return {pair.source: pair.target for pair in all_pairs()}


def _vocabulary(sentences) -> Vocabulary:
    words = sorted({word for sentence in sentences for word in sentence})
    return Vocabulary(SPECIALS + tuple(words))


@lru_cache(maxsize=4)
def make_task(settings: TaskSettings = TaskSettings()) -> TranslationTask:
    """A seeded split: `held_out_size` sentences (the examples among them) the model never sees
    in training, and `train_size` training sentences. The vocabularies are the training words."""
    examples = {tuple(s.split()) for s in EXAMPLE_SENTENCES}
    pool = [pair for pair in all_pairs() if pair.source not in examples]
    random.Random(settings.seed).shuffle(pool)
    held_out_examples = tuple(p for p in all_pairs() if p.source in examples)
    extra = settings.held_out_size - len(held_out_examples)
    held_out = held_out_examples + tuple(pool[:max(0, extra)])
    train = tuple(pool[max(0, extra):max(0, extra) + settings.train_size])
    source_vocabulary = _vocabulary(p.source for p in train)
    target_vocabulary = _vocabulary(p.target for p in train)
    for pair in held_out:
        if source_vocabulary.unknown(pair.source) or target_vocabulary.unknown(pair.target):
            raise ValueError("the training split does not cover every word: use more sentences")
    return TranslationTask(settings, train, held_out, source_vocabulary, target_vocabulary)


def source_words(text: str) -> tuple[str, ...]:
    """A typed sentence as the task's words: lower case, split on spaces, end punctuation dropped."""
    return tuple(re.sub(r"[.!?,;:]+", " ", (text or "").lower()).split())


def _quoted(words: tuple[str, ...]) -> str:
    quoted = [f"'{w}'" for w in words]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def check_source(text: str, vocabulary: Vocabulary, limit: int = MAX_SOURCE_WORDS) -> tuple[str, ...]:
    """The sentence's words, or ValueError with one sentence saying what is wrong with it."""
    words = source_words(text)
    if not words:
        raise ValueError("Type an English sentence to translate, for example "
                         f"'{SNAPSHOT_SENTENCE}'.")
    if len(words) > limit:
        raise ValueError(f"The sentence has {len(words)} words and the toy model takes at most "
                         f"{limit}: shorten it.")
    unknown = vocabulary.unknown(words)
    if unknown:
        verb = "is" if len(unknown) == 1 else "are"
        raise ValueError(f"{_quoted(unknown)} {verb} not in the toy model's vocabulary of "
                         f"{len(vocabulary) - len(SPECIALS)} English words (see the list below).")
    return words
