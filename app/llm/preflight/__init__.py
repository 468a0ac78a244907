"""Moved: the model-folder check is the top-level ``preflight`` package (it runs in vLLM's venv
and imports nothing of the gateway). ``python -m app.llm.preflight`` still forwards to it."""
