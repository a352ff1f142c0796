"""posembed.analysis."""
