"""posembed.lab."""
