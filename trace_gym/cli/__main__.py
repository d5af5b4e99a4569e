import sys

from trace_gym.cli import main

sys.exit(main())
