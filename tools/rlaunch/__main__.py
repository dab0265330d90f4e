import sys

from rlaunch.cli.commands import main

sys.exit(main())
