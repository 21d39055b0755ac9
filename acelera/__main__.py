import sys

from acelera.demo import main

sys.exit(main())
