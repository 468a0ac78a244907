"""Test helpers: a gateway under uvicorn in a subprocess, and a strict SSE reader."""
