"""Unknown names suggest the closest known one: one helper (``_checks.did_you_mean``) at every lookup."""

from __future__ import annotations

import pytest

from posembed._utils.checks import did_you_mean


@pytest.mark.parametrize(
    "typed, known, suggestion",
    [
        ("llama_3", ["default", "linear", "llama3", "yarn"], "llama3"),
        ("LLAMA-3", ["default", "llama3"], "llama3"),
        ("smok", ["calibration", "full", "lengthgen", "quick", "smoke"], "smoke"),
        ("lenghtgen", ["calibration", "full", "lengthgen", "quick", "smoke"], "lengthgen"),
        ("sinus", ["sinusoidal_3d", "sinusoidal", "sinusoidal_2d"], "sinusoidal"),
        ("zzzz", ["quick", "smoke"], None),
        ("mrope", ["default", "linear", "llama3", "longrope", "yarn"], None),
        ("", ["quick"], None),
        (None, ["quick"], None),
    ],
)
def test_did_you_mean(typed, known, suggestion):
    assert did_you_mean(typed, known) == (f" (did you mean {suggestion!r}?)" if suggestion else "")


def test_presets():
    from posembed.lab.presets import get_preset

    with pytest.raises(ValueError, match=r"^unknown preset 'quik' \(did you mean 'quick'\?\); known presets: "):
        get_preset("quik")


def test_context_presets():
    from posembed.lab.context.presets import get_context_preset

    with pytest.raises(ValueError, match=r"^unknown context preset 'context_smoke' \(did you mean 'context-smoke'\?\)"):
        get_context_preset("context_smoke")


def test_lab_scheme_names():
    from posembed.lab.training.train import check_scheme_name

    with pytest.raises(ValueError, match=r"^unknown scheme 'Alibi' \(did you mean 'alibi'\?\); known: "):
        check_scheme_name("Alibi")


def test_the_cli_shows_the_suggestion(capsys):
    from posembed.cli import main

    assert main(["inspect", "--scheme", "sinusiodal"]) == 2
    assert "unknown scheme 'sinusiodal' (did you mean 'sinusoidal'?)" in capsys.readouterr().err


@pytest.mark.parametrize(
    "override, message",
    [
        ("stepz=5", "unknown key 'stepz' (did you mean 'steps'?); experiment keys: "),
        ("charlm.contxt=32", "unknown key 'charlm.contxt' (did you mean 'charlm.context'?); experiment keys: "),
        ("tasks=copy,revrse", "unknown task 'revrse' (did you mean 'reverse'?); known: "),
        ("variants=base,concatt", "unknown variant 'concatt' (did you mean 'concat'?); known: "),
    ],
)
def test_lab_overrides(override, message):
    from posembed.lab.config import apply_overrides
    from posembed.lab.presets import get_preset

    with pytest.raises(ValueError) as error:
        apply_overrides(get_preset("smoke"), [override])
    assert str(error.value).startswith(message)


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["inspct"],
            "posembed: error: argument COMMAND: invalid choice: 'inspct' (did you mean 'inspect'?); choose from ",
        ),
        (["lab", "runn"], "posembed lab: error: argument ACTION: invalid choice: 'runn' (did you mean 'run'?); "),
        (
            ["extend", "x", "--to", "1024", "--method", "interpolat"],
            "posembed extend: error: argument --method: invalid choice: 'interpolat' (did you mean 'interpolate'?); ",
        ),
    ],
)
def test_argparse_choices_suggest_the_closest(capsys, argv, message):
    from posembed.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].startswith(message)


def test_a_choice_far_from_every_known_one_keeps_argparse_s_message(capsys):
    from posembed.cli import main

    with pytest.raises(SystemExit):
        main(["zzz"])
    assert "invalid choice: 'zzz' (choose from " in capsys.readouterr().err


def test_extension_methods():
    import torch

    from posembed.interop.extend.methods import extend_table

    with pytest.raises(
        ValueError, match=r"^unknown extension method 'grouped_' \(did you mean 'grouped'\?\); choose one"
    ):
        extend_table(torch.zeros(8, 4), 16, "grouped_")
