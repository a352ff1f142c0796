"""Sweeps of trials: the runner, its store, worker processes, Ray and DDP, the lock, the listing."""
