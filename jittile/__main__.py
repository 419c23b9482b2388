"""``python -m jittile`` runs the ``jittile`` command."""

from jittile.cli import main

raise SystemExit(main())
