"""``python -m trainer.cli``."""

from trainer.cli import app

app()
