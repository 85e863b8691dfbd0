"""``python -m example_project.reference --port 8000``: serve the reference site."""

import sys

from .server import main

sys.exit(main())
