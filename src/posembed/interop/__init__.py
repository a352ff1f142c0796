"""posembed.interop."""
