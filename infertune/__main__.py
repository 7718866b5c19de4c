"""python -m infertune rollout|verify ..."""
import sys

from .cli import main

sys.exit(main())
