"""``python -m trainer``: the operator's command line (:func:`trainer.main.main`)."""

import sys

from trainer.main import main

sys.exit(main())
