"""The market-generation job handler (registered with the job runner at start-up)."""
