"""A transformers config's RoPE, read once: spellings, class defaults, per-layer types, latent attention, the builder, the check and its traps."""
