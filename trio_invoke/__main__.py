"""``python -m trio_invoke``: the demo (see ``trio_invoke._demo``)."""

import sys

from ._demo import main

sys.exit(main())
