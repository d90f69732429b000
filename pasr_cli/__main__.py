import sys

from pasr_cli import main

sys.exit(main())
