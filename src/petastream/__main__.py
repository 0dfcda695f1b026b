"""``python -m petastream``: the ``petastream`` command."""

import sys

from petastream.cli import main

sys.exit(main())
