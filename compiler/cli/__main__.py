"""``python -m compiler.cli``: the same as the ``tracr-compile`` command."""

import sys

from compiler.cli.command_line import main

sys.exit(main())
