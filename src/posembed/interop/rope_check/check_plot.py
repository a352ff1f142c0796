"""Plot of a RoPE check: wavelength per frequency pair, trained and target contexts marked.

matplotlib is imported lazily (Agg backend), only when a plot is asked for.
"""

from __future__ import annotations

from pathlib import Path

from posembed.interop.rope_check.check import RopeReport

__all__ = ["plot_wavelengths"]


def plot_wavelengths(report: RopeReport, path: str | Path) -> Path:
    """Write a PNG of every layer type's wavelengths (log scale), before and after scaling.

    Horizontal lines mark each layer type's trained context and the target (effective, or the
    ``length`` the check was run at); a pair above a line never completes a turn within it.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for layer in report.layers:
        if not layer.pairs:
            continue
        name = layer.settings.layer_type
        index = [row.index for row in layer.pairs]
        ax.plot(index, [row.wavelength for row in layer.pairs], "o-", ms=3, label=f"{name}: unscaled")
        ax.plot(
            index,
            [row.scaled_wavelength for row in layer.pairs],
            "s--",
            ms=3,
            label=f"{name}: {layer.settings.rope_type}",
        )
        if layer.trained_context:
            ax.axhline(layer.trained_context, color="gray", lw=1, label=f"{name}: trained {layer.trained_context}")
        target = report.target_length or layer.effective_context
        if target and target != layer.trained_context:
            ax.axhline(target, color="tab:red", lw=1, ls=":", label=f"{name}: target {target}")
    ax.set_yscale("log")
    ax.set_xlabel("frequency pair i")
    ax.set_ylabel("wavelength 2 pi / inv_freq (positions)")
    ax.set_title(f"RoPE wavelengths: {report.model_type or report.source}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
