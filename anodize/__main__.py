import sys

from anodize.cli import main

sys.exit(main())
