"""Test doubles for the LLM upstream: see tests/upstream/scripted_openai.py."""
