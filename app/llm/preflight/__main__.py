"""``python -m app.llm.preflight MODEL_DIR``: see the package docstring."""

from app.llm.preflight.cli import main

raise SystemExit(main())
