"""The long-document retrieval benchmark's data: Shakespeare filler with one planted fact.

Every document is a contiguous span of the tinyshakespeare text, in token space, with one
*fact* sentence inserted at a word boundary at a requested *depth*: with ``B`` body tokens
(the document without its special tokens) and an ``m``-token fact, the fact starts at body token
``round(depth * (B - m))``, so depth 0 puts it first and depth 1 last. Its *query* paraphrases
the fact without repeating its key words ("Where does Brannoc keep his hidden port?" for "The
secret harbour of Lord Brannoc is called Velmora."). Every fact has its own invented name, so
a query matches exactly one document; the other documents of the same length, with other
facts (one in six of the same kind), are the distractors.

Names and places are invented and checked absent from tinyshakespeare, so the filler never
mentions them.

Example:
    >>> fact = make_facts(7)[6]
    >>> fact.sentence, fact.query
    ('The secret harbour of Lord Halvard is called Tarnwick.', 'Where does Halvard keep his hidden port?')
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from posembed._data import tinyshakespeare_path

__all__ = ["Fact", "Document", "make_facts", "default_text", "corpus_tokens", "plant_documents", "TEMPLATES"]

#: (fact sentence, query) templates; ``{name}`` and ``{place}`` are filled per fact
TEMPLATES: tuple[tuple[str, str], ...] = (
    ("The secret harbour of Lord {name} is called {place}.", "Where does {name} keep his hidden port?"),
    ("{name} buried the family gold beneath the old mill at {place}.", "Where did {name} hide the treasure?"),
    ("Captain {name} sails a ship named the {place}.", "What is the name of the vessel that {name} commands?"),
    ("Lady {name} keeps a tame falcon called {place}.", "What is the name of the bird that {name} owns?"),
    ("The merchant {name} buys his silk in the eastern city of {place}.", "Where does the trader {name} get his cloth?"),
    ("The physician {name} was born in the mountain village of {place}.", "What is the hometown of doctor {name}?"),
)
NAMES = (
    "Brannoc", "Velric", "Osric", "Maelis", "Torvald", "Ysolde", "Halvard", "Corwen", "Isembard", "Merewyn",
    "Aldric", "Berengar", "Caelan", "Deorwin", "Elowen", "Fenwick", "Gideon", "Hesketh", "Idwal", "Jorund",
    "Kestrel", "Lorcan", "Morwenna", "Nerys", "Osgar", "Peregrine", "Quentor", "Rowena", "Sigrun", "Tamsin",
    "Ulric", "Vespera", "Wystan", "Xanthe", "Yorath", "Zephyrine",
)
PLACES = (
    "Velmora", "Quillhaven", "Drestwick", "Marrowdene", "Thistlecombe", "Ebonreach", "Tarnwick", "Kelderby",
    "Wyncross", "Brackenholm", "Ormsgate", "Fallowmere", "Glimmerford", "Harrowdeep", "Lunecrest", "Mossgarth",
    "Nethercoil", "Pellinore", "Rookhaven", "Silverlode", "Umberfall", "Varrowmoor", "Whitlow", "Yarrowby",
    "Zennor", "Ashcombe", "Brightwater", "Coldharbour", "Duskmere", "Emberlyn", "Foxhollow", "Greymantle",
    "Hollowmere", "Ironvale", "Jasperine", "Oakenshaw",
)


@dataclass(frozen=True)
class Fact:
    """One planted fact and the query that asks for it."""

    index: int
    sentence: str
    query: str


@dataclass(frozen=True)
class Document:
    """One benchmark document in token space.

    ``body`` holds the document's tokens without special tokens; the fact occupies
    ``body[fact_start : fact_start + fact_length]``.
    """

    fact: Fact
    depth: float
    body: tuple[int, ...]
    fact_start: int
    fact_length: int


def make_facts(count: int) -> list[Fact]:
    """The first ``count`` facts: fact ``i`` uses name ``i``, place ``i`` and template ``i mod 6``."""
    if not isinstance(count, int) or not 0 < count <= len(NAMES):
        raise ValueError(f"the benchmark has facts for 1..{len(NAMES)} queries, asked for {count!r}")
    facts = []
    for i in range(count):
        sentence, query = TEMPLATES[i % len(TEMPLATES)]
        fill = {"name": NAMES[i], "place": PLACES[i]}
        facts.append(Fact(i, sentence.format(**fill), query.format(**fill)))
    return facts


def default_text() -> Path:
    """The tinyshakespeare text shipped in the package (``POSEMBED_TINYSHAKESPEARE`` overrides)."""
    return tinyshakespeare_path("pass a UTF-8 text file instead")


def corpus_tokens(tokenizer, text: str) -> tuple[list[int], list[bool]]:
    """Token ids of ``text`` (no special tokens) and, per token, whether it starts a word.

    Needs a fast tokenizer (``word_ids``).
    """
    encoding = tokenizer(text, add_special_tokens=False, verbose=False)
    words = encoding.word_ids()
    starts = [i == 0 or words[i] != words[i - 1] for i in range(len(words))]
    return list(encoding["input_ids"]), starts


def plant_documents(
    tokens: list[int],
    starts: list[bool],
    fact_ids: list[list[int]],
    facts: list[Fact],
    depths: list[float],
    body_length: int,
    rng: random.Random,
) -> list[Document]:
    """One document per fact, fact ``i`` at ``depths[i]``, each ``body_length`` tokens long.

    The filler is a random span of ``tokens`` cut at a word start, split at a word start where
    the fact goes in; it is the text as written, with the fact sentence inserted.
    """
    documents = []
    for fact, ids, depth in zip(facts, fact_ids, depths, strict=True):
        filler = body_length - len(ids)
        if filler < 0:
            raise ValueError(f"a {body_length}-token body cannot hold the {len(ids)}-token fact {fact.sentence!r}")
        if not 0.0 <= depth <= 1.0:
            raise ValueError(f"depth must lie in [0, 1], got {depth!r}")
        cut = round(depth * filler)
        start = _span_start(starts, filler, cut, rng)
        body = tokens[start : start + cut] + ids + tokens[start + cut : start + filler]
        documents.append(Document(fact, depth, tuple(body), cut, len(ids)))
    return documents


def _span_start(starts: list[bool], filler: int, cut: int, rng: random.Random) -> int:
    last = len(starts) - filler - 1
    if last < 0:
        raise ValueError(f"the text has {len(starts)} tokens, too few for {filler}-token documents")
    for _ in range(1000):
        start = rng.randint(0, last)
        while start < last and not (starts[start] and starts[start + cut]):
            start += 1
        if starts[start] and starts[start + cut]:
            return start
    raise ValueError("found no word boundary to plant a fact at; is the text tokenized with word_ids?")
