"""Contention studies: jobs alone and together under QoS policies, repeated over placements and
seeds (model: the study file; plan: the runs; runner: running them and writing the results)."""
