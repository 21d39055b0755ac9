import sys

from acelera.cli import main

sys.exit(main())
