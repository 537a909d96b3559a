"""Running many scenarios: one run in a worker (execute), where the runs go (executors), and the
resumable store of finished runs (store)."""
