"""``python -m preflight MODEL_DIR``: see the package docstring."""

from preflight.cli import main

raise SystemExit(main())
