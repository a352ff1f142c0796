"""The long-context benchmark's data: LongEmbed-style passkey and needle documents, offline.

Two synthetic tasks after LongEmbed (Zhu et al. 2024, *LongEmbed: Extending Embedding Models for
Long Context Retrieval*, section 3.2), built from the shipped tinyshakespeare text:

``passkey``
    personalised passkey retrieval: ``"Brannoc's pass key is 48213. Remember it. 48213 is the pass
    key for Brannoc."``; the query is ``"What is the pass key for Brannoc?"``.
``needle``
    a planted sentence (``"The secret harbour of Lord Brannoc is called Velmora."``) and a query
    that paraphrases it without its key words (``"Where does Brannoc keep his hidden port?"``).

For one task and one document length, all candidates share **one filler span** of the text (in
token space, starting at a word) and differ only in the planted fact and where it sits: with ``n``
candidates, document ``i`` holds fact ``i`` at depth ``k / (n - 1)`` for a seeded permutation ``k``
of ``0 .. n-1`` (depth 0 puts the fact first, 1 last; it starts at the word boundary nearest to
``depth * (B - m)`` for a body of ``B`` tokens and an ``m``-token fact). Every query asks for
exactly one candidate: names are invented and checked absent from tinyshakespeare.

The filler comes from the **last tenth** of the text (:func:`split_text`); ``posembed extend
--finetune`` trains on the first nine tenths, so the tuned rows never saw the benchmark's filler.

Example:
    >>> fact = make_facts("needle", 7)[6]
    >>> fact.sentence, fact.query
    ('The secret harbour of Lord Halvard is called Tarnwick.', 'Where does Halvard keep his hidden port?')
    >>> make_facts("passkey", 1, seed=0)[0].query
    'What is the pass key for Brannoc?'
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from posembed._utils.data import tinyshakespeare_path

__all__ = [
    "TASKS",
    "Fact",
    "Document",
    "make_facts",
    "default_text",
    "read_text",
    "split_text",
    "corpus_tokens",
    "spread_depths",
    "plant_documents",
    "TEMPLATES",
    "NAMES",
    "PLACES",
]

#: the benchmark's tasks, in report order
TASKS = ("passkey", "needle")
#: the share of the text (from its start) kept for ``--finetune``; the rest is benchmark filler
TRAIN_SHARE = 0.9

PASSKEY = (
    "{name}'s pass key is {key}. Remember it. {key} is the pass key for {name}.",
    "What is the pass key for {name}?",
)
#: (needle sentence, query) templates; ``{name}`` and ``{place}`` are filled per fact
TEMPLATES: tuple[tuple[str, str], ...] = (
    ("The secret harbour of Lord {name} is called {place}.", "Where does {name} keep his hidden port?"),
    ("{name} buried the family gold beneath the old mill at {place}.", "Where did {name} hide the treasure?"),
    ("Captain {name} sails a ship named the {place}.", "What is the name of the vessel that {name} commands?"),
    ("Lady {name} keeps a tame falcon called {place}.", "What is the name of the bird that {name} owns?"),
    (
        "The merchant {name} buys his silk in the eastern city of {place}.",
        "Where does the trader {name} get his cloth?",
    ),
    ("The physician {name} was born in the mountain village of {place}.", "What is the hometown of doctor {name}?"),
)
NAMES = (
    "Brannoc",
    "Velric",
    "Osric",
    "Maelis",
    "Torvald",
    "Ysolde",
    "Halvard",
    "Corwen",
    "Isembard",
    "Merewyn",
    "Aldric",
    "Berengar",
    "Caelan",
    "Deorwin",
    "Elowen",
    "Fenwick",
    "Gideon",
    "Hesketh",
    "Idwal",
    "Jorund",
    "Kestrel",
    "Lorcan",
    "Morwenna",
    "Nerys",
    "Osgar",
    "Peregrine",
    "Quentor",
    "Rowena",
    "Sigrun",
    "Tamsin",
    "Ulric",
    "Vespera",
    "Wystan",
    "Xanthe",
    "Yorath",
    "Zephyrine",
    "Anwen",
    "Briallen",
    "Cadogan",
    "Dervla",
    "Eirlys",
    "Faolan",
    "Gwenllian",
    "Hywel",
    "Iolo",
    "Jessamy",
    "Kenelm",
    "Llinos",
    "Madoc",
    "Nesta",
    "Oriel",
    "Pryderi",
)
PLACES = (
    "Velmora",
    "Quillhaven",
    "Drestwick",
    "Marrowdene",
    "Thistlecombe",
    "Ebonreach",
    "Tarnwick",
    "Kelderby",
    "Wyncross",
    "Brackenholm",
    "Ormsgate",
    "Fallowmere",
    "Glimmerford",
    "Harrowdeep",
    "Lunecrest",
    "Mossgarth",
    "Nethercoil",
    "Pellinore",
    "Rookhaven",
    "Silverlode",
    "Umberfall",
    "Varrowmoor",
    "Whitlow",
    "Yarrowby",
    "Zennor",
    "Ashcombe",
    "Brightwater",
    "Coldharbour",
    "Duskmere",
    "Emberlyn",
    "Foxhollow",
    "Greymantle",
    "Hollowmere",
    "Ironvale",
    "Jasperine",
    "Oakenshaw",
    "Caerwynt",
    "Dunmarrow",
    "Elderwick",
    "Frostholm",
    "Galloway",
    "Hartsmere",
    "Islecombe",
    "Kingsbarrow",
    "Larkspire",
    "Mirebrook",
    "Northwold",
    "Penhallow",
    "Quarrystone",
    "Ravensend",
    "Saltcombe",
    "Thornbury",
)


@dataclass(frozen=True)
class Fact:
    """One planted fact and the query that asks for it."""

    index: int
    sentence: str
    query: str


@dataclass(frozen=True)
class Document:
    """One candidate document in token space.

    ``body`` holds the document's tokens without special tokens; the fact occupies
    ``body[fact_start : fact_start + fact_length]``.
    """

    fact: Fact
    depth: float
    body: tuple[int, ...]
    fact_start: int
    fact_length: int


def make_facts(task: str, count: int, seed: int = 0) -> list[Fact]:
    """The first ``count`` facts of ``task``: fact ``i`` is about name ``i``.

    Needle facts use place ``i`` and template ``i mod 6``; passkeys are distinct five-digit
    numbers drawn with ``seed``.
    """
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; the benchmark's tasks are {', '.join(TASKS)}")
    if not isinstance(count, int) or isinstance(count, bool) or not 0 < count <= len(NAMES):
        raise ValueError(f"the benchmark has facts for 1..{len(NAMES)} queries per length, asked for {count!r}")
    if task == "passkey":
        keys = random.Random(seed).sample(range(10_000, 100_000), count)
        sentence, query = PASSKEY
        return [Fact(i, sentence.format(name=NAMES[i], key=k), query.format(name=NAMES[i])) for i, k in enumerate(keys)]
    facts = []
    for i in range(count):
        sentence, query = TEMPLATES[i % len(TEMPLATES)]
        fill = {"name": NAMES[i], "place": PLACES[i]}
        facts.append(Fact(i, sentence.format(**fill), query.format(**fill)))
    return facts


def default_text() -> Path:
    """The tinyshakespeare text shipped in the package (``POSEMBED_TINYSHAKESPEARE`` overrides)."""
    return tinyshakespeare_path("pass a UTF-8 text file instead")


def read_text(path: str | Path) -> str:
    """A UTF-8 text file's contents; a file that is not UTF-8 is a ValueError naming the file."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not UTF-8 text ({error}); save it as UTF-8 or pass another file") from error
    except IsADirectoryError as error:
        raise ValueError(f"{path} is a folder, not a text file") from error


def split_text(text: str, share: float = TRAIN_SHARE) -> tuple[str, str]:
    """``(training part, benchmark part)``: the text cut at the line break nearest ``share`` of it.

    >>> split_text("ab\\ncd\\nef\\ngh\\n", 0.5)
    ('ab\\ncd\\n', 'ef\\ngh\\n')
    """
    if not 0.0 < share < 1.0:
        raise ValueError(f"share must lie in (0, 1), got {share!r}")
    cut = text.rfind("\n", 0, int(len(text) * share) + 1) + 1
    if cut <= 0:
        cut = int(len(text) * share)
    return text[:cut], text[cut:]


def corpus_tokens(tokenizer, text: str) -> tuple[list[int], list[bool]]:
    """Token ids of ``text`` (no special tokens) and, per token, whether it starts a word.

    Needs a fast tokenizer (``word_ids``).
    """
    encoding = tokenizer(text, add_special_tokens=False, verbose=False)
    words = encoding.word_ids()
    starts = [i == 0 or words[i] != words[i - 1] for i in range(len(words))]
    return list(encoding["input_ids"]), starts


def spread_depths(count: int, rng: random.Random) -> list[float]:
    """``count`` depths evenly spread over [0, 1] (both ends included), in a seeded order.

    >>> sorted(spread_depths(5, random.Random(0)))
    [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    if count == 1:
        return [0.5]
    depths = [k / (count - 1) for k in range(count)]
    rng.shuffle(depths)
    return depths


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

    All documents share one filler span of ``tokens`` that starts at a word (drawn with ``rng``);
    each is that span with its fact inserted at the word start nearest its depth, cut to
    ``body_length`` tokens.
    """
    longest = max((len(ids) for ids in fact_ids), default=0)
    if body_length - longest < 1:
        raise ValueError(f"a {body_length}-token body cannot hold a {longest}-token fact and any filler")
    start = _span_start(starts, body_length, rng)
    span = tokens[start : start + body_length]
    word = starts[start : start + body_length]
    documents = []
    for fact, ids, depth in zip(facts, fact_ids, depths, strict=True):
        if not 0.0 <= depth <= 1.0:
            raise ValueError(f"depth must lie in [0, 1], got {depth!r}")
        filler = body_length - len(ids)
        cut = _nearest_word_start(word, round(depth * filler), filler)
        body = span[:cut] + ids + span[cut:filler]
        documents.append(Document(fact, depth, tuple(body), cut, len(ids)))
    return documents


def _nearest_word_start(word: list[bool], target: int, limit: int) -> int:
    """The word start in ``0 .. limit`` nearest ``target`` (``limit`` itself counts: the end)."""
    for distance in range(limit + 1):
        for cut in (target - distance, target + distance):
            if 0 <= cut <= limit and (cut == limit or word[cut]):
                return cut
    return limit


def _span_start(starts: list[bool], length: int, rng: random.Random) -> int:
    last = len(starts) - length
    if last < 0:
        raise ValueError(f"the text has {len(starts)} tokens, too few for {length}-token documents")
    start = rng.randint(0, last)
    while start > 0 and not starts[start]:
        start -= 1
    return start
