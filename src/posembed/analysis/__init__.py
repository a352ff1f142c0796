"""posembed.analysis: measure a model's positional embeddings (``posembed inspect``).

Pure numerical functions (``properties``, ``probes``, ``spectrum``, ``decomposition``), loaders
(``sources``, ``text_model``), figures (``plots``) and the report's sections (``table_sections``,
``model_sections``, orchestrated by ``inspect_report.run_inspect``).

Files:

=================== ============================================================================
file                what
=================== ============================================================================
``properties``      similarity of position vectors, the three properties of Wang et al. 2021
``probes``          how much position information a set of vectors carries
``spectrum``        spectra of a position table and its best sinusoidal fit
``decomposition``   the four-term decomposition of first-layer attention logits
``rotary_math``     the numbers behind the rotary sections: wavelengths, decay, pair usage
``source_types``    what the inspector knows about one model (``Source``)
``sources``         where the tables come from: a Hugging Face folder, a lab checkpoint, a scheme
``scheme_source``   the ``Source`` of one library scheme alone
``lab_source``      the ``Source`` of a ``posembed lab`` checkpoint
``text_model``      real text through a real model: windows of ids, each layer's hidden states
``plots``           the inspector's figures
``scheme_plots``    the figures of the scheme sections (rotary and bias models)
``table_sections``  the report sections computed from the position table alone
``model_sections``  the model sections: the model on real text, attention logits, segments
``rotary_sections`` the rotary sections: wavelengths, long-term decay of q.k, pairs used
``bias_sections``   the bias sections: bias against distance per head, receptive field
``scheme_details``  the scheme, the RoPE config, the q/k weights
``findings``        one-line conclusions of the table and model sections
``inspect_report``  ``posembed inspect`` as a function: run the sections, write the report
``figures``         the docs' figures the inspector lacked, their style and deterministic SVG
``figures_lab``     the docs' figures of stored lab results: the forest plot, each arm's loss
=================== ============================================================================
"""

from posembed._utils.names import submodules

__getattr__ = submodules(__name__)  # posembed.analysis.<file>: imported on first use
