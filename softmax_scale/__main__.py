"""``python -m softmax_scale``: the command line."""

import sys

from .cli import main

sys.exit(main())
