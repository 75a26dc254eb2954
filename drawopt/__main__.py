import sys

from drawopt.cli import main

sys.exit(main())
