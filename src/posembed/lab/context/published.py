"""Published context-extension figures the study's verdicts compare against (data, copied here so
the package reads nothing outside itself at run time).

Source of each number: ``source`` (the paper, and the published data where there is some); how it
was checked: ``checked``. The YaRN figures are those of Peng et al. 2023 ("YaRN: Efficient Context
Window Extension of Large Language Models", arXiv 2309.00071) as tabulated in the authors'
repository (jquesnelle/yarn, ``data/``): the passkey table and the fine-tuned perplexities were
checked digit by digit against its CSVs (``data/passkey-32k.csv``,
``data/proofpile-long-small-8k.csv``, where PI is the row ``conceptofmind/LLongMA-2-7b``); the
no-fine-tuning perplexities are not in those tables and were not checked against a primary
table. They are LLM scale (Llama 7B): a CPU char-level study can only test their *ordering*,
not their values.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Claim", "CLAIMS", "PASSKEY_32K", "YARN_SOURCE"]

YARN_SOURCE = "Peng et al. 2023 (YaRN, arXiv 2309.00071); data: repository jquesnelle/yarn, data/ tables"
#: how each figure was checked (``Claim.checked``)
CHECKED_PASSKEY = "equals jquesnelle/yarn data/passkey-32k.csv exactly"
CHECKED_PPL_FT = (
    "equals jquesnelle/yarn data/proofpile-long-small-8k.csv (8192 and 16384 columns, rounded; "
    "PI = conceptofmind/LLongMA-2-7b)"
)
CHECKED_NOTES = "as the paper states it; not checked against a published data table"

#: passkey accuracy of Llama-7B fine-tuned to 32k, at 2k / 4k / 8k / 16k / 32k
PASSKEY_32K = {
    "lengths": (2048, 4096, 8192, 16384, 32768),
    "linear": (0.54, 0.52, 0.44, 0.50, 0.76),
    "ntk": (0.84, 0.80, 0.90, 0.92, 0.00),
    "ntk_by_parts": (0.96, 0.90, 0.80, 0.66, 0.12),
    "yarn": (1.00, 1.00, 0.98, 1.00, 0.68),
    "source": YARN_SOURCE,
    "checked": CHECKED_PASSKEY,
}


@dataclass(frozen=True)
class Claim:
    """A published ordering ``better`` beats ``worse`` on ``metric`` at ``scale`` x L.

    ``better`` / ``worse`` are ``(model, method)`` keys of the study's rows; ``scale`` ``"max"``
    means the longest evaluated length, ``"ft"`` the fine-tuning length, ``"2ft"`` twice it.
    """

    key: str
    text: str
    published: str
    source: str
    metric: str
    better: tuple[str, str]
    worse: tuple[str, str]
    scale: str
    why_not: str
    checked: str = CHECKED_NOTES


CLAIMS: tuple[Claim, ...] = (
    Claim(
        "yarn_vs_pi_no_ft",
        "Without fine-tuning, YaRN beats linear interpolation at the longest length",
        "Llama-2-7B at 16k (s = 8), no fine-tuning: perplexity PI 54.48, YaRN 6.60",
        YARN_SOURCE,
        "perplexity",
        ("rope", "yarn"),
        ("rope", "linear"),
        "max",
        "Expected to be close at small head dims: at head dim 16 and L = 96, YaRN interpolates 5 of the 8 pairs "
        "fully (wavelengths of 200 characters and more), keeps the fastest (6.3 characters) and only partly "
        "interpolates the next two; what separates them is that PI also compresses the fastest pairs, which "
        "carry character order.",
        CHECKED_NOTES + " (not in the repository's data/ CSVs)",
    ),
    Claim(
        "scaling_vs_extrapolation",
        "Any scaling beats plain extrapolation past L (PI's premise)",
        "Chen et al. 2023: the interpolation bound is ~600x smaller than the extrapolation bound; "
        "extrapolated RoPE perplexity explodes past L",
        "Chen et al. 2023 (Position Interpolation, arXiv 2306.15595)",
        "perplexity",
        ("rope", "linear"),
        ("rope", "extrapolate"),
        "max",
        "A char model leans on local order, carried by the fastest rotary pairs; PI compresses them "
        "by the extension factor while extrapolation keeps them exact and only meets unseen slow rotations, "
        "so PI can lose to extrapolation here; the frequency-aware methods (NTK, dynamic NTK, YaRN, Llama 3, "
        "LongRoPE) keep the fast pairs.",
    ),
    Claim(
        "alibi_vs_rope",
        "ALiBi extrapolates better than RoPE (no extension)",
        "char-level, trained at 128, evaluated at 2048: perplexity ALiBi 119.7, RoPE 280 "
        "(bob80333/investigating_extrapolation); Press et al. 2022 at 1.3B",
        "Press et al. 2022 (ALiBi, ICLR, arXiv 2108.12409); data: repository bob80333/investigating_extrapolation",
        "perplexity",
        ("alibi", "none"),
        ("rope", "extrapolate"),
        "max",
        "Holds at every published scale; would fail only if RoPE's model never attends far.",
    ),
    Claim(
        "yarn_vs_pi_passkey_ft",
        "After fine-tuning, YaRN retrieves passkeys better than PI",
        "Llama-7B fine-tuned to 32k, passkey at 2k..32k: YaRN 1.00/1.00/.98/1.00/.68, PI .54/.52/.44/.50/.76",
        YARN_SOURCE,
        "passkey_mean",
        ("rope+yarn", "yarn"),
        ("rope+linear", "linear"),
        "ft",
        "Needs retrieval learned at 1x first (a model that never learned it scores 0 everywhere) and a "
        "fine-tune long enough to relearn it at the fine-tuning length (~1000 steps published).",
        CHECKED_PASSKEY,
    ),
    Claim(
        "pi_vs_yarn_ppl_ft",
        "After fine-tuning, PI and YaRN tie at the fine-tuning length",
        "Llama-2-7B fine-tuned to 8k, perplexity at 8192: PI 3.344, YaRN 3.356 (within 0.4 %)",
        YARN_SOURCE,
        "perplexity_tie",
        ("rope+yarn", "yarn"),
        ("rope+linear", "linear"),
        "ft",
        "Fine-tuning budget and model size differ by orders of magnitude; a tie is judged at 2 %.",
        CHECKED_PPL_FT,
    ),
    Claim(
        "yarn_vs_pi_beyond_ft",
        "Beyond the fine-tuning length, YaRN degrades less than PI",
        "Llama-2-7B fine-tuned to 8k, perplexity at 16384: YaRN 77.2, PI 102.7",
        YARN_SOURCE,
        "perplexity",
        ("rope+yarn", "yarn"),
        ("rope+linear", "linear"),
        "2ft",
        "Both scheme factors are fixed at the fine-tuning ratio, so past it both extrapolate; the "
        "published gap is itself modest (77 vs 103).",
        CHECKED_PPL_FT,
    ),
)
