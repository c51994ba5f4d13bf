"""``python -m feedline`` runs the command line."""

import sys

from feedline.cli import main

sys.exit(main())
