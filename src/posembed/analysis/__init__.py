"""posembed.analysis: measure a model's positional embeddings (``posembed inspect``).

Pure numerical functions (``properties``, ``probes``, ``spectrum``, ``decomposition``), loaders
(``sources``, ``text_model``), figures (``plots``) and the report's sections (``table_sections``,
``model_sections``, orchestrated by ``inspect_report.run_inspect``).
"""
