"""``python -m app.llm.preflight MODEL_DIR``: the older spelling of ``python -m preflight``."""

from preflight.cli import main

raise SystemExit(main())
